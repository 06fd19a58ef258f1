"""KIP-848's pure handlers, rule by rule (spec/KIP848.md): the coordinator's heartbeat,
reconciliation, partition epochs, leave and static membership, the server assignors, and
the client's membership and reconciliation."""
import pytest

from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.consumer_group import coordinator, membership
from rebalance.model.consumer_group.assignors import range_, uniform
from rebalance.model.consumer_group.group import ConsumerGroupMember, empty_group, find, partition_epochs_after
from rebalance.model.consumer_group.membership import NEW_MEMBERSHIP, NONE
from rebalance.model.consumer_group.messages import (
    FREE, ClientState, ConsumerGroupHeartbeat as CGH, ConsumerGroupHeartbeatResponse as Resp, MemberRebalanceTimeout,
    MemberState, Reconcile, Release, RequestTimeout, Start, TopicsChanged,
)
from rebalance.model.consumer_group.reconciliation import reconcile
from rebalance.model.protocol import (
    ALL_TOPICS, NO_MEMBER_ID, Callback, Error, HeartbeatDue, OffsetCommit, Receive, Send, SessionTimeout, connection, member_id,
)

CFG = GroupConfig(topics=(("t", 4),), protocol="consumer", assignor="uniform")
A, B, C = member_id(0, 1), member_id(1, 1), member_id(2, 1)


def beat(group, slot, mid, epoch, owned=None, topics=None, iid=0, cfg=CFG, regex=False):
    """The coordinator's step on one heartbeat: ``(group, response)``."""
    g2, out = coordinator.handle(cfg, group, Receive(connection(slot, 1), CGH(mid, epoch, iid, topics, owned, regex)))
    return g2, out[0].response


def join(group, slot, mid, iid=0, topics=ALL_TOPICS, cfg=CFG, regex=False):
    return beat(group, slot, mid, 0, 0, topics, iid, cfg, regex)


def stable_pair():
    """A (t-0, t-1) and B (t-2, t-3), both Stable at epoch 2: B joined after A, A revoked."""
    g, _ = join(empty_group(CFG), 0, A)
    g, _ = join(g, 1, B)
    g, r = beat(g, 0, A, 1, owned=0b1111)  # A still owns all: UNREVOKED at 1
    g, r = beat(g, 0, A, 1, owned=0b0011)  # A released t-2, t-3: Stable at 2
    g, r = beat(g, 1, B, 2)
    return g


@pytest.mark.spec("K1", "K4")
def test_a_join_bumps_the_group_epoch_and_computes_a_target():
    g, r = join(empty_group(CFG), 0, A)
    assert (g.epoch, g.target_epoch, r.member_epoch, r.assignment) == (1, 1, 1, 0b1111)
    g, r = join(g, 1, B)
    assert (g.epoch, g.target_epoch) == (2, 2)
    assert dict(g.target) == {A: 0b0011, B: 0b1100}
    assert r.assignment == 0 and find(g, B).state == MemberState.UNRELEASED_PARTITIONS


@pytest.mark.spec("K2")
def test_heartbeat_validation_and_unknown_members():
    g = empty_group(CFG)
    assert beat(g, 0, A, 0, owned=None, topics=ALL_TOPICS)[1].error == Error.INVALID_REQUEST  # a join owns []
    # and nothing else (GroupCoordinatorService.java:493, Kafka 4.4.0; the model accepted it before)
    assert beat(g, 0, A, 0, owned=0b0001, topics=ALL_TOPICS)[1].error == Error.INVALID_REQUEST
    assert beat(g, 0, A, -3)[1].error == Error.INVALID_REQUEST
    assert beat(g, 0, A, -2)[1].error == Error.INVALID_REQUEST  # a static leave names its instance id
    assert beat(g, 0, A, 5)[1].error == Error.UNKNOWN_MEMBER_ID


@pytest.mark.spec("K2")
def test_an_empty_member_id_is_refused_by_version():
    """GroupCoordinatorService.java:478-510 (Kafka 4.4.0): MemberId may be empty only at v0 and only
    for a join or a static leave; the coordinator then names the member (``member_id``)."""
    def unnamed(version, epoch, iid=0, owned=None, topics=None):
        req = CGH(A, epoch, iid, topics, owned, False, version, True)
        return coordinator.handle(CFG, empty_group(CFG), Receive(connection(0, 1), req))
    assert unnamed(1, 0, owned=0, topics=ALL_TOPICS)[1][0].response.error == Error.INVALID_REQUEST
    for epoch in (-1, 3):
        assert unnamed(0, epoch)[1][0].response.error == Error.INVALID_REQUEST
    g, out = unnamed(0, 0, owned=0, topics=ALL_TOPICS)
    assert out[0].response.error == Error.NONE and find(g, A) is not None
    assert unnamed(0, -2, iid=1)[1][0].response.error == Error.UNKNOWN_MEMBER_ID  # past validation


@pytest.mark.spec("K3")
def test_previous_epoch_is_tolerated_with_owned_partitions_within_the_assignment():
    g = stable_pair()
    a = find(g, A)
    assert (a.epoch, a.previous_epoch) == (2, 1)
    assert beat(g, 0, A, 1, owned=0b0011)[1].error == Error.NONE  # the response that bumped it was lost
    assert beat(g, 0, A, 1, owned=0b0111)[1].error == Error.FENCED_MEMBER_EPOCH  # owns what is not its
    assert beat(g, 0, A, 1, owned=None)[1].error == Error.FENCED_MEMBER_EPOCH  # reports nothing
    assert beat(g, 0, A, 3)[1].error == Error.FENCED_MEMBER_EPOCH  # ahead
    g2, r = join(g, 0, A)  # a rejoin at epoch 0 is always accepted (KAFKA-19233) and gets its assignment back
    assert (r.error, r.member_epoch, r.assignment) == (Error.NONE, 2, 0b0011)


@pytest.mark.spec("K5")
def test_reconciliation_revokes_before_it_assigns():
    g, _ = join(empty_group(CFG), 0, A)
    g, _ = join(g, 1, B)
    g, r = beat(g, 0, A, 1, owned=0b1111)
    a = find(g, A)
    assert (a.state, a.epoch, a.assigned, a.revoking, r.assignment) == (
        MemberState.UNREVOKED_PARTITIONS, 1, 0b0011, 0b1100, 0b0011)
    g, r = beat(g, 1, B, 2)  # still unreleased: A holds them
    assert find(g, B).state == MemberState.UNRELEASED_PARTITIONS and r.assignment is None
    g, r = beat(g, 0, A, 1, owned=0b0011)
    assert (find(g, A).state, find(g, A).epoch) == (MemberState.STABLE, 2)
    g, r = beat(g, 1, B, 2)
    assert (find(g, B).state, r.assignment) == (MemberState.STABLE, 0b1100)


@pytest.mark.spec("K5")
def test_a_members_own_pending_revocation_is_not_unreleased():
    # KAFKA-19449: a partition the member is revoking, targeted to it again, is not waited for
    m = ConsumerGroupMember(A, 0, 3, 2, MemberState.UNREVOKED_PARTITIONS, 0b0001, 0b0010)
    after = reconcile(CFG, m, 4, 0b0011, held=0b0011, owned=0b0001, subscribed=0b1111, enforce=False)
    assert (after.state, after.epoch, after.assigned, after.revoking) == (MemberState.STABLE, 4, 0b0011, 0)


@pytest.mark.spec("K6")
def test_partition_epochs_follow_the_member_record():
    old = ConsumerGroupMember(A, 0, 3, 2, MemberState.UNREVOKED_PARTITIONS, 0b0001, 0b0010)
    new = old._replace(state=MemberState.STABLE, epoch=4, assigned=0b0011, revoking=0)
    epochs = (3, 3, FREE, FREE)
    assert partition_epochs_after(epochs, old, new) == (4, 4, FREE, FREE)  # KAFKA-16147: t-1 keeps an epoch
    assert partition_epochs_after(epochs, old, None) == (FREE,) * 4


@pytest.mark.spec("K7")
def test_leave_fences_and_static_leave_keeps_the_assignment():
    g = stable_pair()
    g2, r = beat(g, 1, B, -1)
    assert (find(g2, B), g2.epoch, r.member_epoch) == (None, 3, -1)
    assert g2.partition_epochs == (2, 2, FREE, FREE)
    g2, _ = coordinator.handle(CFG, g2, SessionTimeout(A))
    assert (g2.members, g2.epoch, g2.target_epoch) == ((), 4, 4)  # KAFKA-20442: an empty group's epochs match


@pytest.mark.spec("K7")
def test_the_rebalance_timeout_fences_a_member_that_did_not_revoke():
    g, _ = join(empty_group(CFG), 0, A)
    g, _ = join(g, 1, B)
    g, _ = beat(g, 0, A, 1, owned=0b1111)
    assert (MemberRebalanceTimeout(A), (A,)) in coordinator.armed_timers(g)
    g2, _ = coordinator.handle(CFG, g, MemberRebalanceTimeout(A))
    assert find(g2, A) is None and g2.partition_epochs == (FREE,) * 4


@pytest.mark.spec("K8")
def test_static_members_replace_only_after_a_temporary_leave():
    i = 1
    g, _ = join(empty_group(CFG), 0, A, iid=i)
    A2 = member_id(0, 2)
    assert join(g, 0, A2, iid=i)[1].error == Error.UNRELEASED_INSTANCE_ID
    assert beat(g, 0, A2, 1, iid=i)[1].error == Error.FENCED_INSTANCE_ID
    assert beat(g, 0, A2, 1, iid=2)[1].error == Error.UNKNOWN_MEMBER_ID
    g2, r = join(g, 0, A, iid=i)  # its own join again (a lost response): handled in place (PR #23542)
    assert (r.error, r.member_epoch, r.assignment) == (Error.NONE, 1, 0b1111)
    g, r = beat(g, 0, A, -2, iid=i)
    assert (find(g, A).epoch, find(g, A).assigned, r.member_epoch) == (-2, 0b1111, -2)
    g, r = join(g, 0, A2, iid=i)
    assert find(g, A) is None and (r.member_epoch, r.assignment) == (1, 0b1111)  # its assignment back, no bump


@pytest.mark.spec("K9")
def test_a_regex_matches_nothing_until_resolved_and_a_created_topic_bumps_the_epoch():
    cfg = GroupConfig(topics=(("t", 2), ("u", 1)), protocol="consumer", assignor="uniform", regex=True,
                      created_topics=0b10)
    g = empty_group(cfg)
    assert g.topics == 0b01
    g, r = join(g, 0, A, topics=0b11, cfg=cfg, regex=True)
    assert (g.epoch, r.assignment) == (1, 0)  # a new group moves off epoch 0, but the regex is not resolved
    g, _ = coordinator.handle(cfg, g, coordinator.RegexResolved())
    assert g.epoch == 2
    g, r = beat(g, 0, A, 1, cfg=cfg)
    assert r.assignment == 0b011
    g, _ = coordinator.handle(cfg, g, TopicsChanged(0b11))
    assert g.epoch == 3


@pytest.mark.spec("K10")
def test_the_assignment_is_sent_on_a_full_request_or_a_change():
    g = stable_pair()
    assert beat(g, 0, A, 2)[1].assignment is None
    assert beat(g, 0, A, 2, owned=0b0011, topics=ALL_TOPICS)[1].assignment == 0b0011


@pytest.mark.spec("K11")
def test_offset_commits_are_fenced_on_the_member_epoch():
    g = stable_pair()  # A at epoch 2 holds t-0, t-1 since epoch 1; B t-2, t-3 since epoch 2

    def commit(mid, epoch, partitions=0b0001, cfg=CFG):
        req = Receive(connection(0, 1), OffsetCommit(mid, epoch, partitions))
        return coordinator.handle(cfg, g, req)[1][0].response.error
    assert dict(find(g, A).assignment_epochs) == {0: 1, 1: 1} and dict(find(g, B).assignment_epochs) == {2: 2, 3: 2}
    assert commit(A, 2) == Error.NONE
    assert commit(A, 3) == Error.STALE_MEMBER_EPOCH  # newer than the member's
    # KIP-1251 (Kafka 4.4.0): at an older epoch, the partitions held since that epoch or before, only
    assert commit(A, 1, 0b0011) == Error.NONE
    assert commit(A, 1, 0b0101) == Error.STALE_MEMBER_EPOCH  # t-2 is B's: the whole request refused
    assert commit(B, 1, 0b0100) == Error.STALE_MEMBER_EPOCH  # B holds t-2 since epoch 2
    strict = GroupConfig(topics=CFG.topics, protocol=CFG.protocol, assignor=CFG.assignor,
                         mutations=frozenset({"commit-at-member-epoch-only"}))  # Kafka 3.7-4.2's rule
    assert commit(A, 1, 0b0011, cfg=strict) == Error.STALE_MEMBER_EPOCH
    # a member commits with v9 or later (ConsumerGroup.java:675, Kafka 4.4.0), checked before its epoch;
    # an unknown member is UNKNOWN_MEMBER_ID at any version
    for version, mid, expected in ((8, A, Error.UNSUPPORTED_VERSION), (8, C, Error.UNKNOWN_MEMBER_ID)):
        req = OffsetCommit(mid, 1, 0b0001, 0, version)
        assert coordinator.handle(CFG, g, Receive(connection(0, 1), req))[1][0].response.error == expected
    assert commit(C, 2) == Error.UNKNOWN_MEMBER_ID
    assert commit(NO_MEMBER_ID, -1) == Error.UNKNOWN_MEMBER_ID  # an admin's commit to a group with members
    empty = empty_group(CFG)  # accepted by an empty one (ConsumerGroup.java:663, Kafka 4.4.0; refused before)
    assert coordinator.handle(CFG, empty, Receive(connection(0, 1), OffsetCommit(NO_MEMBER_ID, -1, 0b0001))
                              )[1][0].response.error == Error.NONE


def _client(**kw):
    c, out = membership.handle(CFG, NEW_MEMBERSHIP, Start(A))
    return c._replace(**kw), out


@pytest.mark.spec("K12")
def test_a_join_is_full_and_later_heartbeats_send_only_what_changed():
    c, out = _client()
    assert out == (Send(CGH(A, 0, 0, ALL_TOPICS, 0, False)),)
    c, _ = membership.handle(CFG, c, Resp(Error.NONE, A, 1, 0b0011))
    c, _ = membership.handle(CFG, c, Reconcile())
    assert c.state == ClientState.ACKNOWLEDGING
    c, out = membership.handle(CFG, c, HeartbeatDue())
    assert out == (Send(CGH(A, 1, 0, None, 0b0011, False)),) and c.state == ClientState.STABLE
    c, _ = membership.handle(CFG, c, Resp(Error.NONE, A, 1, None))
    assert membership.handle(CFG, c, HeartbeatDue())[1] == (Send(CGH(A, 1, 0, None, None, False)),)


@pytest.mark.spec("K12")
def test_a_report_covers_what_a_pending_reconciliation_may_add():
    # finding K-F1: the current assignment and the target not reconciled yet
    c, _ = _client(state=ClientState.RECONCILING, epoch=4, owned=0b0001, current=0b0001, target=0b0011,
                   reconciled=False, full=True, inflight=False)
    assert membership.reported_ownership(c) == 0b0011
    assert membership.handle(CFG, c, HeartbeatDue())[1][0].request.owned == 0b0011


@pytest.mark.spec("K13")
def test_reconciliation_revokes_then_assigns_and_acknowledges_a_target_equal_to_the_current_one():
    c, _ = _client(state=ClientState.STABLE, epoch=2, owned=0b0011, current=0b0011, target=0b0011)
    c, _ = membership.handle(CFG, c, Resp(Error.NONE, A, 3, 0b0110))
    assert c.state == ClientState.RECONCILING
    c, out = membership.handle(CFG, c, Reconcile())
    assert out == (Callback("revoked", 0b0001),) and c.owned == 0b0010
    c, out = membership.handle(CFG, c, Reconcile())
    assert out == (Callback("assigned", 0b0100),) and (c.owned, c.current, c.state) == (
        0b0110, 0b0110, ClientState.ACKNOWLEDGING)
    # KAFKA-16185: a new target with the current assignment's partitions is still acknowledged
    c, _ = _client(state=ClientState.STABLE, epoch=2, owned=0b0011, current=0b0011, target=0b0111)
    c, _ = membership.handle(CFG, c, Resp(Error.NONE, A, 2, 0b0011))
    assert (c.state, c.reconciled) == (ClientState.RECONCILING, False)
    c, _ = membership.handle(CFG, c, Reconcile())
    assert c.state == ClientState.ACKNOWLEDGING and c.unsent


@pytest.mark.spec("K14")
def test_a_fenced_member_loses_its_partitions_at_once_and_rejoins():
    c, _ = _client(state=ClientState.STABLE, epoch=2, owned=0b0011, current=0b0011, target=0b0011)
    c, out = membership.handle(CFG, c, Resp(Error.UNKNOWN_MEMBER_ID, A, 2))
    assert out == (Callback("lost", 0b0011),) and (c.state, c.owned, c.epoch) == (ClientState.FENCED, 0, 0)
    c, out = membership.handle(CFG, c, Release())
    assert c.state == ClientState.JOINING and out[0].request.member_epoch == 0
    c, _ = _client(state=ClientState.STABLE, epoch=2, owned=0b0011, current=0b0011, target=0b0011)
    c, out = membership.handle(CFG, c, Resp(Error.UNRELEASED_INSTANCE_ID, A, 0))
    assert c.state == ClientState.FATAL and c.owned == 0


@pytest.mark.spec("K15")
def test_a_lost_response_is_retried_as_a_full_heartbeat():
    c, _ = _client(state=ClientState.STABLE, epoch=2, owned=0b0011, current=0b0011, target=0b0011, inflight=True)
    c, _ = membership.handle(CFG, c, RequestTimeout())
    assert membership.handle(CFG, c, HeartbeatDue())[1] == (Send(CGH(A, 2, 0, ALL_TOPICS, 0b0011, False)),)


@pytest.mark.spec("K16")
def test_uniform_is_balanced_and_keeps_a_balanced_assignment():
    members = ((A, 0, ALL_TOPICS), (B, 0, ALL_TOPICS), (C, 0, ALL_TOPICS))
    assert dict(uniform(CFG, members, {}, 0b1)) == {A: 0b0011, B: 0b0100, C: 0b1000}
    # KAFKA-18688: C holding the extra partition keeps it
    assert dict(uniform(CFG, members, {A: 0b0001, B: 0b0010, C: 0b1100}, 0b1)) == {A: 0b0001, B: 0b0010, C: 0b1100}
    assert dict(range_(CFG, members, {}, 0b1)) == {A: 0b0011, B: 0b0100, C: 0b1000}


def test_consumer_protocol_configuration_errors():
    with pytest.raises(ConfigError, match="server-side assignor"):
        GroupConfig(protocol="consumer", assignor="cooperative-sticky")
    with pytest.raises(ConfigError, match="regex"):
        GroupConfig(regex=True)
    with pytest.raises(ConfigError, match="uniform"):
        GroupConfig(protocol="eager", assignor="uniform")
    assert NONE == -1


TWO_TOPICS = GroupConfig(topics=(("t", 2), ("u", 2)), protocol="consumer", assignor="uniform")
UNIFORM_TARGET, RANGE_TARGET = {A: 0b0011, B: 0b1100}, {A: 0b0101, B: 0b1010}  # A joined first and held all


def named(group, slot, mid, epoch, assignor, owned=None, topics=None, cfg=TWO_TOPICS):
    """A heartbeat naming ServerAssignor ``assignor``: ``(group, response)``."""
    g2, out = coordinator.handle(cfg, group, Receive(connection(slot, 1), CGH(mid, epoch, 0, topics, owned,
                                                                               server_assignor=assignor)))
    return g2, out[0].response


def joined_pair(a, b, cfg=TWO_TOPICS):
    g, _ = named(empty_group(cfg), 0, A, 0, a, owned=0, topics=ALL_TOPICS, cfg=cfg)
    return named(g, 1, B, 0, b, owned=0, topics=ALL_TOPICS, cfg=cfg)[0]


@pytest.mark.spec("K16")
def test_the_group_uses_the_server_assignor_most_members_name():
    """ConsumerGroup.computePreferredServerAssignor (Kafka 4.4.0): the name most members sent,
    else the configuration's default (group.consumer.assignors' first)."""
    assert dict(joined_pair(None, None).target) == UNIFORM_TARGET
    assert dict(joined_pair("range", "range").target) == RANGE_TARGET
    assert dict(joined_pair("range", None).target) == RANGE_TARGET  # one name against none
    ranged = GroupConfig(topics=TWO_TOPICS.topics, protocol="consumer", assignor="range")
    assert dict(joined_pair(None, None, ranged).target) == RANGE_TARGET
    assert dict(joined_pair("uniform", "uniform", ranged).target) == UNIFORM_TARGET
    assert find(joined_pair("range", None), A).server_assignor == "range"  # a heartbeat without one keeps it


@pytest.mark.spec("K16")
def test_ties_go_to_the_order_of_kafkas_maps():
    """Equal counts: uniform before range (BaseHashTable.findSlot's order), except that a name
    only the heartbeat brings goes after those the group had (the HashMap copy's order)."""
    def m(mid, assignor):
        return ConsumerGroupMember(mid, 0, 1, 0, MemberState.STABLE, 0, 0, server_assignor=assignor)
    pick = coordinator.preferred_assignor
    assert pick(()) is None and pick((m(A, None),)) is None
    assert pick((m(A, "range"), m(B, "uniform"))) == "uniform"
    assert pick((m(A, "range"), m(B, "range"), m(C, "uniform"))) == "range"
    assert pick((m(A, "range"),), m(B, None), m(B, "uniform")) == "range"  # uniform comes in last
    assert pick((m(A, "uniform"),), m(B, None), m(B, "range")) == "uniform"
    assert pick((m(A, "range"), m(B, "range")), m(B, "range"), m(B, "uniform")) == "range"
    assert pick((m(A, "uniform"), m(B, "range")), m(B, "range"), m(B, "uniform")) == "uniform"


@pytest.mark.spec("K1", "K16")
def test_a_change_of_the_preferred_assignor_bumps_the_group_epoch():
    """KAFKA-20434 (fixed in Kafka 4.4.0, GroupMetadataManager.hasPreferredServerAssignorChanged):
    members switching assignor bump the group epoch once the group's choice changes, and the
    new target is the new assignor's; ``preferred-assignor-unbumped`` (Kafka 3.8-4.3) keeps
    the old target."""
    def switch(cfg):
        g = joined_pair("uniform", "uniform", cfg)
        g, _ = named(g, 0, A, 1, None, owned=0b0011, cfg=cfg)  # A released what B gets: Stable at 2
        g, _ = named(g, 1, B, 2, None, owned=0, cfg=cfg)  # B is given it: Stable at 2
        assert {m.state for m in g.members} == {MemberState.STABLE}
        assert (g.epoch, dict(g.target)) == (2, UNIFORM_TARGET)
        g, _ = named(g, 0, A, 2, "range", cfg=cfg)  # a tie: uniform still
        assert g.epoch == 2
        return named(g, 1, B, 2, "range", cfg=cfg)[0]
    g = switch(TWO_TOPICS)
    assert (g.epoch, g.target_epoch, dict(g.target)) == (3, 3, RANGE_TARGET)
    mutated = GroupConfig(topics=TWO_TOPICS.topics, protocol="consumer", assignor="uniform",
                          mutations=("preferred-assignor-unbumped",))
    g = switch(mutated)
    assert (g.epoch, dict(g.target)) == (2, UNIFORM_TARGET)
