"""The coordinator handler against Kafka's GroupCoordinator behaviour."""
import pytest
from rebalance.model import coordinator
from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import EMPTY_GROUP, commit_allowed, find
from rebalance.model.protocol import (
    EMPTY_SUBSCRIPTION, NO_INSTANCE_ID, Assignment, DeleteGroup, Error, Heartbeat, JoinGroup, JoinGroupResponse,
    LeaveGroup, OffsetCommit, Phase, RebalanceTimeout, Receive, SessionTimeout, Subscription, SyncGroup,
    SyncTimeout, connection, member_id,
)

CFG = GroupConfig(initial_rebalance_delay=False)  # KIP-134 tested on its own
A, B = member_id(0, 1), member_id(1, 1)
CA, CB = connection(0, 1), connection(1, 1)


def step(group, conn, req, cfg=CFG):
    return coordinator.handle(cfg, group, Receive(conn, req))




def formed():
    g, out1 = step(EMPTY_GROUP, CA, JoinGroup(0, EMPTY_SUBSCRIPTION))
    # A alone completes the barrier at once
    assert g.phase == Phase.COMPLETING_REBALANCE and g.generation == 1 and g.leader == A
    (reply,) = out1
    assert reply.conn == CA and reply.response.member_id == A and reply.response.members
    g, out = step(g, CA, SyncGroup(A, 1, ((A, Assignment(0b1111)),)))
    assert g.phase == Phase.STABLE and out[0].response.assignment == Assignment(0b1111)
    return g


@pytest.mark.spec("R2", "R3", "R4", "R5", "R10")
def test_new_member_gets_fresh_id_and_triggers_rebalance():
    g = formed()
    g, out = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION))
    assert g.phase == Phase.PREPARING_REBALANCE and find(g, B).awaiting_join and out == ()
    # A learns through Heartbeat, rejoins; the barrier completes: generation 2, leader A
    g, out = step(g, CA, Heartbeat(A, 1))
    assert out[0].response.error == Error.REBALANCE_IN_PROGRESS
    g, out = step(g, CA, JoinGroup(A, Subscription(0b1111, 1)))
    assert g.phase == Phase.COMPLETING_REBALANCE and g.generation == 2 and g.leader == A
    by_conn = {r.conn: r.response for r in out}
    assert by_conn[CA].members and by_conn[CB].members == ()  # only the leader gets the member list


@pytest.mark.spec("R3", "R6")
def test_follower_rejoin_in_stable_with_same_metadata_causes_no_rebalance():
    g = formed()
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION))
    g, _ = step(g, CA, JoinGroup(A, Subscription(0b1111, 1)))
    g, _ = step(g, CA, SyncGroup(A, 2, ((A, Assignment(0b0011)), (B, Assignment(0b1100)))))
    g, _ = step(g, CB, SyncGroup(B, 2, ()))
    assert g.phase == Phase.STABLE
    g2, out = step(g, CB, JoinGroup(B, EMPTY_SUBSCRIPTION))
    assert g2.phase == Phase.STABLE and g2.generation == 2 and out[0].response.generation == 2
    g3, _ = step(g, CA, JoinGroup(A, Subscription(0b1111, 1)))  # the leader's rejoin forces one
    assert g3.phase == Phase.PREPARING_REBALANCE


@pytest.mark.spec("R8")
def test_sync_errors():
    g = formed()
    _, out = step(g, CB, SyncGroup(B, 1, ()))
    assert out[0].response.error == Error.UNKNOWN_MEMBER_ID
    _, out = step(g, CA, SyncGroup(A, 7, ()))
    assert out[0].response.error == Error.ILLEGAL_GENERATION
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION))
    _, out = step(g, CA, SyncGroup(A, 1, ()))
    assert out[0].response.error == Error.REBALANCE_IN_PROGRESS


@pytest.mark.spec("R3", "R7", "R8")
def test_held_sync_answered_rebalance_in_progress_when_a_rebalance_starts():
    g = formed()
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION))
    g, _ = step(g, CA, JoinGroup(A, Subscription(0b1111, 1)))
    g, out = step(g, CB, SyncGroup(B, 2, ()))  # follower first: held
    assert out == () and find(g, B).awaiting_sync
    g, out = step(g, CA, LeaveGroup(((A, 0),)))  # the leader leaves before assigning
    errors = {r.conn: r.response.error for r in out}
    assert errors[CB] == Error.REBALANCE_IN_PROGRESS and errors[CA] == Error.NONE
    assert g.phase == Phase.PREPARING_REBALANCE


@pytest.mark.spec("R5", "R11")
def test_session_timeout_spares_members_held_at_a_barrier():
    g = formed()
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION))
    g2, _ = coordinator.handle(CFG, g, SessionTimeout(B))
    assert g2 == g  # B awaits its JoinGroup response
    g3, out = coordinator.handle(CFG, g, SessionTimeout(A))  # A has not rejoined: expired
    assert find(g3, A) is None and g3.phase == Phase.COMPLETING_REBALANCE and g3.leader == B
    assert out[0].response.members  # B is the new leader


@pytest.mark.spec("R4")
def test_rebalance_timeout_removes_members_that_did_not_rejoin():
    g = formed()
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION))
    g, out = coordinator.handle(CFG, g, RebalanceTimeout())
    assert [m.member_id for m in g.members] == [B] and g.generation == 2 and g.leader == B


@pytest.mark.spec("R12")
def test_sync_timeout_removes_members_that_never_synced():
    g = formed()
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION))
    g, _ = step(g, CA, JoinGroup(A, Subscription(0b1111, 1)))
    g, _ = step(g, CA, SyncGroup(A, 2, ((A, Assignment(0b0011)), (B, Assignment(0b1100)))))
    g, _ = coordinator.handle(CFG, g, SyncTimeout())  # B never sent SyncGroup (KAFKA-12890)
    assert find(g, B) is None and g.phase == Phase.PREPARING_REBALANCE  # A must rejoin


@pytest.mark.spec("R9")
def test_commit_fencing_and_mutation():
    g = formed()
    assert commit_allowed(CFG, g, A, 1)
    assert not commit_allowed(CFG, g, A, 0) and not commit_allowed(CFG, g, B, 1)
    _, out = step(g, CA, OffsetCommit(A, 0, 1))
    assert out[0].response.error == Error.ILLEGAL_GENERATION
    loose = GroupConfig(mutations=frozenset({"no-commit-fencing"}))
    assert commit_allowed(loose, g, B, 0)


@pytest.mark.spec("R1", "R7")
def test_last_member_leaving_empties_the_group_and_only_empty_groups_die():
    g = formed()
    g2, _ = coordinator.handle(CFG, g, DeleteGroup())
    assert g2 == g
    g, _ = step(g, CA, LeaveGroup(((A, 0),)))
    assert g.phase == Phase.EMPTY and g.generation == 2 and not g.members
    g, _ = coordinator.handle(CFG, g, DeleteGroup())
    assert g.phase == Phase.DEAD
    _, out = step(g, CA, JoinGroup(0, EMPTY_SUBSCRIPTION))
    assert out[0].response.error == Error.COORDINATOR_NOT_AVAILABLE


def test_messages_of_different_types_never_compare_equal():
    from rebalance.model.protocol import HeartbeatResponse, LeaveGroupResponse, Start, Leave
    assert HeartbeatResponse(Error.NONE) != LeaveGroupResponse(Error.NONE)
    assert Start() != Leave()
    assert JoinGroupResponse(Error.NONE, A, 1, A, ()) != JoinGroup(A, EMPTY_SUBSCRIPTION)


@pytest.mark.spec("R30")
def test_initial_rebalance_delay_holds_the_first_barrier():
    # KIP-134: an Empty group waits group.initial.rebalance.delay.ms for more members
    from rebalance.model.protocol import InitialRebalanceDelay
    cfg = GroupConfig()
    g, out = step(EMPTY_GROUP, CA, JoinGroup(0, EMPTY_SUBSCRIPTION), cfg)
    assert g.phase == Phase.PREPARING_REBALANCE and g.initial_delay and out == ()
    g, out = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION), cfg)  # arrives during the delay
    assert g.phase == Phase.PREPARING_REBALANCE and out == () and g.new_member_added
    # a new member joined during the delay: it runs once more (tryCompleteInitialRebalanceElseSchedule)
    g, out = coordinator.handle(cfg, g, InitialRebalanceDelay())
    assert g.phase == Phase.PREPARING_REBALANCE and g.initial_delay and not g.new_member_added and out == ()
    g, out = coordinator.handle(cfg, g, InitialRebalanceDelay())  # nobody new this time: it completes
    assert g.phase == Phase.COMPLETING_REBALANCE and g.generation == 1 and len(out) == 2
    g, _ = step(g, CA, LeaveGroup(((A, 0),)), cfg)  # not Empty: no delay on later rebalances
    assert not g.initial_delay


@pytest.mark.spec("R30")
def test_initial_rebalance_completes_only_by_its_delay_even_when_all_joined():
    """Scenario join_leave on Kafka 4.4.0 (tests/kafka_traces): with
    group.initial.rebalance.delay.ms 0, a second member that joins before the delay's
    timer fires is in the first generation: the initial rebalance never completes on
    "all members joined" (GroupMetadataManager.maybeCompleteJoinPhase)."""
    from rebalance.model.protocol import InitialRebalanceDelay
    cfg = GroupConfig()
    g, out = step(EMPTY_GROUP, CA, JoinGroup(0, EMPTY_SUBSCRIPTION), cfg)  # the only member, and joined
    assert g.phase == Phase.PREPARING_REBALANCE and g.initial_delay and out == ()
    g, out = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION), cfg)
    g, out = coordinator.handle(cfg, g, InitialRebalanceDelay())
    g, out = coordinator.handle(cfg, g, InitialRebalanceDelay())
    assert g.generation == 1 and len(g.members) == 2 and len(out) == 2


@pytest.mark.spec("R7", "R30")
def test_a_leave_during_the_initial_delay_completes_the_barrier_if_the_rest_joined():
    """removeMemberAndUpdateClassicGroup checks hasAllMembersJoined alone, not the
    initial delay: B leaving while A waits completes the first generation with A."""
    cfg = GroupConfig()
    g, _ = step(EMPTY_GROUP, CA, JoinGroup(0, EMPTY_SUBSCRIPTION), cfg)
    g, _ = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION), cfg)
    b = next(m.member_id for m in g.members if m.member_id != g.leader)
    g, out = step(g, CB, LeaveGroup(((b, 0),)), cfg)
    assert g.phase == Phase.COMPLETING_REBALANCE and g.generation == 1 and [m.member_id for m in g.members] == [A]


def test_member_ids_of_a_spent_slot_start_again_below_the_ids_held():
    """Issue 18 item 6: a slot that has handed out MAX_SERIAL member ids (the count is
    stored, so it survives restarts) gave the next one serial 2^20, which is slot+1's
    id space; now serials start again at the lowest one the group does not hold."""
    from rebalance.model.coordinator import _fresh_member_id
    from rebalance.model.protocol import MAX_SERIAL, member_id, slot_of
    group = EMPTY_GROUP._replace(issued=((0, MAX_SERIAL),), pending=(member_id(0, 1), member_id(0, 2)))
    mid, issued = _fresh_member_id(group, 0)
    assert slot_of(mid) == 0 and mid == member_id(0, 3) and issued == ((0, 3),)


@pytest.mark.spec("R56")
def test_forced_rebalance_prepares_a_rebalance_only_from_stable_or_completing():
    from rebalance.model.protocol import ForceRebalance
    g = formed()
    g2, out = coordinator.handle(CFG, g, ForceRebalance())
    assert g2.phase == Phase.PREPARING_REBALANCE and out == () and g2.generation == g.generation
    g3, out = step(g2, CA, Heartbeat(A, 1))
    assert out[0].response.error == Error.REBALANCE_IN_PROGRESS  # members learn of it from a Heartbeat (R10)
    assert coordinator.handle(CFG, g2, ForceRebalance()) == (g2, ())  # already rebalancing: unchanged
    assert coordinator.handle(CFG, EMPTY_GROUP, ForceRebalance()) == (EMPTY_GROUP, ())
    g4, out = step(g3, CA, JoinGroup(A, EMPTY_SUBSCRIPTION))
    assert g4.generation == g.generation + 1 and out[0].response.error == Error.NONE


@pytest.mark.spec("R4", "R36")
def test_a_pending_member_id_holds_the_barrier_until_used_or_expired():
    """ClassicGroup.hasAllMembersJoined (Kafka 4.4.0) also waits for the member ids
    handed out with MEMBER_ID_REQUIRED: a rebalance does not complete while C, told
    its id, has not joined with it, and completes once that id expires."""
    from rebalance.model.protocol import PendingMemberTimeout
    g = coordinator.formed_group(((A, NO_INSTANCE_ID, CA, 0b11),), 1, A)
    g, out = step(g, CB, JoinGroup(0, EMPTY_SUBSCRIPTION, require_known_member_id=True))
    (reply,) = out
    assert reply.response.error == Error.MEMBER_ID_REQUIRED and g.pending == (reply.response.member_id,)
    g, out = step(g, CA, JoinGroup(A, EMPTY_SUBSCRIPTION))  # the leader rejoins: a rebalance
    assert g.phase == Phase.PREPARING_REBALANCE and out == ()
    used, _ = step(g, CB, JoinGroup(reply.response.member_id, EMPTY_SUBSCRIPTION, require_known_member_id=True))
    assert used.phase == Phase.COMPLETING_REBALANCE and len(used.members) == 2
    expired, out = coordinator.handle(CFG, g, PendingMemberTimeout(reply.response.member_id))
    assert expired.phase == Phase.COMPLETING_REBALANCE and [m.member_id for m in expired.members] == [A]
    # the model before issue 38 (mutation barrier-ignores-pending-members) completed it without C
    mutated = GroupConfig(initial_rebalance_delay=False, mutations=frozenset({"barrier-ignores-pending-members"}))
    g, _ = step(coordinator.formed_group(((A, NO_INSTANCE_ID, CA, 0b11),), 1, A), CB,
                JoinGroup(0, EMPTY_SUBSCRIPTION, require_known_member_id=True), mutated)
    g, _ = step(g, CA, JoinGroup(A, EMPTY_SUBSCRIPTION), mutated)
    assert g.phase == Phase.COMPLETING_REBALANCE and [m.member_id for m in g.members] == [A]
