"""The consumer handler: eager and cooperative (seed 000, Design I; ConsumerCoordinator)."""
import pytest
from rebalance.model import member
from rebalance.model.config import GroupConfig
from rebalance.model.member import NEW_CONSUMER, MemberPhase
from rebalance.model.protocol import (
    EMPTY_ASSIGNMENT, Assignment, Callback, CommitDue, Error, HeartbeatDue, HeartbeatResponse, JoinGroup,
    JoinGroupResponse, Leave, LeaveGroup, OffsetCommit, OffsetCommitResponse, Send, Start, Subscription,
    SyncGroup, SyncGroupResponse,
)

COOP = GroupConfig()
EAGER = GroupConfig(protocol="eager", assignor="range")
A = 1


def stable(cfg, owned=0b0011, generation=3):
    c, _ = member.handle(cfg, NEW_CONSUMER, Start())
    c, _ = member.handle(cfg, c, JoinGroupResponse(Error.NONE, A, generation, 2, ()))
    c, _ = member.handle(cfg, c, SyncGroupResponse(Error.NONE, Assignment(owned)))
    assert c.phase == MemberPhase.STABLE and c.owned == owned and c.owned_generation == generation
    return c


@pytest.mark.spec("R13")
def test_start_sends_join_with_empty_member_id():
    c, out = member.handle(COOP, NEW_CONSUMER, Start())
    assert c.phase == MemberPhase.JOINING and out == (Send(JoinGroup(0, Subscription(0, -1))),)


@pytest.mark.spec("R16")
def test_leader_assigns_in_sync_group():
    c, _ = member.handle(COOP, NEW_CONSUMER, Start())
    c, out = member.handle(COOP, c, JoinGroupResponse(Error.NONE, A, 1, A, ((A, 0, Subscription(0, -1)),)))
    assert c.leader and out == (Send(SyncGroup(A, 1, ((A, Assignment(0b1111)),))),)


@pytest.mark.spec("R14", "R19")
def test_eager_revokes_everything_before_rejoining():
    c = stable(EAGER)
    c, out = member.handle(EAGER, c, HeartbeatDue())
    c, out = member.handle(EAGER, c, HeartbeatResponse(Error.REBALANCE_IN_PROGRESS))
    assert out[0] == Callback("revoked", 0b0011) and c.owned == 0
    assert out[1] == Send(JoinGroup(A, Subscription(0, -1)))


@pytest.mark.spec("R13", "R19")
def test_cooperative_keeps_owned_while_rejoining_and_claims_them():
    c = stable(COOP)
    c, _ = member.handle(COOP, c, HeartbeatDue())
    c, out = member.handle(COOP, c, HeartbeatResponse(Error.REBALANCE_IN_PROGRESS))
    assert c.owned == 0b0011 and out == (Send(JoinGroup(A, Subscription(0b0011, 3))),)


@pytest.mark.spec("R18")
def test_cooperative_revokes_owned_minus_assigned_and_rejoins_at_once():
    c = stable(COOP)
    c, _ = member.handle(COOP, c, HeartbeatDue())
    c, _ = member.handle(COOP, c, HeartbeatResponse(Error.REBALANCE_IN_PROGRESS))
    c, _ = member.handle(COOP, c, JoinGroupResponse(Error.NONE, A, 4, 2, ()))
    c, out = member.handle(COOP, c, SyncGroupResponse(Error.NONE, Assignment(0b0110)))
    assert out[0] == Callback("revoked", 0b0001) and out[1] == Callback("assigned", 0b0100)
    assert c.owned == 0b0110 and c.phase == MemberPhase.JOINING
    assert out[2] == Send(JoinGroup(A, Subscription(0b0110, 4)))


@pytest.mark.spec("R15")
def test_partitions_are_lost_not_revoked_when_membership_is_lost():
    c = stable(COOP)
    c, _ = member.handle(COOP, c, HeartbeatDue())
    c, out = member.handle(COOP, c, HeartbeatResponse(Error.UNKNOWN_MEMBER_ID))
    assert out[0] == Callback("lost", 0b0011) and c.owned == 0 and c.member_id == 0
    assert out[1] == Send(JoinGroup(0, Subscription(0, -1)))


@pytest.mark.spec("R17")
def test_rebalance_in_progress_on_sync_claims_owned_with_the_joined_generation():
    c = stable(COOP)
    c, _ = member.handle(COOP, c, HeartbeatDue())
    c, _ = member.handle(COOP, c, HeartbeatResponse(Error.REBALANCE_IN_PROGRESS))
    c, _ = member.handle(COOP, c, JoinGroupResponse(Error.NONE, A, 4, 2, ()))
    c2, out = member.handle(COOP, c, SyncGroupResponse(Error.REBALANCE_IN_PROGRESS, EMPTY_ASSIGNMENT))
    assert out == (Send(JoinGroup(A, Subscription(0b0011, 4))),)  # KIP-792: the current generation
    mutated = GroupConfig(mutations=frozenset({"keep-owned-on-rebalance-in-progress"}))
    _, out = member.handle(mutated, c, SyncGroupResponse(Error.REBALANCE_IN_PROGRESS, EMPTY_ASSIGNMENT))
    assert out == (Send(JoinGroup(A, Subscription(0b0011, 3))),)  # KAFKA-13419: the old one


@pytest.mark.spec("R20")
def test_leave_revokes_and_sends_leave_group():
    c = stable(COOP)
    c, out = member.handle(COOP, c, Leave())
    assert out == (Callback("revoked", 0b0011), Send(LeaveGroup(((A, 0),))))
    assert c.phase == MemberPhase.LEFT and c.owned == 0


@pytest.mark.spec("R41")
def test_a_stable_member_commits_what_it_owns_and_a_refusal_changes_nothing():
    c = stable(COOP, owned=0b0101, generation=4)
    c2, out = member.handle(COOP, c, CommitDue())
    assert c2 == c and out == (Send(OffsetCommit(A, 4, 0b0101)),)
    for error in (Error.NONE, Error.ILLEGAL_GENERATION, Error.UNKNOWN_MEMBER_ID):
        assert member.handle(COOP, c, OffsetCommitResponse(error)) == (c, ())
    joining, _ = member.handle(COOP, c, HeartbeatResponse(Error.REBALANCE_IN_PROGRESS))
    assert member.handle(COOP, joining, CommitDue()) == (joining, ())  # one request outstanding
    nothing = c._replace(owned=0)
    assert member.handle(COOP, nothing, CommitDue()) == (nothing, ())
