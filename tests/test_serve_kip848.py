"""``rebalance serve`` answers KIP-848's ConsumerGroupHeartbeat (API 68), ConsumerGroupDescribe
(API 69) and the OffsetCommits of a consumer group through the model's consumer group
coordinator (model/consumer_group/coordinator.py), on real sockets with a raw kio client:
joins, reconciliation, leaves, static members, the model's errors and the session timeout
on serve's timers. One server for the module; each test its own group."""
import time

import pytest

from interop.harness import Server, wait_for
from rebalance.impl.broker import topic_id
from rebalance.impl.wire import Api
from test_serve import Client

T = topic_id("t")
SESSION_MS = 600


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("kip848"), "t:4", initial_delay_ms=0,
               args=("--group-consumer-session-timeout-ms", SESSION_MS, "--group-consumer-heartbeat-interval-ms", 100))
    yield s
    s.stop()


def beat(c, group, member, epoch, topics=None, owned=None, instance=None, version=1, rebalance_ms=-1, tid=T,
         **extra):
    """One ConsumerGroupHeartbeat; ``owned``: partitions of t (None: not sent); ``tid``: t's topic id."""
    fields = dict(group_id=group, member_id=member, member_epoch=epoch, instance_id=instance, rack_id=None,
                  rebalance_timeout=rebalance_ms, subscribed_topic_names=topics, subscribed_topic_regex=None,
                  server_assignor=None,
                  topic_partitions=None if owned is None else [{"topic_id": tid, "partitions": owned}] if owned else [])
    fields.update(extra)
    return c.call(Api.CONSUMER_GROUP_HEARTBEAT, version, **fields)


def join(c, group, member, instance=None, tid=T):
    return beat(c, group, member, 0, ["t"], [], instance, rebalance_ms=30_000, tid=tid)


def parts(r, tid=T) -> list:
    """The partitions of t in a response's assignment (None: no assignment sent)."""
    if r.assignment is None:
        return None
    assert all(tp.topic_id == tid for tp in r.assignment.topic_partitions)
    return sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions)


def conversation(port: int, tid, group: str) -> list:
    """A fixed exchange of raw heartbeats, each answer as (what, error, epoch, assignment):
    two members share t, revoke before the other is given (the group described meanwhile), a
    stale and an early epoch, an unknown member, a join reporting partitions, a static member's
    temporary leave and its restart, a leave. Played on serve and on Kafka (tests/test_interop_kip848.py) alike.
    Member epochs are sent as answered and noted relative to the first join's (Kafka 4.4.0
    creates a group at epoch 1, the model at 0: docs/kip848.md, finding K-F3)."""
    a, b, s = Client(port, "a"), Client(port, "b"), Client(port, "s")
    out, base = [], []

    def note(what, r):
        epoch = r.member_epoch
        if r.error_code == 0 and epoch > 0:
            base[:] = base or [epoch - 1]
            epoch -= base[0]
        out.append((what, int(r.error_code), epoch if r.error_code == 0 else None,
                    parts(r, tid) if r.error_code == 0 else None))
        return r

    ea = note("A joins", join(a, group, "A", tid=tid)).member_epoch
    eb = note("B joins", join(b, group, "B", tid=tid)).member_epoch
    kept = parts(note("A heartbeats owning all", beat(a, group, "A", ea, owned=[0, 1, 2, 3], tid=tid)), tid)
    described = a.call(Api.CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group], include_authorized_operations=False)
    out.append(("A revoking and B waiting, described", int(described.groups[0].error_code), None,
                [sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
                 for m in sorted(described.groups[0].members, key=lambda m: m.member_id)]))
    ea2 = note("A revoked", beat(a, group, "A", ea, owned=kept, tid=tid)).member_epoch
    note("B heartbeats", beat(b, group, "B", eb, owned=[], tid=tid))
    note("A at an epoch ahead", beat(a, group, "A", ea2 + 5, owned=kept, tid=tid))
    note("A at its previous epoch", beat(a, group, "A", ea, owned=kept, tid=tid))
    note("an unknown member", beat(a, group, "X", ea2, tid=tid))
    note("a join owning partitions", beat(a, group, "Y", 0, ["t"], [0], rebalance_ms=1000, tid=tid))
    es = note("S joins static", join(s, group, "S1", instance="i-s", tid=tid)).member_epoch
    note("S2 joins as i-s", join(s, group, "S2", instance="i-s", tid=tid))
    note("S leaves for now", beat(s, group, "S1", -2, instance="i-s", tid=tid))
    note("S2 joins as i-s again", join(s, group, "S2", instance="i-s", tid=tid))
    note("S1 heartbeats", beat(s, group, "S1", es, instance="i-s", tid=tid))
    note("B leaves", beat(b, group, "B", -1, tid=tid))
    note("B heartbeats after", beat(b, group, "B", eb, tid=tid))
    return out


# the conversation's answers on serve; tests/test_interop_kip848.py holds Kafka 4.4.0 to the same
CONVERSATION = [
    ("A joins", 0, 1, [0, 1, 2, 3]),
    ("B joins", 0, 2, []),  # its target is held by A: given nothing yet (UNRELEASED_PARTITIONS)
    ("A heartbeats owning all", 0, 1, [0, 1]),  # A must revoke t-2, t-3 first: it stays at epoch 1
    # each member's assignment as ConsumerGroupDescribe gives it: A's includes t-2, t-3, pending revocation (K17)
    ("A revoking and B waiting, described", 0, None, [[0, 1, 2, 3], []]),
    ("A revoked", 0, 2, None),
    ("B heartbeats", 0, 2, [2, 3]),  # released: given
    ("A at an epoch ahead", 110, None, None),  # FENCED_MEMBER_EPOCH
    ("A at its previous epoch", 0, 2, None),  # tolerated: its owned partitions are within its assignment (K3)
    ("an unknown member", 25, None, None),  # UNKNOWN_MEMBER_ID
    ("a join owning partitions", 42, None, None),  # INVALID_REQUEST
    ("S joins static", 0, 3, []),
    ("S2 joins as i-s", 111, None, None),  # UNRELEASED_INSTANCE_ID: S1 holds it
    ("S leaves for now", 0, -2, None),
    ("S2 joins as i-s again", 0, 3, []),  # replaces S1 at its epoch, with its (empty) assignment
    ("S1 heartbeats", 82, None, None),  # FENCED_INSTANCE_ID
    ("B leaves", 0, -1, None),
    ("B heartbeats after", 25, None, None),
]


def test_serve_advertises_the_kip848_apis(server):
    c = Client(server.port)
    r = c.call(Api.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    versions = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert versions[68] == (0, 1) and versions[69] == (0, 1)  # Kafka 4.4.0's ConsumerGroupHeartbeat/Describe
    assert versions[8][1] == 9  # OffsetCommit v9: a consumer protocol member's (ConsumerGroup.java:675)
    m = c.call(Api.METADATA, 12, topics=[{"name": None, "topic_id": T}], allow_auto_topic_creation=False,
               include_topic_authorized_operations=False)
    assert [(t.name, t.topic_id, len(t.partitions)) for t in m.topics] == [("t", T, 4)]  # by id, as librdkafka asks


def test_two_members_share_the_partitions_a_partition_given_only_once_released(server):
    a, b = Client(server.port, "a"), Client(server.port, "b")
    r = join(a, "share", "A")
    assert (r.error_code, r.member_id, r.member_epoch, parts(r)) == (0, "A", 1, [0, 1, 2, 3])
    assert r.heartbeat_interval.total_seconds() == 0.1
    r = join(b, "share", "B")  # B's target is two of A's partitions: not released yet
    assert (r.error_code, r.member_epoch, parts(r)) == (0, 2, [])
    r = beat(a, "share", "A", 1)  # A must revoke first: it stays at epoch 1, its assignment shrinks
    assert (r.member_epoch, len(parts(r))) == (1, 2)
    kept = parts(r)
    r = beat(a, "share", "A", 1, owned=kept)  # revoked: A moves to epoch 2
    assert (r.error_code, r.member_epoch) == (0, 2)
    r = beat(b, "share", "B", 2)  # released: B is given the rest
    assert sorted(parts(r) + kept) == [0, 1, 2, 3]
    d = a.call(Api.CONSUMER_GROUP_DESCRIBE, 1, group_ids=["share", "nope"], include_authorized_operations=False)
    g, missing = d.groups
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == ("Stable", 2, 2, "uniform")
    assert sorted(m.member_id for m in g.members) == ["A", "B"] and missing.error_code == 69  # GROUP_ID_NOT_FOUND
    listed = a.call(Api.LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"])
    assert ("share", "consumer", "Stable") in {(x.group_id, x.group_type, x.group_state) for x in listed.groups}


def test_the_models_errors_reach_the_wire(server):
    c = Client(server.port)
    assert beat(c, "errs", "X", 3).error_code == 25  # UNKNOWN_MEMBER_ID
    join(c, "errs", "A")
    assert beat(c, "errs", "A", 7).error_code == 110  # FENCED_MEMBER_EPOCH: ahead of the member's epoch
    assert beat(c, "errs", "B", 0, ["t"], [1], rebalance_ms=1000).error_code == 42  # a join owns nothing (K2)
    assert beat(c, "errs", "", 0, ["t"], [], rebalance_ms=1000).error_code == 42  # v1: the client names itself
    assert beat(c, "errs", "B", 0, ["t"], []).error_code == 42  # a join gives its rebalance timeout
    r = beat(c, "errs", "B", 0, ["t"], [], rebalance_ms=1000, server_assignor="nope")
    assert r.error_code == 112  # UNSUPPORTED_ASSIGNOR
    r = beat(c, "errs", "", 0, ["t"], [], version=0, rebalance_ms=1000)  # v0: the coordinator names it
    assert r.error_code == 0 and r.member_id


def test_a_leave_gives_the_partitions_to_the_member_that_stays(server):
    a, b = Client(server.port, "a"), Client(server.port, "b")
    join(a, "leave", "A")
    join(b, "leave", "B")
    r = beat(b, "leave", "B", -1)
    assert (r.error_code, r.member_epoch) == (0, -1)
    r = beat(a, "leave", "A", 1, owned=[0, 1, 2, 3])  # A keeps all it had: no assignment sent (unchanged), epoch 3
    assert (r.error_code, r.member_epoch, parts(r)) == (0, 3, None)
    d = a.call(Api.CONSUMER_GROUP_DESCRIBE, 0, group_ids=["leave"], include_authorized_operations=False).groups[0]
    assert [(m.member_id, sorted(m.assignment.topic_partitions[0].partitions)) for m in d.members] == [
        ("A", [0, 1, 2, 3])]
    assert beat(b, "leave", "B", 2).error_code == 25  # gone: UNKNOWN_MEMBER_ID


def test_a_static_member_leaves_for_now_and_its_restart_takes_its_assignment_back(server):
    a, b = Client(server.port, "a"), Client(server.port, "b")
    r = join(a, "static", "A1", instance="i-a")
    assert parts(r) == [0, 1, 2, 3]
    assert join(b, "static", "A2", instance="i-a").error_code == 111  # UNRELEASED_INSTANCE_ID
    r = beat(a, "static", "A1", -2, instance="i-a")
    assert (r.error_code, r.member_epoch) == (0, -2)
    r = join(b, "static", "A2", instance="i-a")  # the restarted process, a new member id
    assert (r.error_code, parts(r)) == (0, [0, 1, 2, 3])
    assert beat(a, "static", "A1", 1, instance="i-a").error_code == 82  # FENCED_INSTANCE_ID


def test_a_silent_member_is_fenced_after_the_session_timeout(server):
    a, b = Client(server.port, "a"), Client(server.port, "b")
    join(a, "session", "A")
    join(b, "session", "B")
    r = beat(a, "session", "A", 1, owned=[0, 1, 2, 3])
    kept = parts(r)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # A heartbeats, B is silent
        r = beat(a, "session", "A", r.member_epoch, owned=kept)
        kept = parts(r) if r.assignment is not None else kept
        if kept == [0, 1, 2, 3]:
            break
        time.sleep(0.1)
    assert kept == [0, 1, 2, 3] and r.error_code == 0
    assert beat(b, "session", "B", 2).error_code == 25  # fenced: UNKNOWN_MEMBER_ID, it must rejoin


def commit(c, group, member, epoch, version=9, offset=7, partitions=(0,)):
    r = c.call(Api.OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
               group_instance_id=None, retention_time=-1,
               topics=[{"name": "t", "partitions": [{"partition_index": p, "committed_offset": offset,
                                                      "committed_leader_epoch": -1, "committed_metadata": ""}
                                                     for p in partitions]}])
    return r.topics[0].partitions[0].error_code


def test_offset_commits_are_fenced_on_the_member_epoch(server):
    a, b = Client(server.port, "a"), Client(server.port, "b")
    join(a, "commits", "A")
    assert commit(a, "commits", "A", 1) == 0
    join(b, "commits", "B")
    kept = parts(beat(a, "commits", "A", 1, owned=[0, 1, 2, 3]))  # A's since epoch 1
    r = beat(a, "commits", "A", 1, owned=kept)  # revoked: epoch 2
    assert r.member_epoch == 2 and len(kept) == 2
    assert commit(a, "commits", "A", 1, partitions=kept) == 0  # held since epoch 1 (K11, KIP-1251)
    assert commit(a, "commits", "A", 1, partitions=[0, 1, 2, 3]) == 113  # STALE_MEMBER_EPOCH: two are B's now
    assert commit(a, "commits", "A", 3, partitions=kept) == 113  # newer than A's epoch
    assert commit(a, "commits", "Z", 2) == 25  # UNKNOWN_MEMBER_ID
    assert commit(a, "commits", "A", 2, version=8) == 35  # UNSUPPORTED_VERSION below v9
    assert commit(a, "commits", "A", 2, offset=9) == 0
    f = a.call(Api.OFFSET_FETCH, 7, group_id="commits", topics=[{"name": "t", "partition_indexes": [0]}],
               require_stable=False)
    assert f.topics[0].partitions[0].committed_offset == 9


def test_groups_whose_metadata_is_no_consumer_protocol_do_not_migrate(server):
    """The online migration reads a classic member's ConsumerProtocolSubscription: a classic
    group whose members' metadata is none is not converted by a consumer-protocol join
    (GROUP_ID_NOT_FOUND), and a classic JoinGroup with such metadata is refused by a consumer
    group, INCONSISTENT_GROUP_PROTOCOL (GroupMetadataManager.deserializeSubscription,
    GroupMetadataManager.java:2031, Kafka 4.4.0). tests/test_migration_online.py migrates real
    clients."""
    from test_serve import stable_member
    c, _, _ = stable_member(server.port)  # the classic group "g", Stable, metadata b"meta"
    r = join(Client(server.port), "g", "A")
    assert r.error_code == 69
    join(Client(server.port), "cg", "A")
    assert Client(server.port).join("cg").error_code == 23


@pytest.mark.spec("K17")
def test_the_conversation(server):
    got = conversation(server.port, T, "conversation")
    for line in got:
        print(line)
    assert got == CONVERSATION


def test_a_describe_without_the_partitions_pending_revocation_is_told_apart(tmp_path):
    """K17 seen to fail: serve with the mutation describe-omits-pending-revocation describes
    the revoking A with t-0 and t-1 only, where Kafka 4.4.0 gives all four."""
    s = Server(tmp_path, "t:4", initial_delay_ms=0, mutations=("describe-omits-pending-revocation",))
    try:
        got = dict((what, parts) for what, _, _, parts in conversation(s.port, T, "mutated"))
    finally:
        s.stop()
    assert got["A revoking and B waiting, described"] == [[0, 1], []]
