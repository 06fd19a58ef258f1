"""The consumer group coordinator (KIP-848): ``handle(cfg, group, event) -> (group', replies)``.

Inputs: ``Receive(conn, ConsumerGroupHeartbeat | OffsetCommit)`` and the coordinator's own
events: ``SessionTimeout(member_id)``, ``MemberRebalanceTimeout(member_id)``,
``RegexResolved()`` and ``TopicsChanged(topics)``. Outputs: ``Reply(conn, response)``.
Rule tags (R..) refer to spec/SPEC.md, section "The consumer group protocol".

Behaviour after org.apache.kafka.coordinator.group.GroupMetadataManager
(consumerGroupHeartbeat, getOrMaybeSubscribeDynamicConsumerGroupMember,
getOrMaybeSubscribeStaticConsumerGroupMember, throwIfConsumerGroupMemberEpochIsInvalid,
consumerGroupLeave, consumerGroupStaticMemberGroupLeave, consumerGroupFenceMember,
replaceMember, maybeReconcile, updateTargetAssignment, the session and rebalance timeouts)
and ConsumerGroup.validateOffsetCommit, Kafka 4.4 (with KAFKA-19233: epoch 0 is always a
rejoin; and apache/kafka PR #23542, still open there: a static member rejoining with its
own member id is handled in place).
"""
from __future__ import annotations

from ..config import SERVER_ASSIGNORS, GroupConfig, rule
from ..protocol import (
    NO_INSTANCE_ID, Error, OffsetCommit, OffsetCommitResponse, Receive, Reply, SessionTimeout, partitions_of, union,
)
from .assignors import assign
from .group import (
    ConsumerGroup, ConsumerGroupMember, assignment_epochs, find, find_instance, reconciled, subscribed_partitions, target_of,
    update_partition_epochs, with_member, without_member,
)
from .messages import (
    FREE, JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse,
    MemberRebalanceTimeout, MemberState, RegexResolved, TopicsChanged,
)
from .reconciliation import reconcile


class _Refused(Exception):
    """A heartbeat refused with ``error`` (the model's ApiException)."""

    def __init__(self, error: Error):
        super().__init__(error.name)
        self.error = error


def validate(req: ConsumerGroupHeartbeat) -> Error:
    """K2: ConsumerGroupHeartbeatRequest validation (GroupCoordinatorService's
    throwIfConsumerGroupHeartbeatRequestIsInvalid, GroupCoordinatorService.java:478-510,
    Kafka 4.4.0): an empty member id from v1 on, or at v0 but for a join or a static leave
    ("MemberId can't be empty."), an epoch below -2, a join without a subscription or with
    owned partitions other than none ("TopicPartitions must be empty when (re-)joining",
    GroupCoordinatorService.java:493), a static leave without an instance id are
    INVALID_REQUEST. (The fields the model abstracts, empty ids, a join's missing
    rebalance timeout and the server assignor, are checked where they are read:
    impl/consumer_group.py ``heartbeat_wire_error``.)"""
    if req.unnamed and (req.version >= 1 or req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH):
        return Error.INVALID_REQUEST
    if req.member_epoch < STATIC_LEAVE_EPOCH:
        return Error.INVALID_REQUEST
    if req.member_epoch == JOIN_EPOCH and (req.topics is None or req.owned != 0):
        return Error.INVALID_REQUEST
    if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id == NO_INSTANCE_ID:
        return Error.INVALID_REQUEST
    return Error.NONE


def epoch_error(member: ConsumerGroupMember, received: int, owned: int | None) -> Error:
    """K3: throwIfConsumerGroupMemberEpochIsInvalid: a join (epoch 0) is always accepted
    (KAFKA-19233); an epoch ahead of the member's is fenced; one behind is accepted only
    as its previous epoch with owned partitions within its assignment (the response
    that bumped it may have been lost)."""
    if received == JOIN_EPOCH:
        return Error.NONE
    if received > member.epoch:
        return Error.FENCED_MEMBER_EPOCH
    if received < member.epoch and (received != member.previous_epoch or owned is None
                                    or owned & ~member.assigned):
        return Error.FENCED_MEMBER_EPOCH
    return Error.NONE


def new_member(mid: int, iid: int) -> ConsumerGroupMember:
    """A member as ConsumerGroup.getOrMaybeCreateMember creates it: epoch 0, nothing
    assigned, no subscription yet."""
    return ConsumerGroupMember(mid, iid, JOIN_EPOCH, JOIN_EPOCH, MemberState.STABLE, 0, 0, 0)


def rejoining_static(holder: ConsumerGroupMember, mid: int) -> ConsumerGroupMember:
    """A static member joining at epoch 0 under the member id that already holds its
    instance id (its join's response was lost, or it was fenced and rejoins): handled in
    place, as a dynamic member's rejoin (PR #23542), its epoch reset only after a
    temporary leave (-2)."""
    if holder.epoch == STATIC_LEAVE_EPOCH:
        return holder._replace(epoch=JOIN_EPOCH, previous_epoch=JOIN_EPOCH)
    return holder


def replaces_unreleased(holder: ConsumerGroupMember) -> bool:
    """M7: a static member joining with the consumer protocol takes its instance id over from
    a holder that speaks the classic protocol even though that one never left: a classic
    static member sends no LeaveGroup when it shuts down, so a rolling upgrade's restarted
    process would otherwise be refused UNRELEASED_INSTANCE_ID until the old member's session
    ran out (KAFKA-17228; GroupMetadataManager.java:3427-3434, Kafka 4.4.0)."""
    return bool(holder.classic)


def _static_member(cfg: GroupConfig, group: ConsumerGroup, req: ConsumerGroupHeartbeat) -> tuple:
    """K8: getOrMaybeSubscribeStaticConsumerGroupMember: ``(member, replaced member or None)``.
    Raises _Refused."""
    holder = find_instance(group, req.instance_id)
    if req.member_epoch == JOIN_EPOCH:
        if holder is None:
            return find(group, req.member_id) or new_member(req.member_id, req.instance_id), None
        if holder.member_id == req.member_id:
            return rule(cfg, rejoining_static)(holder, req.member_id), None
        if holder.epoch != STATIC_LEAVE_EPOCH and not rule(cfg, replaces_unreleased)(holder):
            raise _Refused(Error.UNRELEASED_INSTANCE_ID)
        return holder._replace(member_id=req.member_id, epoch=JOIN_EPOCH, previous_epoch=JOIN_EPOCH), holder
    if holder is None:
        raise _Refused(Error.UNKNOWN_MEMBER_ID)
    if holder.member_id != req.member_id:
        raise _Refused(Error.FENCED_INSTANCE_ID)
    return holder, None


def _dynamic_member(cfg: GroupConfig, group: ConsumerGroup, req: ConsumerGroupHeartbeat) -> ConsumerGroupMember:
    """K2: getOrMaybeSubscribeDynamicConsumerGroupMember. Raises _Refused."""
    member = find(group, req.member_id)
    if member is None:
        if req.member_epoch != JOIN_EPOCH:
            raise _Refused(Error.UNKNOWN_MEMBER_ID)
        return new_member(req.member_id, NO_INSTANCE_ID)
    return member


def _subscribed(group: ConsumerGroup, member: ConsumerGroupMember, req: ConsumerGroupHeartbeat) -> ConsumerGroupMember:
    """The member with the request's subscription (SubscribedTopicNames or
    SubscribedTopicRegex, when sent; K9): a new regular expression is unresolved until the
    coordinator resolves it, unless another member's same one is resolved already
    (maybeUpdateRegularExpressions: REGEX_UPDATED_AND_RESOLVED)."""
    if req.topics is None or (req.topics == member.topics and req.regex == member.regex):
        return member
    resolved = not req.regex or any(m.regex and m.resolved and m.topics == req.topics for m in group.members
                                    if m.member_id != member.member_id)
    return member._replace(topics=req.topics, regex=req.regex, resolved=resolved)


def compute_target(cfg: GroupConfig, group: ConsumerGroup, members: tuple, assignor: str) -> tuple:
    """K4: TargetAssignmentBuilder: the target of server assignor ``assignor`` (K16: the one the
    group uses) for ``members``, from the current one."""
    subs = tuple((m.member_id, m.instance_id, _assignor_topics(m)) for m in members)
    return rule(cfg, assign)(cfg, subs, dict(group.target), group.topics, assignor)


def preferred_assignor(members: tuple, old: ConsumerGroupMember | None = None,
                       new: ConsumerGroupMember | None = None) -> str | None:
    """K16: the server assignor most of ``members`` prefer, once ``old``'s record is replaced
    by ``new``'s (ConsumerGroup.computePreferredServerAssignor; without them,
    ConsumerGroup.preferredServerAssignor, Kafka 4.4.0), None if none names one. Kafka counts
    the names in a TimelineHashMap, whose slots list ``uniform`` before ``range``
    (BaseHashTable.findSlot), copies it into a HashMap, where both names share a bucket and
    so keep that order, a name only ``new`` brings coming last, and takes Stream.max by
    count, which keeps the first of equal counts: that order breaks ties here."""
    counts = {name: 0 for name in SERVER_ASSIGNORS}
    for m in members:
        if m.server_assignor is not None:
            counts[m.server_assignor] += 1
    counts = {name: n for name, n in counts.items() if n}
    if old is not None and old.server_assignor in counts:  # Utils.decValue: gone at 0
        counts[old.server_assignor] -= 1
        if not counts[old.server_assignor]:
            del counts[old.server_assignor]
    if new is not None and new.server_assignor is not None:  # Utils.incValue: a new name goes last
        counts[new.server_assignor] = counts.get(new.server_assignor, 0) + 1
    best = None
    for name, n in counts.items():
        if best is None or n > counts[best]:
            best = name
    return best


def used_assignor(cfg: GroupConfig, members: tuple, old: ConsumerGroupMember | None = None,
                  new: ConsumerGroupMember | None = None) -> str:
    """K16: the server assignor the group uses: the one its members prefer
    (``preferred_assignor``), else the configuration's default (group.consumer.assignors'
    first; ``orElse(defaultConsumerGroupAssignor.name())`` in
    GroupMetadataManager.updateTargetAssignment, ConsumerGroup.asDescribedGroup's AssignorName)."""
    return preferred_assignor(members, old, new) or cfg.assignor


def assignor_changed(before: str, after: str) -> bool:
    """K1 (KAFKA-20434): whether a heartbeat changed the server assignor the group uses from
    ``before`` to ``after`` (``used_assignor`` without and with its member record;
    GroupMetadataManager.hasPreferredServerAssignorChanged, Kafka 4.4.0): a change bumps the
    group epoch, so that the target is computed again with it."""
    return before != after


def _assignor_topics(m: ConsumerGroupMember) -> int:
    """The topics the assignor sees a member subscribe to: none for an unresolved regex."""
    return 0 if m.regex and not m.resolved else m.topics


def held_partitions(group: ConsumerGroup) -> int:
    """The partitions whose epoch is set (ConsumerGroup.currentPartitionEpoch != -1)."""
    out = 0
    for p, e in enumerate(group.partition_epochs):
        if e != FREE:
            out |= 1 << p
    return out


def admit(cfg: GroupConfig, group: ConsumerGroup, member: ConsumerGroupMember, replaced: ConsumerGroupMember | None,
          req: ConsumerGroupHeartbeat) -> tuple:
    """K1, K4, K5: the accepted heartbeat ``req`` of ``member`` (in place of ``replaced``, a
    static member's previous record, or None) applied: its subscription, the group epoch
    bumped on a change, the target computed if behind, the member reconciled, the
    partition epochs updated: ``(group', member')``. Also the classic members' JoinGroup
    (classicGroupJoinToConsumerGroup, model/consumer_group/classic_members.py)."""
    old = find(group, member.member_id)
    updated = _subscribed(group, member, req)
    if req.server_assignor is not None:  # K16: maybeUpdateServerAssignorName
        updated = updated._replace(server_assignor=req.server_assignor)
    changed = updated.topics != member.topics or updated.regex != member.regex
    assignor = used_assignor(cfg, group.members, member, updated)
    # K1: a new group moves away from epoch 0 at once; a subscription change bumps it, a new regular
    # expression once resolved, a change of the server assignor the group uses (consumerGroupHeartbeat's
    # bumpGroupEpoch)
    bump = group.epoch == 0 or (changed and updated.resolved) or rule(cfg, assignor_changed)(
        used_assignor(cfg, group.members), assignor)
    epoch = group.epoch + 1 if bump else group.epoch
    members = without_member(group, replaced.member_id) if replaced is not None else group.members
    members = with_member(group._replace(members=members), updated)
    target = tuple((m, p) for m, p in group.target if replaced is None or m != replaced.member_id)
    if replaced is not None:
        target = tuple(sorted(target + ((updated.member_id, target_of(group, replaced.member_id)),)))
    group = group._replace(epoch=epoch, members=members, target=target)
    if replaced is not None:
        group = group._replace(partition_epochs=update_partition_epochs(cfg, group.partition_epochs, replaced, None))
        group = group._replace(partition_epochs=update_partition_epochs(cfg, group.partition_epochs, None, updated))
    if group.epoch > group.target_epoch:
        group = group._replace(target=compute_target(cfg, group, members, assignor), target_epoch=group.epoch)
    after = updated
    if changed or not reconciled(updated, group.target_epoch):
        after = reconcile(cfg, updated, group.target_epoch, target_of(group, updated.member_id),
                          held_partitions(group), req.owned, subscribed_partitions(cfg, group, updated), changed)
    group = group._replace(members=with_member(group, after),
                           partition_epochs=update_partition_epochs(cfg, group.partition_epochs,
                                                                    old if replaced is None else updated, after))
    return group, after


def _heartbeat(cfg: GroupConfig, group: ConsumerGroup, conn: int, req: ConsumerGroupHeartbeat, out: list):
    error = validate(req)
    if error:
        return group, _refuse(conn, req, error, out)
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return _leave(cfg, group, conn, req, out)
    try:
        if req.instance_id != NO_INSTANCE_ID:
            member, replaced = _static_member(cfg, group, req)
        else:
            member, replaced = _dynamic_member(cfg, group, req), None
        error = rule(cfg, epoch_error)(member, req.member_epoch, req.owned)
        if error:
            raise _Refused(error)
    except _Refused as refused:
        return group, _refuse(conn, req, refused.error, out)
    if member.classic:  # M7: it speaks the consumer protocol now (setClassicMemberMetadata(null), GroupMetadataManager.java:2557-2705)
        member = member._replace(classic=())
    group, after = admit(cfg, group, member, replaced, req)
    full = req.topics is not None and req.owned is not None  # K10
    sent = after.assigned if req.member_epoch == JOIN_EPOCH or full or after.assigned != member.assigned else None
    out.append(Reply(conn, ConsumerGroupHeartbeatResponse(Error.NONE, after.member_id, after.epoch, sent)))
    return group, out


def _refuse(conn: int, req: ConsumerGroupHeartbeat, error: Error, out: list) -> list:
    out.append(Reply(conn, ConsumerGroupHeartbeatResponse(error, req.member_id, req.member_epoch)))
    return out


def bumped_epoch(group: ConsumerGroup, members: tuple) -> int:
    """The group epoch after a member is fenced, ``members`` remaining: one more."""
    return group.epoch + 1


def emptied_target_epoch(group: ConsumerGroup) -> int:
    """The target assignment epoch after a fence: an emptied group's catches up with its
    group epoch (KAFKA-20442: an empty group's epochs match); otherwise the next heartbeat
    computes the new target."""
    return group.target_epoch if group.members else group.epoch


def fence(cfg: GroupConfig, group: ConsumerGroup, mid: int) -> ConsumerGroup:
    """K7: consumerGroupFenceMember: the member, its target and its partition epochs removed,
    the group epoch bumped (a new target follows on the next heartbeat)."""
    member = find(group, mid)
    members = without_member(group, mid)
    group = group._replace(epoch=rule(cfg, bumped_epoch)(group, members), members=members,
                           target=tuple((m, p) for m, p in group.target if m != mid),
                           partition_epochs=update_partition_epochs(cfg, group.partition_epochs, member, None))
    return group._replace(target_epoch=rule(cfg, emptied_target_epoch)(group))


def _leave(cfg: GroupConfig, group: ConsumerGroup, conn: int, req: ConsumerGroupHeartbeat, out: list):
    """K7: consumerGroupLeave: -1 fences the member; a static member's -2 keeps its
    assignment and its instance id for a restart, its pending revocations dropped."""
    if req.instance_id == NO_INSTANCE_ID:
        member = find(group, req.member_id)
        if member is None:
            return group, _refuse(conn, req, Error.UNKNOWN_MEMBER_ID, out)
    else:
        member = find_instance(group, req.instance_id)
        if member is None:
            return group, _refuse(conn, req, Error.UNKNOWN_MEMBER_ID, out)
        if member.member_id != req.member_id:
            return group, _refuse(conn, req, Error.FENCED_INSTANCE_ID, out)
    if req.member_epoch == STATIC_LEAVE_EPOCH:
        left = member._replace(epoch=STATIC_LEAVE_EPOCH, revoking=0,
                               assignment_epochs=assignment_epochs(member, member.assigned, 0, member.epoch))
        group = group._replace(members=with_member(group, left), partition_epochs=update_partition_epochs(
            cfg, group.partition_epochs, member, left))
    else:
        group = fence(cfg, group, member.member_id)
    out.append(Reply(conn, ConsumerGroupHeartbeatResponse(Error.NONE, req.member_id, req.member_epoch)))
    return group, out


def commit_error(group: ConsumerGroup, mid: int, epoch: int, partitions: int) -> Error:
    """K11: ConsumerGroup.validateOffsetCommit (Kafka 4.4.0, with KIP-1251's assignment
    epochs, KAFKA-20066): a commit at a negative epoch to a group with no members is
    accepted (the admin client's, or a consumer's without group management); otherwise
    the member must be known (UNKNOWN_MEMBER_ID). At its current epoch it commits any
    partition; at a newer one never (STALE_MEMBER_EPOCH); at an older one, only
    ``partitions`` (a bitmask) that it holds, assigned or pending revocation, each assigned
    at or before that epoch (createAssignmentEpochValidator; one refused partition fails
    the whole request: OffsetMetadataManager.commitOffset lets the validator's exception
    through), else STALE_MEMBER_EPOCH."""
    if epoch < 0 and not group.members:
        return Error.NONE
    member = find(group, mid)
    if member is None:
        return Error.UNKNOWN_MEMBER_ID
    if epoch == member.epoch:
        return Error.NONE
    # M4: a classic member is refused ILLEGAL_GENERATION where a consumer-protocol one is STALE_MEMBER_EPOCH
    # (ConsumerGroup.validateOffsetCommit and createAssignmentEpochValidator, ConsumerGroup.java:663-697, Kafka 4.4.0)
    stale = Error.ILLEGAL_GENERATION if member.classic else Error.STALE_MEMBER_EPOCH
    if epoch > member.epoch:
        return stale
    held = dict(member.assignment_epochs)
    for p in partitions_of(partitions):
        if held.get(p, epoch + 1) > epoch:
            return stale
    return Error.NONE


def commit_version_error(group: ConsumerGroup, req: OffsetCommit) -> Error:
    """K11: a member of the group commits with OffsetCommit v9 or later, else UNSUPPORTED_VERSION
    (ConsumerGroup.validateOffsetCommit, ConsumerGroup.java:675, Kafka 4.4.0: checked once the
    member is known, so after UNKNOWN_MEMBER_ID and before its epoch)."""
    member = find(group, req.member_id)
    return Error.UNSUPPORTED_VERSION if req.version < 9 and member is not None and not member.classic else Error.NONE


def _commit(cfg: GroupConfig, group: ConsumerGroup, conn: int, req: OffsetCommit, out: list):
    error = commit_version_error(group, req) or rule(cfg, commit_error)(group, req.member_id, req.generation, req.partitions)
    out.append(Reply(conn, OffsetCommitResponse(error)))
    return group, out


def _resolved(group: ConsumerGroup) -> ConsumerGroup:
    """handleRegularExpressionsResult: every member's regular expression resolved, the group
    epoch bumped if that changed any subscription."""
    pending = [m for m in group.members if m.regex and not m.resolved]
    if not pending:
        return group
    members = tuple(m._replace(resolved=True) if m.regex else m for m in group.members)
    return group._replace(epoch=group.epoch + 1, members=members)


def _topics_changed(cfg: GroupConfig, group: ConsumerGroup, topics: int) -> ConsumerGroup:
    """K9: a new metadata image: the group epoch is bumped if a member subscribes to a topic
    that appeared (the subscription metadata changed)."""
    after = group._replace(topics=topics)
    before = union(subscribed_partitions(cfg, group, m) for m in group.members)
    now = union(subscribed_partitions(cfg, after, m) for m in group.members)
    return after._replace(epoch=group.epoch + 1) if now != before else after


def armed_timers(group: ConsumerGroup) -> list:
    """The coordinator's timers with the members whose silence they wait for:
    ``[(timer input, (member_id,)), ...]``: every member's session timeout (re-armed by
    each heartbeat), and the rebalance timeout of each member revoking partitions
    (armed on entering UNREVOKED_PARTITIONS, cancelled on leaving it)."""
    out = [(SessionTimeout(m.member_id), (m.member_id,)) for m in group.members]
    out.extend((MemberRebalanceTimeout(m.member_id), (m.member_id,)) for m in group.members
               if m.state == MemberState.UNREVOKED_PARTITIONS and m.epoch > 0)
    return out


def handle(cfg: GroupConfig, group: ConsumerGroup, event) -> tuple:
    """One coordinator step: ``(group', (Reply, ...))``. Unknown inputs raise TypeError."""
    out: list = []
    kind = type(event)
    if kind is Receive:
        req = event.request
        if type(req) is ConsumerGroupHeartbeat:
            group, out = _heartbeat(cfg, group, event.conn, req, out)
        elif type(req) is OffsetCommit:
            group, out = _commit(cfg, group, event.conn, req, out)
        else:
            raise TypeError(f"consumer group coordinator cannot handle request {req!r}")
    elif kind is SessionTimeout:
        if find(group, event.member_id) is not None:
            group = fence(cfg, group, event.member_id)
    elif kind is MemberRebalanceTimeout:
        m = find(group, event.member_id)
        if m is not None and m.state == MemberState.UNREVOKED_PARTITIONS and m.epoch > 0:
            group = fence(cfg, group, event.member_id)
    elif kind is RegexResolved:
        group = _resolved(group)
    elif kind is TopicsChanged:
        group = _topics_changed(cfg, group, event.topics)
    else:
        raise TypeError(f"consumer group coordinator cannot handle input {event!r}")
    return group, tuple(out)
