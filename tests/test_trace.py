"""Traces in format v2 (spec/TRACE.md), recorded by real ``rebalance serve`` and
``rebalance proxy`` processes and by our member runtime on real sockets: every
line validates against spec/trace.schema.json, and the records say what
happened in Kafka's terms."""
import asyncio
import json
import re

from interop.harness import Server
from rebalance.impl.trace import Recorder
from traces import (
    PARTITIONS, TOPIC, ProxyProcess, form_group, group_records, hang_up, read_trace, record_wrong_upstream,
    responses, restart_serve,
)

UUID = r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"


def test_serve_and_member_traces(tmp_path):
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    try:
        async def run():
            members = await form_group(f"127.0.0.1:{server.port}", "AB", tmp_path)
            await hang_up(members)  # no heartbeat in flight: what a member sent, serve answered, both recorded
            return {m.client_id: set(m.ids.member_names.values()) - {""} for m in members}
        known = asyncio.run(run())
        restart_serve(server)  # the members are still in the group: the store keeps it
    finally:
        server.stop()

    records = read_trace(server.trace)
    assert records[0]["recorder"] == "serve" and records[0]["settings"] == {
        "topics": [{"name": TOPIC, "partitions": PARTITIONS}], "group_initial_rebalance_delay_ms": 0,
        "mutations": [], "group_min_session_timeout_ms": Server.MIN_SESSION_MS, "group_max_session_timeout_ms": 1_800_000,
        "group_consumer_session_timeout_ms": 45_000}
    assert [r["groups"] for r in records if r["type"] == "restart"] == [["g"]]
    opens = [r["connection"] for r in records if r["type"] == "open"]
    assert opens == [f"c{n}" for n in range(1, len(opens) + 1)]

    # member ids are the Kafka strings serve handed out: client.id, "-", a UUID
    ids = {r["body"]["member_id"] for r in responses(records, "JoinGroup")}
    assert all(re.fullmatch(f"[AB]-{UUID}", i) for i in ids) and {i[0] for i in ids} == {"A", "B"}
    assert set().union(*known.values()) == ids
    used = {r["body"]["member_id"] for r in records if r["type"] == "request" and r["api"] != "JoinGroup"}
    assert used <= ids
    ok = [r["body"]["generation_id"] for r in responses(records, "JoinGroup") if r["body"]["error"] == "NONE"]
    assert ok[-2:] == [3, 3]  # B's join: a revoking round (2), then the follow-up (3)
    assert Server.generations(server) == ok
    assigned = [r["body"]["assignment"] for r in responses(records, "SyncGroup")]
    assert sorted(p for a in assigned[-2:] for tp in a["assigned_partitions"] for p in tp["partitions"]) == [0, 1, 2, 3]

    # each member's own trace is what serve recorded on that connection, record for record
    serve_connections = list(group_records(records).values())
    for name in "AB":
        mine = read_trace(tmp_path / f"{name}.jsonl")
        assert mine[0]["recorder"] == "member"
        (seen,) = group_records(mine).values()
        assert seen in serve_connections, f"{name}'s records differ from serve's"


def test_recorder_error_stops_recording_and_nothing_else(tmp_path, caplog):
    trace = Recorder(tmp_path / "t.jsonl", "serve")
    trace.begin({"topics": [], "group_initial_rebalance_delay_ms": 0, "mutations": []})
    name = trace.open("127.0.0.1")
    trace.request(name, b"\x00\x0b\x00\x09garbage")  # a JoinGroup v9 that does not parse
    assert not trace.enabled
    trace.close(name)  # no error: recording has stopped
    assert [json.loads(x)["type"] for x in (tmp_path / "t.jsonl").read_text().splitlines()] == ["header", "open"]
    assert "trace recording stopped" in caplog.text
    assert not Recorder(None, "serve").enabled


def test_proxy_records_what_serve_records(tmp_path):
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    proxy = ProxyProcess(tmp_path, server.port)
    try:
        async def run():
            members = await form_group(f"127.0.0.1:{proxy.port}", "AB")
            assert {m.wire.writer.get_extra_info("peername")[1] for m in members} == {proxy.port}
            await hang_up(members)
        asyncio.run(run())
    finally:
        proxy.stop()
        server.stop()

    records, upstream = read_trace(proxy.trace), read_trace(server.trace)
    assert records[0]["recorder"] == "proxy" and records[0]["settings"] == {
        "topics": [{"name": TOPIC, "partitions": PARTITIONS}], "group_initial_rebalance_delay_ms": 0,
        "mutations": [], "upstream": f"127.0.0.1:{server.port}",
        "group_min_session_timeout_ms": Server.MIN_SESSION_MS, "group_max_session_timeout_ms": 1_800_000,
        "group_consumer_session_timeout_ms": 45_000}
    ok = [r for r in responses(records, "JoinGroup") if r["body"]["error"] == "NONE"]
    assert len({r["body"]["member_id"] for r in ok}) == 2 and ok[-1]["body"]["generation_id"] == 3
    # record for record: same APIs, errors, member ids and bodies, in the same order per connection
    mine, theirs = group_records(records), group_records(upstream)
    assert sorted(map(json.dumps, mine.values())) == sorted(map(json.dumps, theirs.values()))
    # every connection serve saw came from the proxy: the clients' and its own Metadata at start
    count = lambda rs: sum(r["type"] == "open" for r in rs)  # noqa: E731
    assert count(upstream) == count(records) + 1


def test_wrong_upstream_accepts_a_stale_commit(tmp_path):
    records = read_trace(record_wrong_upstream(tmp_path))
    (commit,) = [r for r in records if r["type"] == "request" and r["api"] == "OffsetCommit"]
    (answer,) = responses(records, "OffsetCommit")
    assert commit["body"]["generation_id"] == 1 and commit["body"]["member_id"].startswith("A-")
    assert answer["body"]["topics"] == [{"name": TOPIC, "partitions": [{"partition": 0, "error": "NONE"}]}]
    assert max(r["body"]["generation_id"] for r in responses(records, "JoinGroup")) == 3


def test_correct_upstream_fences_the_stale_commit(tmp_path):
    records = read_trace(record_wrong_upstream(tmp_path, mutations=()))
    (answer,) = responses(records, "OffsetCommit")
    assert answer["body"]["topics"][0]["partitions"][0]["error"] == "ILLEGAL_GENERATION"


def test_proxy_pipelines_in_order_and_a_bad_frame_costs_its_connection_only(tmp_path):
    import socket
    import struct

    from rebalance.impl.wire import Api, read_response, request_frame

    def read(sock):
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        return sock.recv(size, socket.MSG_WAITALL)

    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    proxy = ProxyProcess(tmp_path, server.port)
    try:
        good = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        bad = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        good.sendall(request_frame(Api.METADATA, 12, 7, "raw", {"topics": None, "allow_auto_topic_creation": False,
                                                                   "include_topic_authorized_operations": False})
                     + request_frame(Api.FIND_COORDINATOR, 4, 8, "raw", {"key_type": 0, "coordinator_keys": ["g"]}))
        bad.sendall(struct.pack(">i", -5) + b"junk")
        assert bad.recv(1) == b""  # closed
        correlation, meta = read_response(read(good), Api.METADATA, 12)
        assert correlation == 7 and [(b.host, b.port) for b in meta.brokers] == [("127.0.0.1", proxy.port)]
        correlation, found = read_response(read(good), Api.FIND_COORDINATOR, 4)
        assert correlation == 8 and [(c.host, c.port) for c in found.coordinators] == [("127.0.0.1", proxy.port)]
        good.close()
        bad.close()
    finally:
        proxy.stop()  # asserts no traceback in the proxy's log
        server.stop()
    assert any("frame size -5" in line for line in proxy.log)


def test_closing_a_member_never_cuts_a_heartbeat_in_half(tmp_path):
    """MemberRuntime.close() cancelled the heartbeat task even while it waited for its
    response; the LeaveGroup then read the Heartbeat's response (a malformed frame or
    a correlation mismatch). Heartbeats every 1 ms make the window wide."""
    from rebalance.impl.member import MemberRuntime
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)

    async def run():
        for i in range(20):
            m = MemberRuntime(f"127.0.0.1:{server.port}", f"g{i}", [TOPIC], client_id=f"c{i}", heartbeat_ms=1,
                              session_ms=1000)
            await m.start()
            await asyncio.sleep(0.03)
            await m.close()
    try:
        asyncio.run(run())
    finally:
        server.stop()
