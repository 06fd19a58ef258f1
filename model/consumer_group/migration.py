"""KIP-848's online migration between classic and consumer groups, with Kafka's default
group.consumer.migration.policy BIDIRECTIONAL: one coordinator handler over a group that is
either a classic ``Group`` (model/coordinator.py) or a ``ConsumerGroup``,
``handle(cfg, group, event) -> (group', replies)``, and one client handler over a process
that speaks either protocol, ``client_handle(cfg, client, event)``.

* Upgrade (M1): a ConsumerGroupHeartbeat joining (epoch 0) a classic group converts it: an
  empty one is replaced by a new consumer group (KAFKA-16313's offline migration), one with
  members becomes a consumer group whose epoch, target assignment epoch and members' epochs
  are the classic generation, each member keeping its assignment as its target, its
  pending JoinGroup or SyncGroup answered REBALANCE_IN_PROGRESS (not if an assignment
  carries an assignor's user data: GROUP_ID_NOT_FOUND); the heartbeat is then
  handled by the consumer group coordinator. Any other ConsumerGroupHeartbeat to a classic
  group is GROUP_ID_NOT_FOUND.
* Classic members in a consumer group (M3-M6): model/consumer_group/classic_members.py.
* Downgrade (M2): when the last consumer-protocol member leaves or is fenced and classic
  members remain, the consumer group (without the fenced members, its epoch not bumped)
  becomes a classic group at generation = group epoch, each member's stored assignment its
  target assignment, and a rebalance starts. A classic JoinGroup to an empty consumer group
  replaces it with a new classic group (offline migration).

The classic side runs the classic handlers with the classic protocol's configuration
(``classic_config``: cooperative, cooperative-sticky, as the Java consumer's rolling
upgrade to KIP-848 starts from).

Sources (Kafka 4.4.0, org.apache.kafka.coordinator.group): GroupMetadataManager.
getOrMaybeCreateConsumerGroup (GroupMetadataManager.java:865-883), maybeDeleteEmptyClassicGroup,
validateOnlineUpgrade, convertToConsumerGroup (:1443-1482), validateOnlineDowngradeWithFencedMembers
(:1277-1292), consumerGroupFenceMembers (:4884-4948), convertToClassicGroup (:1341-1384);
ConsumerGroup.fromClassicGroup (ConsumerGroup.java:1224-1284); ClassicGroup.fromConsumerGroup
(ClassicGroup.java:1366-1443). The policy's size limits (group.consumer.max.size,
group.classic.max.size) are never reached at the checker's bounds.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from .. import coordinator as classic, member
from ..config import GroupConfig, rule
from ..coordinator import EMPTY_GROUP, Group, MemberMetadata
from ..protocol import (
    EMPTY_ASSIGNMENT, NO_GENERATION, NO_MEMBER_ID, Assignment, Error, Heartbeat, JoinGroup, JoinGroupResponse,
    LeaveGroup, Phase, Receive, Reply, SyncGroup, SyncGroupResponse, partitions_of,
)
from . import classic_members, coordinator, membership
from .group import ConsumerGroup, ConsumerGroupMember, empty_group, target_of
from .membership import Membership
from .messages import JOIN_EPOCH, ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse, MemberState

CLASSIC_REQUESTS = (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)


@lru_cache(maxsize=64)
def classic_config(cfg: GroupConfig) -> GroupConfig:
    """The configuration the classic handlers read: ``cfg`` under the cooperative protocol and
    the cooperative-sticky assignor, with only the mutations that replace a classic rule (R..;
    the migration's own replace rules of the consumer side and of this module, K.. and M..)."""
    from ..mutations import REGISTRY
    classic_rules = frozenset(n for n in cfg.mutations if REGISTRY[n].rules.startswith("R"))
    return replace(cfg, protocol="cooperative", assignor="cooperative-sticky", mutations=classic_rules, migration=0,
                   regex=False)


def converted_assignment(m: MemberMetadata) -> int:
    """The partitions a classic member keeps through an upgrade: its stored assignment
    (ConsumerGroup.fromClassicGroup decodes ClassicGroupMember.assignment, ConsumerGroup.java:1224-1284)."""
    return m.assignment.partitions


def upgraded(cfg: GroupConfig, group: Group, out: list) -> ConsumerGroup:
    """M1: convertToConsumerGroup: the held JoinGroups and SyncGroups answered
    REBALANCE_IN_PROGRESS (completeAllJoinFutures, completeAllSyncFutures), then
    ConsumerGroup.fromClassicGroup: group epoch = target assignment epoch = generation, each
    member Stable at it (previous epoch too), assigned its stored assignment (each partition
    at the generation, Utils.toAssignmentWithEpochs), which is also its target."""
    for m in group.members:
        if m.awaiting_join:
            out.append(Reply(m.conn, JoinGroupResponse(Error.REBALANCE_IN_PROGRESS, m.member_id, NO_GENERATION,
                                                       NO_MEMBER_ID, ())))
        if m.awaiting_sync:
            out.append(Reply(m.conn, SyncGroupResponse(Error.REBALANCE_IN_PROGRESS, EMPTY_ASSIGNMENT)))
    gen = group.generation
    new = empty_group(cfg)
    epochs = list(new.partition_epochs)
    members, target = [], []
    for m in group.members:
        owned = rule(cfg, converted_assignment)(m)
        members.append(ConsumerGroupMember(m.member_id, m.instance_id, gen, gen, MemberState.STABLE, owned, 0,
                                           m.subscription.topics, assignment_epochs=tuple(
                                               (p, gen) for p in partitions_of(owned)),
                                           classic=(m.conn, m.subscription)))
        target.append((m.member_id, owned))
        for p in range(len(epochs)):
            if owned >> p & 1:
                epochs[p] = gen
    return new._replace(epoch=gen, target_epoch=gen, members=tuple(sorted(members)), target=tuple(sorted(target)),
                        partition_epochs=tuple(epochs), issued=group.issued)


def upgradable(group: Group) -> bool:
    """M1: whether a classic group with members may be converted: not if a member's stored
    assignment carries user data, which the consumer group would lose (ConsumerGroup.
    fromClassicGroup throws, ConsumerGroup.java:1240; convertToConsumerGroup answers
    GROUP_ID_NOT_FOUND, GroupMetadataManager.java:1467, Kafka 4.4.0), as librdkafka's
    cooperative-sticky assignments do."""
    return not any(m.assignment.user_data for m in group.members)


def offline_upgrade(cfg: GroupConfig, group: Group) -> ConsumerGroup | None:
    """M1: maybeDeleteEmptyClassicGroup: an empty classic group gives way to a new consumer
    group (KAFKA-16313), keeping the member ids it issued; None: not converted."""
    return empty_group(cfg)._replace(issued=group.issued)


def downgraded_generation(group: ConsumerGroup) -> int:
    """M2: the classic group's generation: the consumer group's epoch
    (ClassicGroup.fromConsumerGroup, ClassicGroup.java:1366)."""
    return group.epoch


def downgraded(cfg: GroupConfig, group: ConsumerGroup, fenced: frozenset, out: list) -> Group:
    """M2: convertToClassicGroup with a rebalance: ClassicGroup.fromConsumerGroup without the
    ``fenced`` members, Stable at the consumer group's epoch, each member's stored assignment
    its target assignment, then prepareRebalance."""
    members = tuple(MemberMetadata(m.member_id, m.instance_id, m.classic[0], m.classic[1],
                                   Assignment(target_of(group, m.member_id)), False, False, False)
                    for m in group.members if m.member_id not in fenced)
    converted = EMPTY_GROUP._replace(phase=Phase.STABLE, generation=rule(cfg, downgraded_generation)(group),
                                     members=members, issued=group.issued)
    return classic._prepare_rebalance(classic_config(cfg), converted, out)


def _from_classic(cfg: GroupConfig, group: Group, event) -> tuple:
    req = event.request
    out: list = []
    if req.member_epoch != JOIN_EPOCH:  # getOrMaybeCreateConsumerGroup: not a consumer group
        return group, (Reply(event.conn, ConsumerGroupHeartbeatResponse(Error.GROUP_ID_NOT_FOUND, req.member_id,
                                                                        req.member_epoch)),)
    if group.members:
        if not rule(cfg, upgradable)(group):
            return group, (Reply(event.conn, ConsumerGroupHeartbeatResponse(Error.GROUP_ID_NOT_FOUND, req.member_id,
                                                                            req.member_epoch)),)
        converted = upgraded(cfg, group, out)
    else:
        converted = rule(cfg, offline_upgrade)(cfg, group)
        if converted is None:
            return group, (Reply(event.conn, ConsumerGroupHeartbeatResponse(Error.GROUP_ID_NOT_FOUND, req.member_id,
                                                                            req.member_epoch)),)
    after, replies = coordinator.handle(cfg, converted, event)
    if replies[-1].response.error != Error.NONE:
        # refused (an ApiException): the conversion's records are not written, the group stays classic (the
        # join futures convertToConsumerGroup completed meanwhile are not modelled)
        return group, replies
    return after, tuple(out) + replies


def _maybe_downgraded(cfg: GroupConfig, before: ConsumerGroup, after: ConsumerGroup, replies: tuple) -> tuple:
    """M2: validateOnlineDowngradeWithFencedMembers after a step that fenced members: the group
    had a consumer-protocol member, and every remaining member speaks the classic protocol."""
    fenced = frozenset(m.member_id for m in before.members) - frozenset(m.member_id for m in after.members)
    if not fenced or not after.members or any(not m.classic for m in after.members):
        return after, replies
    if all(m.classic for m in before.members if m.member_id in fenced):
        return after, replies
    out = list(replies)
    return downgraded(cfg, before, fenced, out), tuple(out)


def handle(cfg: GroupConfig, group, event) -> tuple:
    """One coordinator step on a classic ``Group`` or a ``ConsumerGroup`` (module docstring):
    ``(group', (Reply, ...))``. Unknown inputs raise TypeError."""
    request = event.request if type(event) is Receive else None
    if type(group) is Group:
        if type(request) is ConsumerGroupHeartbeat:
            return _from_classic(cfg, group, event)
        return classic.handle(classic_config(cfg), group, event)
    if type(request) in CLASSIC_REQUESTS:
        if type(request) is JoinGroup and not group.members:  # offline migration: a new classic group
            return classic.handle(classic_config(cfg), EMPTY_GROUP._replace(issued=group.issued), event)
        after, replies = classic_members.handle(cfg, group, event.conn, request)
    else:
        after, replies = coordinator.handle(cfg, group, event)
    return _maybe_downgraded(cfg, group, after, replies)


def armed_timers(group) -> list:
    """The coordinator's timers of either kind of group (model/coordinator.py's or
    model/consumer_group/coordinator.py's ``armed_timers``)."""
    return classic.armed_timers(group) if type(group) is Group else coordinator.armed_timers(group)


def client_handle(cfg: GroupConfig, client, event) -> tuple:
    """One client step: a KIP-848 ``Membership`` by membership.handle, a classic consumer by
    model/member.py's handle under ``classic_config``."""
    if type(client) is Membership:
        return membership.handle(cfg, client, event)
    return member.handle(classic_config(cfg), client, event)

