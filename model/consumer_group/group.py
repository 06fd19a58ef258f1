"""The coordinator's state of a consumer group (KIP-848): ``ConsumerGroup`` and its
``ConsumerGroupMember`` records, the derived group state, and the partition epochs'
bookkeeping.

Sources: org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup (groupEpoch,
targetAssignmentEpoch, targetAssignment, currentPartitionEpoch, maybeUpdateGroupState,
updateMember / removeMember with maybeUpdatePartitionEpoch), ConsumerGroupMember
(memberEpoch, previousMemberEpoch, state, assignedPartitions,
partitionsPendingRevocation with their assignment epochs (KIP-1251), subscribedTopicNames /
subscribedTopicRegex, instanceId, isReconciledTo).
"""
from __future__ import annotations

from typing import NamedTuple

from ..config import GroupConfig, rule
from ..protocol import ALL_TOPICS, NO_INSTANCE_ID, partitions_of
from .messages import FREE, GroupState, MemberState


class ConsumerGroupMember(NamedTuple):
    """One member at the coordinator. ``epoch``, ``previous_epoch``: its member epoch and
    the one before (-2 after a static member's temporary leave); ``state``: its
    reconciliation state; ``assigned``, ``revoking``: its assigned partitions and those
    pending revocation (bitmasks); ``topics``: its subscription (a topic bitmask,
    ``ALL_TOPICS`` for every topic), by regular expression if ``regex``, which the
    coordinator has ``resolved`` or not yet (an unresolved one matches nothing,
    CurrentAssignmentBuilder.subscribedTopicIds); ``assignment_epochs``: ``((partition,
    epoch), ...)`` by partition, for each partition of ``assigned | revoking`` the target
    assignment epoch at which it was assigned to the member (KIP-1251, Kafka 4.4:
    ConsumerGroupMember.assignmentEpoch / pendingRevocationEpoch), which OffsetCommit's
    validation reads (K11). ``classic``: for a member that speaks the
    classic protocol inside the consumer group (online migration), ``(conn, subscription)``,
    the connection of its last JoinGroup and the Subscription it sent (its
    ClassicMemberMetadata; ConsumerGroupMember.useClassicProtocol), () for a
    consumer-protocol member. ``server_assignor``: the server assignor it prefers, the last
    ServerAssignor it sent (ConsumerGroupMember.serverAssignorName), None if none (K16)."""

    member_id: int
    instance_id: int
    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: int
    revoking: int
    topics: int = ALL_TOPICS
    regex: bool = False
    resolved: bool = True
    assignment_epochs: tuple = ()
    classic: tuple = ()
    server_assignor: str | None = None


class ConsumerGroup(NamedTuple):
    """A consumer group at the coordinator. ``epoch``: the group epoch; ``target_epoch``:
    the target assignment epoch; ``members``: ConsumerGroupMember by member id;
    ``target``: the target assignment, ``((member_id, partitions), ...)`` by member id;
    ``partition_epochs``: per partition of the configuration, the epoch of the member
    holding it (assigned or pending revocation) or ``FREE``; ``topics``: the topics that
    exist (the metadata image, a topic bitmask); ``issued``: the member ids handed out to
    classic members, as the classic Group's (model/coordinator.py), carried across an online
    migration so that an id is never handed out twice. ``clock``: the armed timers' deadlines in
    the checker's timed mode (checker/timed.py ``Clock``), else None, as the classic Group's."""

    epoch: int
    target_epoch: int
    members: tuple
    target: tuple
    partition_epochs: tuple
    topics: int = ALL_TOPICS
    issued: tuple = ()
    clock: object = None


def empty_group(cfg: GroupConfig) -> ConsumerGroup:
    """A consumer group with no members, epoch 0, every partition free and the topics
    ``cfg.created_topics`` not created yet."""
    every = (1 << len(cfg.topics)) - 1
    return ConsumerGroup(0, 0, (), (), (FREE,) * cfg.all_partitions.bit_length(), every & ~cfg.created_topics)


def find(group: ConsumerGroup, mid: int) -> ConsumerGroupMember | None:
    for m in group.members:
        if m.member_id == mid:
            return m
    return None


def find_instance(group: ConsumerGroup, iid: int) -> ConsumerGroupMember | None:
    """The member holding group.instance.id ``iid`` (ConsumerGroup.staticMember), or None."""
    if iid == NO_INSTANCE_ID:
        return None
    for m in group.members:
        if m.instance_id == iid:
            return m
    return None


def target_of(group: ConsumerGroup, mid: int) -> int:
    """The member's target assignment (0 if it has none)."""
    for m, parts in group.target:
        if m == mid:
            return parts
    return 0


def described_assignment(m: ConsumerGroupMember) -> int:
    """K17: the member's assignment as ConsumerGroupDescribe gives it (a bitmask): its
    assigned partitions and those pending revocation (ConsumerGroupMember.
    asConsumerGroupDescribeMember accumulates both, ConsumerGroupMember.java:487-488,
    Kafka 4.4.0)."""
    return m.assigned | m.revoking


def subscribed_partitions(cfg: GroupConfig, group: ConsumerGroup, m: ConsumerGroupMember) -> int:
    """The partitions of the existing topics the member subscribes to, an unresolved
    regular expression matching none (CurrentAssignmentBuilder.subscribedTopicIds)."""
    if m.regex and not m.resolved:
        return 0
    topics = group.topics if m.topics == ALL_TOPICS else m.topics & group.topics
    return cfg.partitions_of_topics(topics)


def assignment_epochs(member: ConsumerGroupMember, assigned: int, revoking: int, epoch: int) -> tuple:
    """The ``assignment_epochs`` of ``member`` once it holds ``assigned`` and ``revoking``:
    a partition newly assigned (not in its assigned partitions before, even if it was
    pending revocation: KAFKA-19449) takes ``epoch``, the target assignment epoch; any
    other keeps the epoch it was assigned at (CurrentAssignmentBuilder.computeNextAssignment
    and updateCurrentAssignment, Kafka 4.4.0: the kept partitions' epoch maps are copied,
    the pending assignment's put at targetAssignmentEpoch). Shape: see ConsumerGroupMember."""
    kept = dict(member.assignment_epochs)
    newly = assigned & ~member.assigned
    return tuple((p, epoch if newly >> p & 1 else kept.get(p, epoch)) for p in partitions_of(assigned | revoking))


def reconciled(m: ConsumerGroupMember, target_epoch: int) -> bool:
    """ConsumerGroupMember.isReconciledTo: Stable at the target assignment epoch."""
    return m.state == MemberState.STABLE and m.epoch == target_epoch


def group_state(group: ConsumerGroup) -> GroupState:
    """ConsumerGroup.maybeUpdateGroupState."""
    if not group.members:
        return GroupState.EMPTY
    if group.epoch > group.target_epoch:
        return GroupState.ASSIGNING
    if any(not reconciled(m, group.target_epoch) for m in group.members):
        return GroupState.RECONCILING
    return GroupState.STABLE


def with_member(group: ConsumerGroup, m: ConsumerGroupMember) -> tuple:
    """``group.members`` with ``m`` put in place of the member of its id (or added)."""
    rest = [x for x in group.members if x.member_id != m.member_id]
    return tuple(sorted(rest + [m]))


def without_member(group: ConsumerGroup, mid: int) -> tuple:
    return tuple(x for x in group.members if x.member_id != mid)


def _held(m: ConsumerGroupMember | None) -> int:
    return (m.assigned | m.revoking) if m is not None else 0


def _set_epochs(epochs: list, mask: int, epoch: int) -> None:
    for p in partitions_of(mask):
        epochs[p] = epoch


def partition_epochs_after(epochs: tuple, old: ConsumerGroupMember | None,
                           new: ConsumerGroupMember | None) -> tuple:
    """K6: ConsumerGroup.maybeUpdatePartitionEpoch (after KAFKA-16147): the partitions the old
    record held (assigned or pending revocation) are freed, then those the new one holds
    take its epoch. Kafka throws IllegalStateException where a removed epoch is not the
    old member's or an added partition is held already; the model keeps the bookkeeping
    as it comes out and lets the invariants judge it (valid_partition_epochs)."""
    out = list(epochs)
    if old is not None:
        for p in partitions_of(_held(old)):
            if out[p] == old.epoch:
                out[p] = FREE
    if new is not None:
        _set_epochs(out, _held(new), new.epoch)
    return tuple(out)


def update_partition_epochs(cfg: GroupConfig, epochs: tuple, old: ConsumerGroupMember | None,
                            new: ConsumerGroupMember | None) -> tuple:
    """The partition epochs after the member record ``old`` became ``new`` (either None
    for an added or removed member), by ``partition_epochs_after`` or its mutation's
    replacement."""
    return rule(cfg, partition_epochs_after)(epochs, old, new)
