"""KIP-345 static membership, after GroupCoordinatorTest's static-membership cases."""
import pytest
from conftest import EXAMPLES, run_cli
from rebalance.checker import replay
from rebalance.model import coordinator, member
from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import EMPTY_GROUP, find, find_instance
from rebalance.model.member import MemberPhase
from rebalance.model.protocol import (
    EMPTY_SUBSCRIPTION, Assignment, Error, Heartbeat, JoinGroup, JoinGroupResponse, Leave, LeaveGroup,
    OffsetCommit, Phase, Protocols, RebalanceTimeout, Receive, SessionTimeout, SyncGroup, connection, member_id,
)

CFG = GroupConfig(initial_rebalance_delay=False)  # KIP-134 tested on its own
IA, IB = 1, 2  # group.instance.ids
A1, B1, A2 = member_id(0, 1), member_id(1, 1), member_id(0, 2)
CA1, CB, CA2 = connection(0, 1), connection(1, 1), connection(0, 2)


def step(group, conn, req):
    return coordinator.handle(CFG, group, Receive(conn, req))


def stable_static():
    """A (leader) and B, both static, Stable at generation 1."""
    g, _ = step(EMPTY_GROUP, CA1, JoinGroup(0, EMPTY_SUBSCRIPTION, IA))  # generation 1: A alone
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION, IB))
    g, _ = step(g, CA1, JoinGroup(A1, EMPTY_SUBSCRIPTION, IA))  # generation 2: A and B
    g, _ = step(g, CA1, SyncGroup(A1, g.generation, ((A1, Assignment(0b0011)), (B1, Assignment(0b1100))), IA))
    g, _ = step(g, CB, SyncGroup(B1, g.generation, (), IB))
    assert g.phase == Phase.STABLE
    return g


@pytest.mark.spec("R25", "R26")
def test_restarted_static_leader_rejoins_stable_group_without_rebalance():
    g = stable_static()
    g2, out = step(g, CA2, JoinGroup(0, EMPTY_SUBSCRIPTION, IA))
    assert g2.phase == Phase.STABLE and g2.generation == g.generation
    assert find(g2, A1) is None and find_instance(g2, IA).member_id == A2 and g2.leader == A2
    (reply,) = out
    assert reply.conn == CA2 and reply.response.member_id == A2 and reply.response.skip_assignment
    g3, out = step(g2, CA2, SyncGroup(A2, g.generation, (), IA))
    assert out[0].response.assignment == Assignment(0b0011)  # its assignment back


@pytest.mark.spec("R24")
def test_old_member_id_is_fenced_everywhere():
    g, _ = step(stable_static(), CA2, JoinGroup(0, EMPTY_SUBSCRIPTION, IA))
    gen = g.generation
    for req, pick in ((Heartbeat(A1, gen, IA), lambda r: r.error), (SyncGroup(A1, gen, (), IA), lambda r: r.error),
                      (OffsetCommit(A1, gen, 1, IA), lambda r: r.error),
                      (JoinGroup(A1, EMPTY_SUBSCRIPTION, IA), lambda r: r.error)):
        _, out = step(g, CA1, req)
        assert pick(out[0].response) == Error.FENCED_INSTANCE_ID, req
    _, out = step(g, CA1, LeaveGroup(((A1, IA), (B1, IB))))  # batch: one fenced entry
    assert [e for _, _, e in out[0].response.members] == [Error.FENCED_INSTANCE_ID, Error.NONE]


@pytest.mark.spec("R24")
def test_unknown_instance_with_known_member_id():
    g = stable_static()
    _, out = step(g, CB, Heartbeat(B1, g.generation, 7))
    assert out[0].response.error == Error.UNKNOWN_MEMBER_ID


@pytest.mark.spec("R25")
def test_duplicate_fenced_in_preparing_and_completing():
    g = stable_static()
    g, _ = step(g, connection(2, 1), JoinGroup(0, EMPTY_SUBSCRIPTION))  # C joins: PreparingRebalance
    g, _ = step(g, CA1, JoinGroup(A1, EMPTY_SUBSCRIPTION, IA))  # A1's JoinGroup is held
    g, out = step(g, CA2, JoinGroup(0, EMPTY_SUBSCRIPTION, IA))  # a duplicate A
    assert any(r.conn == CA1 and r.response.error == Error.FENCED_INSTANCE_ID for r in out)
    assert find_instance(g, IA).member_id == A2 and find_instance(g, IA).awaiting_join
    g, _ = step(g, CB, JoinGroup(B1, EMPTY_SUBSCRIPTION, IB))  # barrier complete
    assert g.phase == Phase.COMPLETING_REBALANCE
    g, out = step(g, connection(0, 3), JoinGroup(0, EMPTY_SUBSCRIPTION, IA))  # and again in Completing
    assert g.phase == Phase.PREPARING_REBALANCE and find_instance(g, IA).member_id == member_id(0, 3)


@pytest.mark.spec("R27", "R4", "R5")
def test_rebalance_timeout_completes_the_join_and_keeps_the_silent_static_member():
    """After Kafka's GroupCoordinatorTest.testStaticMemberFollowerFailToRejoinBeforeRebalanceTimeout
    and testStaticMemberLeaderFailToRejoinBeforeRebalanceTimeout (Kafka 4.0-SNAPSHOT,
    GroupCoordinator.onCompleteJoin): a new static member C joins, one of the old
    static members rejoins, the other stays silent; at the rebalance timeout the
    join completes at the next generation with all three members in the leader's
    JoinGroup response, the silent one kept and answered nothing."""
    IC, CC, C1 = 3, connection(2, 1), member_id(2, 1)
    for rejoined, silent in ((A1, B1), (B1, A1)):  # follower silent, then leader silent
        g = stable_static()
        g, _ = step(g, CC, JoinGroup(0, EMPTY_SUBSCRIPTION, IC))
        conn, iid = (CA1, IA) if rejoined == A1 else (CB, IB)
        g, _ = step(g, conn, JoinGroup(rejoined, EMPTY_SUBSCRIPTION, iid))
        assert g.phase == Phase.PREPARING_REBALANCE
        g2, out = coordinator.handle(CFG, g, RebalanceTimeout())
        assert g2.phase == Phase.COMPLETING_REBALANCE and g2.generation == g.generation + 1
        assert {m.member_id for m in g2.members} == {A1, B1, C1}  # the silent static member stays
        assert g2.leader in (rejoined, C1)  # a member that rejoined leads (maybeElectNewJoinedLeader)
        assert sorted(r.response.member_id for r in out) == sorted((rejoined, C1))  # silent: no answer
        (lead,) = [r.response for r in out if r.response.member_id == g2.leader]
        assert {mid for mid, _, _ in lead.members} == {A1, B1, C1}
        assert find(g2, silent).pending_sync  # owed a SyncGroup (KAFKA-12890)


@pytest.mark.spec("R27")
def test_rebalance_waits_while_no_member_rejoined():
    """After GroupCoordinatorTest.groupStuckInRebalanceTimeoutDueToNonjoinedStaticMember:
    the dynamic members that did not rejoin are removed at the rebalance timeout, and
    a static member that did not rejoin either keeps the group in PreparingRebalance
    (onCompleteJoin schedules another DelayedJoin) until its session times out."""
    g = stable_static()
    g, _ = step(g, connection(2, 1), JoinGroup(0, EMPTY_SUBSCRIPTION))  # dynamic C joins
    g, _ = coordinator.handle(CFG, g, RebalanceTimeout())  # generation 3: A, B silent, C leads
    g, _ = step(g, CB, LeaveGroup(((B1, IB),)))  # B leaves: PreparingRebalance
    g2, out = coordinator.handle(CFG, g, RebalanceTimeout())  # C did not rejoin: removed; A stays
    assert g2.phase == Phase.PREPARING_REBALANCE and [m.member_id for m in g2.members] == [A1]
    assert g2.generation == g.generation
    g3, _ = coordinator.handle(CFG, g2, SessionTimeout(A1))
    assert g3.phase == Phase.EMPTY and not g3.members and g3.generation == g.generation + 1


@pytest.mark.spec("R26", "R35")
def test_static_rejoin_that_changes_the_selected_protocol_rebalances():
    """After Kafka's GroupCoordinatorTest.staticMemberRejoinWithUnknownMemberIdAndChangeOfProtocolWithSelectedProtocolChanged
    and ...WhileSelectProtocolUnchanged (GroupCoordinator.updateStaticMemberAndRebalance,
    Kafka 4.0-SNAPSHOT): a static member restarting with protocols that change the
    group's selected protocol starts a rebalance; one that leaves it unchanged gets
    the current generation at once."""
    superset = Protocols("consumer", (("range", b""), ("roundrobin", b"")))
    g, _ = step(EMPTY_GROUP, CA1, JoinGroup(0, superset, IA))
    g, _ = step(g, CB, JoinGroup(0, superset, IB))
    g, _ = step(g, CA1, JoinGroup(A1, superset, IA))
    g, _ = step(g, CA1, SyncGroup(A1, g.generation, ((A1, Assignment(0b0011)), (B1, Assignment(0b1100))), IA))
    g, _ = step(g, CB, SyncGroup(B1, g.generation, (), IB))
    assert g.phase == Phase.STABLE and g.protocol == "range"
    same, out = step(g, CA2, JoinGroup(0, Protocols("consumer", (("range", b""),)), IB))
    assert same.phase == Phase.STABLE and same.generation == g.generation and out[0].response.error == Error.NONE
    g2, out = step(g, CA2, JoinGroup(0, Protocols("consumer", (("roundrobin", b""),)), IB))
    assert g2.phase == Phase.PREPARING_REBALANCE and out == ()  # the new member id's JoinGroup is held
    b2 = find_instance(g2, IB).member_id
    g3, out = coordinator.handle(CFG, g2, SessionTimeout(A1))  # the old leader does not rejoin
    assert g3.phase == Phase.COMPLETING_REBALANCE and g3.generation == g.generation + 1
    assert g3.leader == b2 and g3.protocol == "roundrobin" and out[0].response.protocol == "roundrobin"


def test_admin_removal_by_instance_id_triggers_rebalance():
    g, out = step(stable_static(), connection(9, 1), LeaveGroup(((0, IB),)))
    assert find_instance(g, IB) is None and g.phase == Phase.PREPARING_REBALANCE
    assert out[0].response.members == ((B1, IB, Error.NONE),)


@pytest.mark.spec("R27", "R28")
def test_static_member_sends_no_leave_group_and_fenced_member_stops():
    from rebalance.model.protocol import Start
    c, _ = member.handle(CFG, member.NEW_CONSUMER, Start(IA))
    c, out = member.handle(CFG, c, Leave())
    assert not any(type(o).__name__ == "Send" for o in out)
    c, _ = member.handle(CFG, member.NEW_CONSUMER, Start(IA))
    c, out = member.handle(CFG, c, JoinGroupResponse(Error.FENCED_INSTANCE_ID, A1, -1, 0, ()))
    assert c.phase == MemberPhase.LEFT and out == ()


@pytest.mark.spec("R27")
def test_java_static_member_closed_with_leave_group_sends_leave_group():
    """KIP-1092 (tests/test_interop_java.py, the agent's ``close leave``): a static member
    whose application asks it to leave revokes and sends LeaveGroup naming only its
    member.id, as Kafka 4.4.0's consumer does; by default it sends none."""
    from rebalance.model.protocol import LeaveGroup, Send
    stable = member.assigned_consumer(CFG, A1, IA, 1, True, 0b11, 0b11)
    for leave_group, sent in ((False, ()), (True, (Send(LeaveGroup(((A1, 0),))),))):
        c, out = member.handle(CFG, stable, Leave(leave_group=leave_group))
        assert c.phase == MemberPhase.LEFT and tuple(o for o in out if type(o) is Send) == sent


def test_check_static_holds_and_catches_missing_fencing(rebalance_check):
    code, s = rebalance_check("--protocol", "cooperative", "--static", "--members", "3", "--partitions", "4",
                         "--faults", "restart,crash,leave")
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert code == 0 and all(status[n] == "holds" for n in (
        "unique_instance", "static_restart_no_rebalance", "exclusive_ownership", "eventual_balance"))
    assert {c["name"]: c["reached"] for c in s["covers"]}["static_rejoin"]
    code, s = rebalance_check("--static", "--faults", "restart,crash", "--mutation", "no-fencing-on-duplicate-instance")
    assert code == 1 and s["counterexample"]["property"] == "unique_instance"


@pytest.mark.slow  # 13 s on CI's 2 cores: in CI by its subset (.ci/slow)
def test_mixed_static_and_dynamic_group_keeps_every_property(rebalance_check, tmp_path):
    cfg = tmp_path / "mixed.toml"
    cfg.write_text('[members]\nstatic = ["A", "C"]\n[faults]\nkinds = ["join", "leave", "crash", "restart"]\n')
    code, s = rebalance_check(cfg)
    assert code == 0 and all(p["status"] == "holds" for p in s["properties"])


def test_rolling_bounce_static_vs_dynamic():
    static = replay.run(replay.load(str(EXAMPLES / "static_rolling_bounce.toml")))
    dynamic = replay.run(replay.load(str(EXAMPLES / "dynamic_rolling_bounce.toml")))
    assert static["rebalances"] == 0
    assert static["final"]["ownership"] == static["initial"]["ownership"]
    assert dynamic["rebalances"] == 9  # per bounce: the leave, the join, the cooperative follow-up
    code, out, _ = run_cli("replay", EXAMPLES / "static_rolling_bounce.toml")
    assert code == 0 and "rebalances: 0" in out
