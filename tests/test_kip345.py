"""KIP-345's faults explored (seed 002; spec R71-R73): admin removal of static members
by group.instance.id, coordinator failover to the stored record, the static-to-dynamic
downgrade. Model steps after GroupCoordinator.handleLeaveGroup /
removeMemberAndUpdateGroup, GroupMetadataManager.loadGroup and AbstractCoordinator's
NOT_COORDINATOR handling; the checker's runs are real `rebalance check` processes."""
import pytest

from rebalance.checker.system import FAILOVER, System
from rebalance.model import coordinator, failover, member
from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import EMPTY_GROUP, find, find_instance
from rebalance.model.member import MemberPhase
from rebalance.model.protocol import (
    EMPTY_SUBSCRIPTION, NO_GENERATION, NO_MEMBER_ID, Assignment, CoordinatorLost, Error, JoinGroup, JoinGroupResponse,
    LeaveGroup, Phase, Receive, SyncGroup, connection, member_id,
)

CFG = GroupConfig(initial_rebalance_delay=False)
IA, IB = 1, 2
A1, B1, A2 = member_id(0, 1), member_id(1, 1), member_id(0, 2)
CA1, CB, CA2, ADMIN = connection(0, 1), connection(1, 1), connection(0, 2), connection(0, 0)
# KIP-345's faults with static members, small enough for the default suite (about 2 s each); removal and
# failover apart, since together they reach F4 (Kafka's protocol: a live member fenced for good)
KIP345 = ("--static", "--members", "2", "--partitions", "2", "--max-faults", "2", "--faults")
BY_REMOVAL, BY_FAILOVER = "crash,restart,remove,downgrade", "crash,restart,failover,downgrade"


def step(group, conn, req):
    return coordinator.handle(CFG, group, Receive(conn, req))


def stable_static():
    """A (leader) and B, both static, Stable at generation 2, A owning t-0 t-1, B t-2 t-3."""
    g, _ = step(EMPTY_GROUP, CA1, JoinGroup(0, EMPTY_SUBSCRIPTION, IA))
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION, IB))
    g, _ = step(g, CA1, JoinGroup(A1, EMPTY_SUBSCRIPTION, IA))
    g, _ = step(g, CA1, SyncGroup(A1, g.generation, ((A1, Assignment(0b0011)), (B1, Assignment(0b1100))), IA))
    g, _ = step(g, CB, SyncGroup(B1, g.generation, (), IB))
    assert g.phase == Phase.STABLE and g.generation == 2
    return g


@pytest.mark.spec("R71")
def test_admin_removal_by_instance_id_rebalances_and_answers_a_held_join_unknown_member_id():
    g = stable_static()
    g2, out = step(g, ADMIN, LeaveGroup(((NO_MEMBER_ID, IA),)))
    assert find(g2, A1) is None and g2.phase == Phase.PREPARING_REBALANCE
    assert out[0].conn == ADMIN and out[0].response.members == ((A1, IA, Error.NONE),)
    # B rejoins and is held at the barrier waiting for A; the admin removes B: its held JoinGroup is answered
    g3, _ = step(g, CB, JoinGroup(B1, EMPTY_SUBSCRIPTION._replace(owned=0b1100), IB))
    assert find(g3, B1).awaiting_join
    g4, out = step(g3, ADMIN, LeaveGroup(((NO_MEMBER_ID, IB),)))
    held = [r for r in out if type(r.response) is JoinGroupResponse]
    assert held and held[0].conn == CB and held[0].response.error == Error.UNKNOWN_MEMBER_ID
    assert [m.member_id for m in g4.members] == [A1]


@pytest.mark.spec("R71")
def test_admin_removal_without_rebalance_mutation_leaves_the_group_stable():
    wrong = GroupConfig(initial_rebalance_delay=False, mutations=frozenset({"admin-removal-without-rebalance"}))
    g, _ = coordinator.handle(wrong, stable_static(), Receive(ADMIN, LeaveGroup(((NO_MEMBER_ID, IA),))))
    assert find(g, A1) is None and g.phase == Phase.STABLE  # t-0, t-1 assigned to nobody


@pytest.mark.spec("R72")
def test_failover_loads_the_stored_record_and_keeps_the_id_counter():
    g = stable_static()
    g = failover.recorded(g, g)
    assert g.record.generation == 2 and g.record.record is None and g.record.issued == ()
    # a rebalance starts and completes the barrier: nothing newer is stored
    g2, _ = step(g, CB, JoinGroup(B1, EMPTY_SUBSCRIPTION._replace(owned=0b1100), IB))
    g2 = failover.recorded(g, g2)
    g3, _ = step(g2, CA1, JoinGroup(A1, EMPTY_SUBSCRIPTION, IA))
    g3 = failover.recorded(g2, g3)
    assert g3.phase == Phase.COMPLETING_REBALANCE and g3.generation == 3 and g3.record == g.record
    loaded = failover.load(CFG, g3)
    assert loaded.phase == Phase.STABLE and loaded.generation == 2 and loaded.issued == g3.issued
    assert find(loaded, A1).assignment == Assignment(0b0011) and not find(loaded, A1).awaiting_join
    stale = failover.load(GroupConfig(mutations=frozenset({"failover-stale-generation"})), g3)
    assert stale.generation == 1


@pytest.mark.spec("R72")
def test_a_member_that_lost_its_join_or_sync_rejoins_and_a_lost_heartbeat_is_dropped():
    cfg = GroupConfig()
    syncing = member.Consumer(MemberPhase.SYNCING, A1, IA, 3, True, 0b0011, 2, False)
    c, out = member.handle(cfg, syncing, CoordinatorLost())
    (send,) = out
    assert c.phase == MemberPhase.JOINING and c.generation == NO_GENERATION and c.owned == 0b0011
    assert type(send.request) is JoinGroup and send.request.member_id == A1 and send.request.subscription.owned == 0b0011
    beating = syncing._replace(phase=MemberPhase.STABLE, heartbeat_inflight=True)
    c, out = member.handle(cfg, beating, CoordinatorLost())
    assert out == () and c == beating._replace(heartbeat_inflight=False)


@pytest.mark.spec("R72")
def test_finding_a_failover_fences_a_static_member_registered_after_the_last_store():
    """Kafka's protocol as its source has it (GroupCoordinator.doCurrentMemberJoinGroup checks
    isStaticMemberFenced first): A is removed by an admin and rejoins under A2 while the
    group rebalances; nothing is stored, so the loaded record maps i-A to A1 and A's retry
    is FENCED_INSTANCE_ID, fatal for the Java consumer (FencedInstanceIdException)."""
    g = stable_static()
    g = failover.recorded(g, g)
    g2, _ = step(g, ADMIN, LeaveGroup(((NO_MEMBER_ID, IA),)))
    g3, _ = step(g2, CA2, JoinGroup(NO_MEMBER_ID, EMPTY_SUBSCRIPTION, IA))
    assert find_instance(g3, IA).member_id == A2
    loaded = failover.load(CFG, failover.recorded(g2, g3))
    _, out = step(loaded, CA2, JoinGroup(A2, EMPTY_SUBSCRIPTION, IA))
    assert out[0].response.error == Error.FENCED_INSTANCE_ID


def test_failover_drops_everything_in_flight_and_members_retry():
    system = System(GroupConfig(topics=(("t", 2),)), 2, 0, (FAILOVER,), 1)
    init = system.initial()
    assert init.group.record is not None and init.group.record.generation == init.group.generation
    (action, nxt), = [(a, n) for a, n in system.successors(init) if a.kind == FAILOVER]
    assert nxt.group.phase == Phase.STABLE and nxt.faults_left == 0
    assert all(not p.responses for p in nxt.procs)


@pytest.mark.spec("R71", "R72", "R73")
@pytest.mark.parametrize("faults,covered", [(BY_REMOVAL, ("admin_removal", "static_downgrade")),
                                            (BY_FAILOVER, ("coordinator_failover", "static_downgrade"))])
def test_every_property_holds_with_the_kip345_faults_and_their_covers_are_reached(rebalance_check, faults, covered):
    code, s = rebalance_check(*KIP345, faults, "--require-covers", "--continue")
    status = {p["name"]: p["status"] for p in s["properties"]}
    # a live static member an admin removes processes until its next heartbeat, as a zombie does (R71)
    assert status.pop("exclusive_processing") == ("violated" if "remove" in faults else "holds")
    assert all(st == "holds" for st in status.values()), status
    covers = {c["name"]: c["reached"] for c in s["covers"]}
    assert all(covers[c] for c in covered) and all(covers.values()) and code == 0
    assert all(s["actions_fired"][k] > 0 for k in faults.split(","))


@pytest.mark.spec("R72")
def test_finding_f4_removal_then_failover_strands_a_fenced_member(rebalance_check):
    """F4 explored: an admin removal, the member's rejoin under a new id during the
    rebalance, then a failover: its retry is fenced for good and its partitions go
    to the other member, so the group ends unbalanced (spec/SPEC.md section 11)."""
    code, s = rebalance_check(*KIP345, "remove,failover", "--expect-finding", "none")
    assert code == 1 and s["counterexample"]["property"] == "quiescent_balance"
    assert s["counterexample"]["length"] == 18


def test_the_kip345_faults_are_named_in_help_and_refused_misspelt():
    from conftest import run_cli
    code, out, _ = run_cli("check", "--help")
    assert code == 0 and all(k in out for k in ("remove", "failover", "downgrade"))
    code, _, err = run_cli("check", "--faults", "crash,failovr")
    assert code == 2 and "failovr" in err and "Traceback" not in err
