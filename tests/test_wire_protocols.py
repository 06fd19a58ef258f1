"""The coordinator rules that only the wire form exercises: protocol selection
(R35), MEMBER_ID_REQUIRED (R36) and the stored group (R37)."""
import pytest
from rebalance.model import coordinator
from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import EMPTY_GROUP, armed_timers, find, session_refreshed, stored
from rebalance.model.protocol import (
    Assignment, Error, Heartbeat, JoinGroup, JoinGroupResponse, LeaveGroup, PendingMemberTimeout, Phase,
    Protocols, Receive, SyncGroup, connection, member_id,
)

CFG = GroupConfig(initial_rebalance_delay=False)
CA, CB, CC = connection(0, 1), connection(1, 1), connection(2, 1)
A1, B1, C1 = member_id(0, 1), member_id(1, 1), member_id(2, 1)
COOP_AND_RANGE = Protocols("consumer", (("cooperative-sticky", b"a-coop"), ("range", b"a-range")))
RANGE_ONLY = Protocols("consumer", (("range", b"c-range"),))


def step(group, conn, req):
    return coordinator.handle(CFG, group, Receive(conn, req))


def replies(out, kind=JoinGroupResponse):
    return [r.response for r in out if type(r.response) is kind]


@pytest.mark.spec("R35")
def test_the_leader_gets_each_members_metadata_for_the_selected_protocol():
    g, _ = step(EMPTY_GROUP, CA, JoinGroup(0, COOP_AND_RANGE))
    assert g.phase == Phase.COMPLETING_REBALANCE and g.protocol == "cooperative-sticky"
    g, _ = step(g, CB, JoinGroup(0, Protocols("consumer", (("cooperative-sticky", b"b-coop"),))))
    g, out = step(g, CA, JoinGroup(A1, COOP_AND_RANGE))
    (ra, rb) = sorted(replies(out), key=lambda r: r.member_id)
    assert ra.protocol == rb.protocol == "cooperative-sticky"
    assert ra.members == ((A1, 0, b"a-coop"), (B1, 0, b"b-coop")) and rb.members == ()


@pytest.mark.spec("R35")
def test_an_eager_only_member_switches_the_group_to_its_protocol():
    g, _ = step(EMPTY_GROUP, CA, JoinGroup(0, COOP_AND_RANGE))
    g, _ = step(g, CC, JoinGroup(0, RANGE_ONLY))
    g, out = step(g, CA, JoinGroup(A1, COOP_AND_RANGE))
    assert g.protocol == "range"
    leader = next(r for r in replies(out) if r.members)
    assert leader.members == ((A1, 0, b"a-range"), (C1, 0, b"c-range"))


@pytest.mark.spec("R35")
def test_votes_decide_and_ties_go_to_the_earliest_member():
    members = [coordinator.MemberMetadata(i, 0, 0, p, Assignment(0), False, False, False) for i, p in enumerate((
        Protocols("consumer", (("range", b""), ("roundrobin", b""))),
        Protocols("consumer", (("roundrobin", b""), ("range", b""))),
        Protocols("consumer", (("roundrobin", b""), ("range", b""), ("sticky", b""))),
    ))]
    assert coordinator.select_protocol(members) == "roundrobin"
    assert coordinator.select_protocol(members[:2]) == "range"


@pytest.mark.spec("R35")
def test_a_member_sharing_no_protocol_or_type_is_refused():
    g, _ = step(EMPTY_GROUP, CA, JoinGroup(0, Protocols("consumer", (("cooperative-sticky", b""),))))
    for sub in (RANGE_ONLY, Protocols("connect", (("cooperative-sticky", b""),)), Protocols("consumer", ())):
        g2, out = step(g, CB, JoinGroup(0, sub))
        assert g2 == g and replies(out)[0].error == Error.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.spec("R36")
def test_member_id_required_then_join_with_it():
    g, out = step(EMPTY_GROUP, CA, JoinGroup(0, COOP_AND_RANGE, require_known_member_id=True))
    (r,) = replies(out)
    assert r.error == Error.MEMBER_ID_REQUIRED and r.member_id == A1
    assert g.members == () and g.pending == (A1,)
    assert (PendingMemberTimeout(A1), ()) in armed_timers(g)
    g, out = step(g, CA, JoinGroup(A1, COOP_AND_RANGE, require_known_member_id=True))
    assert g.pending == () and find(g, A1) is not None
    assert replies(out)[0].error == Error.NONE and replies(out)[0].member_id == A1


@pytest.mark.spec("R36")
def test_an_unused_pending_id_expires():
    g, _ = step(EMPTY_GROUP, CA, JoinGroup(0, COOP_AND_RANGE, require_known_member_id=True))
    g, _ = coordinator.handle(CFG, g, PendingMemberTimeout(A1))
    assert g.pending == ()
    _, out = step(g, CA, JoinGroup(A1, COOP_AND_RANGE, require_known_member_id=True))
    assert replies(out)[0].error == Error.UNKNOWN_MEMBER_ID


@pytest.mark.spec("R37")
def test_only_stable_or_empty_groups_are_stored_and_without_held_requests():
    g, _ = step(EMPTY_GROUP, CA, JoinGroup(0, COOP_AND_RANGE))
    g, _ = step(g, CB, JoinGroup(0, COOP_AND_RANGE))  # PreparingRebalance
    assert stored(g) is None
    g, _ = step(g, CA, JoinGroup(A1, COOP_AND_RANGE))  # CompletingRebalance
    assert stored(g) is None
    g, _ = step(g, CA, SyncGroup(A1, g.generation, ((A1, b"x"), (B1, b"y"))))
    snap = stored(g)
    assert snap.phase == Phase.STABLE and snap.generation == g.generation and snap.protocol == "cooperative-sticky"
    assert [m.assignment for m in snap.members] == [b"x", b"y"]
    assert not any(m.pending_sync for m in snap.members)  # B never synced: its timer restarts
    # the restarted coordinator answers B's heartbeat at the stored generation
    _, out = step(snap, connection(1, 2), Heartbeat(B1, snap.generation))
    assert out[0].response.error == Error.NONE
    g, _ = step(g, CB, LeaveGroup(((B1, 0),)))
    assert stored(g) is None  # PreparingRebalance again


@pytest.mark.spec("R37")
def test_a_group_that_only_handed_out_member_ids_is_not_stored():
    g, _ = step(EMPTY_GROUP, CA, JoinGroup(0, COOP_AND_RANGE, require_known_member_id=True))
    assert g.pending == (A1,) and g.issued and stored(g) is None  # generation 0: nothing to resume
    g, _ = coordinator.handle(CFG, g, PendingMemberTimeout(A1))
    assert stored(g) is None
    g, _ = step(g, CA, JoinGroup(0, COOP_AND_RANGE))
    g, _ = step(g, CA, LeaveGroup(((g.members[0].member_id, 0),)))  # generation 1 formed, then emptied
    assert g.generation == 2 and stored(g).phase == Phase.EMPTY


@pytest.mark.spec("R37")
def test_session_timers_restart_on_member_requests():
    assert session_refreshed(CFG, Heartbeat(A1, 3)) == A1
    assert session_refreshed(CFG, JoinGroup(B1, COOP_AND_RANGE)) == B1
    assert session_refreshed(CFG, LeaveGroup(((A1, 0),))) == 0


@pytest.mark.spec("R36")
def test_the_member_rejoins_at_once_with_the_id_handed_out():
    from rebalance.model import member
    c, out = member.handle(CFG, member.NEW_CONSUMER, member.Start())
    c, out = member.handle(CFG, c, JoinGroupResponse(Error.MEMBER_ID_REQUIRED, A1, -1, 0, ()))
    assert c.member_id == A1 and c.phase == member.MemberPhase.JOINING
    assert [o.request.member_id for o in out] == [A1]
