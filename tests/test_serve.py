"""``rebalance serve`` on real sockets with a raw wire client: the group protocol
end to end, and malformed frames that cost their own connection only."""
import contextlib
import socket
import struct
import threading
import time

import pytest

from interop.harness import Server, wait_for
from rebalance.impl.wire import Api, read_response, request_frame


class Client:
    """A blocking Kafka wire client on one connection."""

    def __init__(self, port: int, client_id: str = "raw"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.client_id, self.correlation = client_id, 0

    def call(self, api: int, version: int, **fields):
        self.correlation += 1
        self.sock.sendall(request_frame(api, version, self.correlation, self.client_id, fields))
        size = struct.unpack(">i", self._read(4))[0]
        correlation, body = read_response(self._read(size), api, version)
        assert correlation == self.correlation
        return body

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the server")
            data += chunk
        return data

    def join(self, group: str, member_id: str = "", timeout_ms: int = 10_000):
        """JoinGroup v9 with ``timeout_ms`` as both session and rebalance timeout."""
        return self.call(Api.JOIN_GROUP, 9, group_id=group, session_timeout=timeout_ms, rebalance_timeout=timeout_ms,
                         member_id=member_id, group_instance_id=None, protocol_type="consumer",
                         protocols=[{"name": "range", "metadata": b"meta"}], reason=None)


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path, "t:4", initial_delay_ms=0)
    yield s
    s.stop()


def stable_member(port: int, timeout_ms: int = 10_000, group: str = "g"):
    """A lone member of ``group``, joined (after MEMBER_ID_REQUIRED, its session and
    rebalance timeouts ``timeout_ms``) and synced: (client, member_id, generation)."""
    c = Client(port, "lone")
    r = c.join(group, timeout_ms=timeout_ms)
    assert r.error_code == 79  # MEMBER_ID_REQUIRED (R36)
    r = c.join(group, r.member_id, timeout_ms)
    assert r.error_code == 0 and r.leader == r.member_id and r.protocol_name == "range"
    s = c.call(Api.SYNC_GROUP, 5, group_id=group, generation_id=r.generation_id, member_id=r.member_id,
               group_instance_id=None, protocol_type="consumer", protocol_name="range",
               assignments=[{"member_id": r.member_id, "assignment": b"all of it"}])
    assert s.error_code == 0 and s.assignment == b"all of it"
    return c, r.member_id, r.generation_id


def closed(sock: socket.socket, timeout: float = 5) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


GARBAGE = {
    "truncated frame": struct.pack(">i", 100) + b"\x00\x0b\x00\x09",
    "oversized frame": struct.pack(">i", 2**31 - 1) + b"\x00" * 64,
    "negative size": struct.pack(">i", -5),
    "short header": frame(b"\x00\x0b"),
    "unknown api key": frame(struct.pack(">hhi", 999, 0, 1) + b"\x00\x00"),
    "unsupported version": frame(struct.pack(">hhi", Api.JOIN_GROUP, 42, 1) + b"\x00\x00"),
    "truncated body": frame(struct.pack(">hhi", Api.JOIN_GROUP, 5, 1) + b"\x00\x00\x00\x01g\x00"),
    "garbage": frame(bytes(range(200, 232))),
}


def test_malformed_frames_close_their_connection_only(server):
    member, mid, generation = stable_member(server.port)
    errors, stop = [], threading.Event()

    def heartbeat():
        while not stop.is_set():
            errors.append(member.call(Api.HEARTBEAT, 4, group_id="g", generation_id=generation, member_id=mid,
                                      group_instance_id=None).error_code)
            time.sleep(0.05)
    beating = threading.Thread(target=heartbeat)
    beating.start()
    try:
        for name, data in GARBAGE.items():
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                s.sendall(data)
                if name == "truncated frame":
                    s.shutdown(socket.SHUT_WR)
                assert closed(s), name
            assert server.alive(), name
        # ApiVersions at a version we do not speak: UNSUPPORTED_VERSION and our versions (KIP-511)
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(frame(struct.pack(">hhi", Api.API_VERSIONS, 99, 7) + b"\x00\x00"))
            size = struct.unpack(">i", s.recv(4))[0]
            correlation, body = read_response(s.recv(size, socket.MSG_WAITALL), Api.API_VERSIONS, 0)
            assert correlation == 7 and body.error_code == 35 and len(body.api_keys) >= 10
        time.sleep(1)
    finally:
        stop.set()
        beating.join()
    assert len(errors) > 10 and set(errors) == {0}  # the member never noticed
    assert any("closing connection" in line for line in server.log)


def test_a_second_member_rebalances_the_group_and_fencing_holds(server):
    a, a_id, generation = stable_member(server.port)
    b = Client(server.port, "other")
    b_id = b.join("g").member_id
    result = {}
    held = threading.Thread(target=lambda: result.update(b=b.join("g", b_id)))  # held at the barrier
    held.start()
    time.sleep(0.3)
    hb = a.call(Api.HEARTBEAT, 4, group_id="g", generation_id=generation, member_id=a_id, group_instance_id=None)
    assert hb.error_code == 27  # REBALANCE_IN_PROGRESS: A finds the rebalance through its heartbeat (R10)
    r = a.join("g", a_id)
    held.join(10)  # B's JoinGroup response, sent as the barrier fell
    assert r.generation_id == result["b"].generation_id == generation + 1
    assert {m.member_id for m in r.members} == {a_id, b_id}
    stale = a.call(Api.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation, member_id=a_id,
                   group_instance_id=None, topics=[{"name": "t", "partitions": [
                       {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                        "committed_metadata": None}]}])
    assert stale.topics[0].partitions[0].error_code == 22  # ILLEGAL_GENERATION: the fence (R9)


def test_describe_groups_and_admin_removal_of_a_static_member(server):
    c = Client(server.port, "static")
    r = c.call(Api.JOIN_GROUP, 9, group_id="s", session_timeout=10_000, rebalance_timeout=10_000, member_id="",
               group_instance_id="host-1", protocol_type="consumer",
               protocols=[{"name": "range", "metadata": b"m"}], reason=None)
    assert r.error_code == 0  # static members get no MEMBER_ID_REQUIRED (R36)
    c.call(Api.SYNC_GROUP, 5, group_id="s", generation_id=r.generation_id, member_id=r.member_id,
           group_instance_id="host-1", protocol_type="consumer", protocol_name="range",
           assignments=[{"member_id": r.member_id, "assignment": b"a"}])
    admin = Client(server.port, "admin")
    (g,) = admin.call(Api.DESCRIBE_GROUPS, 5, groups=["s"], include_authorized_operations=False).groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.group_instance_id, m.client_id, m.member_assignment) for m in g.members] == [
        (r.member_id, "host-1", "static", b"a")]
    # the admin removal of a static member: by instance id, with no member id (KIP-345)
    left = admin.call(Api.LEAVE_GROUP, 5, group_id="s", members=[
        {"member_id": "", "group_instance_id": "host-1", "reason": None}])
    assert [(m.member_id, m.error_code) for m in left.members] == [(r.member_id, 0)]
    (g,) = admin.call(Api.DESCRIBE_GROUPS, 5, groups=["s"], include_authorized_operations=False).groups
    assert g.group_state == "Empty" and g.members == ()


def test_describe_groups_in_a_rebalance_shows_the_kept_assignments(server):
    """Kafka 4.4.0's DescribeGroups outside Stable, on serve (tests/test_kafka_broker.py: on
    Kafka)."""
    described_while_rebalancing(server.port, "g")


def described_while_rebalancing(port: int, group: str) -> None:
    """Kafka 4.4.0's DescribeGroups outside Stable (GroupMetadataManager.describeGroups,
    ClassicGroupMember.describeNoMetadata): no protocol and no member metadata, but each
    member's stored assignment, which a rebalance started from Stable keeps (R3)."""
    a, a_id, _ = stable_member(port, group=group)
    b = Client(port, "joiner")
    r = b.join(group)
    assert r.error_code == 79  # MEMBER_ID_REQUIRED (R36)

    def rejoin():  # held at the barrier (R4) until the test ends, when the server closes the connection
        with contextlib.suppress(ConnectionError):
            b.join(group, r.member_id)
    held = threading.Thread(target=rejoin, daemon=True)
    held.start()
    admin = Client(port, "admin")

    def described():
        return admin.call(Api.DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=False).groups[0]
    wait_for(lambda: described().group_state == "PreparingRebalance", 5, "the group to prepare a rebalance")
    g = described()
    assert (g.protocol_type, g.protocol_data) == ("consumer", "")
    members = {m.member_id: (m.member_metadata, m.member_assignment) for m in g.members}
    assert members[a_id] == (b"", b"all of it")
    assert members[r.member_id] == (b"", b"")


def zero_request(api: int, version: int, null_field: str | None = None, nulls: bool = True, **given) -> bytes:
    """A request frame of ``api`` at ``version`` whose fields are all empty (0, "", [],
    null where the schema allows; with ``nulls`` False, [] and "" there too), but
    ``null_field``, a non-nullable array, null, and the top-level fields ``given``."""
    import datetime
    import typing
    from dataclasses import fields

    from kio.index import load_request_schema
    cls = load_request_schema(api, version)
    hints = typing.get_type_hints(cls)
    data = {}
    for f in fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint)
        if type(None) in args and nulls:
            data[f.name] = None
        elif type(None) in args:
            hint = next(a for a in args if a is not type(None))
        if f.name in data:
            pass
        elif typing.get_origin(hint) is tuple:
            data[f.name] = []
        elif hint is bool:
            data[f.name] = False
        elif issubclass(hint, (str, bytes)):
            data[f.name] = hint("" if issubclass(hint, str) else b"")  # kio's phantom types take a value
        elif issubclass(hint, datetime.timedelta):
            data[f.name] = 0
        else:
            data[f.name] = hint(0)
    if null_field is not None:
        assert null_field in data and typing.get_origin(hints[null_field]) is tuple
        data[null_field] = None
    data.update(given)
    return request_frame(api, version, 1, "nulls", data)


# (API, a version serve advertises, a non-nullable array): issue 18 item 7's eight APIs
NULL_ARRAYS = [(Api.OFFSET_FETCH, 1, "topics"), (Api.JOIN_GROUP, 9, "protocols"), (Api.SYNC_GROUP, 5, "assignments"),
               (Api.LEAVE_GROUP, 5, "members"), (Api.DESCRIBE_GROUPS, 5, "groups"), (Api.LIST_OFFSETS, 7, "topics"),
               (Api.FETCH, 12, "topics"), (Api.OFFSET_COMMIT, 8, "topics")]


def test_a_null_array_the_schema_forbids_closes_the_connection_without_a_traceback(server):
    """Kafka's generated readers refuse "non-nullable field ... serialized as null" and
    the broker closes the connection; serve did the same only after a TypeError."""
    member, mid, generation = stable_member(server.port)
    for api, version, field in NULL_ARRAYS:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(zero_request(api, version, field))
            assert closed(s), (api, field)
        assert server.alive()
        wait_for(lambda: any(f"{field} is null, which the schema forbids" in line for line in server.log), 10,
                 f"the log line of {api}'s null {field}")  # the log is read on another thread
        # the member is still served, and heartbeats each round: under load the eight rounds can outlast its
        # 10 s session, which would expire it for a reason this test is not about
        assert member.call(Api.HEARTBEAT, 4, group_id="g", generation_id=generation, member_id=mid,
                           group_instance_id=None).error_code == 0, (api, field)
    assert not any("Traceback" in line or "internal error" in line for line in server.log)


def test_commits_to_partitions_this_broker_does_not_host_are_refused_and_not_stored(server):
    """UNKNOWN_TOPIC_OR_PARTITION per partition (KafkaApis.handleOffsetCommitRequest);
    the hosted partitions of the same request are committed as usual."""
    member, mid, generation = stable_member(server.port)
    r = member.call(Api.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation, member_id=mid,
                    group_instance_id=None, topics=[
                        {"name": "t", "partitions": [{"partition_index": 1, "committed_offset": 5,
                                                      "committed_leader_epoch": -1, "committed_metadata": None},
                                                     {"partition_index": 9, "committed_offset": 5,
                                                      "committed_leader_epoch": -1, "committed_metadata": None}]},
                        {"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                         "committed_leader_epoch": -1, "committed_metadata": None}]}])
    errors = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert errors == {("t", 1): 0, ("t", 9): 3, ("nope", 0): 3}
    f = member.call(Api.OFFSET_FETCH, 7, group_id="g", topics=None, require_stable=False)
    stored = {(t.name, p.partition_index): p.committed_offset for t in f.topics for p in t.partitions}
    assert stored == {("t", 1): 5}


@pytest.mark.spec("R42")
@pytest.mark.parametrize("session_ms", [Server.MIN_SESSION_MS - 1, 1_800_001, 2**31 - 1])
def test_a_session_timeout_outside_the_brokers_bounds_is_refused(server, session_ms):
    """INVALID_SESSION_TIMEOUT at once and no group made (GroupCoordinator.handleJoinGroup);
    2**31-1 ms used to be accepted, so the pending member id never expired."""
    c = Client(server.port, "greedy")
    r = c.call(Api.JOIN_GROUP, 9, group_id="greedy", session_timeout=session_ms, rebalance_timeout=10_000,
               member_id="", group_instance_id=None, protocol_type="consumer",
               protocols=[{"name": "range", "metadata": b"m"}], reason=None)
    assert r.error_code == 26 and r.member_id == "" and r.generation_id == -1
    d = c.call(Api.DESCRIBE_GROUPS, 5, groups=["greedy"], include_authorized_operations=False)
    assert d.groups[0].group_state == "Dead"  # nothing was made for it
    assert c.join("greedy").error_code == 79  # within bounds: MEMBER_ID_REQUIRED, as usual


@pytest.mark.spec("R42")
def test_a_member_refused_its_session_timeout_stops_instead_of_rejoining():
    from rebalance.model.config import GroupConfig
    from rebalance.model.member import NEW_CONSUMER, MemberPhase, handle
    from rebalance.model.protocol import Error, JoinGroupResponse, Send, Start
    cfg = GroupConfig()
    c, out = handle(cfg, NEW_CONSUMER, Start())
    c, out = handle(cfg, c, JoinGroupResponse(Error.INVALID_SESSION_TIMEOUT, 0, -1, 0, ()))
    assert c.phase == MemberPhase.LEFT and not any(type(o) is Send for o in out)
