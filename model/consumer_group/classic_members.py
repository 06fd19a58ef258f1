"""Classic members inside a consumer group (KIP-848's online migration): the consumer group
coordinator answering JoinGroup, SyncGroup, Heartbeat and LeaveGroup from members that
still speak the classic protocol, ``handle(cfg, group, event) -> (group', replies)`` on a
``ConsumerGroup``.

A classic member is a ConsumerGroupMember whose ``classic`` holds its connection and its
JoinGroup's Subscription (ConsumerGroupMember.classicMemberMetadata). Its JoinGroup is its
reconciliation: the coordinator reconciles it with the partitions its subscription says it
owns (as a ConsumerGroupHeartbeat's owned partitions) and answers at once with its member
epoch as the generation, naming no leader (the member follows); its SyncGroup returns its
assigned partitions; its Heartbeat answers REBALANCE_IN_PROGRESS while it is behind (its
epoch below the target assignment epoch, partitions to revoke, or partitions released for
it to take), so that it rejoins. Rule tags M.. refer to spec/SPEC.md, "Online migration".

Sources (Kafka 4.4.0, org.apache.kafka.coordinator.group.GroupMetadataManager):
classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup (with
throwIfRebalanceInProgress), classicGroupHeartbeatToConsumerGroup,
classicGroupLeaveToConsumerGroup, validateConsumerGroupMember,
getOrMaybeSubscribeStaticConsumerGroupMember; ConsumerGroup.waitingOnUnreleasedPartition.
Not modelled: the join and sync timeouts that fence a classic member which does not rejoin
or sync within its rebalance timeout (a silent member's session timeout fences it anyway),
and the downgrade when a classic static member replaces the last consumer-protocol member
(KAFKA-17317).
"""
from __future__ import annotations

from ..config import GroupConfig, rule
from ..coordinator import fresh_member_id
from ..protocol import (
    EMPTY_ASSIGNMENT, NO_GENERATION, NO_INSTANCE_ID, NO_MEMBER_ID, Assignment, Error, Heartbeat, HeartbeatResponse,
    JoinGroup, JoinGroupResponse, LeaveGroup, LeaveGroupResponse, Reply, SyncGroup, SyncGroupResponse, slot_of,
)
from .coordinator import admit, fence, new_member
from .group import ConsumerGroup, ConsumerGroupMember, find, find_instance, target_of
from .messages import FREE, JOIN_EPOCH, ConsumerGroupHeartbeat, MemberState


def member_error(group: ConsumerGroup, mid: int, iid: int) -> Error:
    """M4: validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol: the member
    (by instance id if static) must be known and speak the classic protocol
    (UNKNOWN_MEMBER_ID), a static one under its own member id (FENCED_INSTANCE_ID)."""
    m = find_instance(group, iid) if iid != NO_INSTANCE_ID else find(group, mid)
    if m is None or not m.classic:
        return Error.UNKNOWN_MEMBER_ID
    if m.member_id != mid:
        return Error.FENCED_INSTANCE_ID
    return Error.NONE


def _static_member(group: ConsumerGroup, mid: int, iid: int, unknown: bool) -> tuple:
    """getOrMaybeSubscribeStaticConsumerGroupMember for a classic member: ``(member, replaced
    or None)`` or an Error. A JoinGroup with no member id takes the instance id over from
    whoever holds it, released or not (GroupMetadataManager.java:3427-3434, Kafka 4.4.0)."""
    holder = find_instance(group, iid)
    if unknown:
        if holder is None:
            return new_member(mid, iid), None
        return holder._replace(member_id=mid, epoch=JOIN_EPOCH, previous_epoch=JOIN_EPOCH), holder
    if holder is None:
        return Error.UNKNOWN_MEMBER_ID
    if holder.member_id != mid:
        return Error.FENCED_INSTANCE_ID
    return holder, None


def _join(cfg: GroupConfig, group: ConsumerGroup, conn: int, req: JoinGroup, out: list) -> ConsumerGroup:
    """M3: classicGroupJoinToConsumerGroup."""
    mid, iid = req.member_id, req.group_instance_id
    unknown = mid == NO_MEMBER_ID
    if unknown:
        mid, issued = fresh_member_id(group.issued, [m.member_id for m in group.members], slot_of(conn))
        group = group._replace(issued=issued)
        if req.require_known_member_id and iid == NO_INSTANCE_ID:  # KIP-394, as in a classic group (R36)
            out.append(Reply(conn, JoinGroupResponse(Error.MEMBER_ID_REQUIRED, mid, NO_GENERATION, NO_MEMBER_ID, ())))
            return group
    if iid != NO_INSTANCE_ID:
        got = _static_member(group, mid, iid, unknown)
        if type(got) is Error:
            out.append(Reply(conn, JoinGroupResponse(got, mid, NO_GENERATION, NO_MEMBER_ID, ())))
            return group
        member, replaced = got
    else:  # getOrMaybeSubscribeDynamicConsumerGroupMember(createIfNotExists=true): an unknown id joins anew
        member, replaced = find(group, mid) or new_member(mid, NO_INSTANCE_ID), None
    sub = req.subscription
    heartbeat = ConsumerGroupHeartbeat(mid, JOIN_EPOCH, iid, sub.topics, sub.owned)
    group, after = admit(cfg, group, member._replace(classic=(conn, sub)), replaced, heartbeat)
    out.append(Reply(conn, JoinGroupResponse(Error.NONE, mid, after.epoch, NO_MEMBER_ID, (),
                                             protocol=rule(cfg, joined_protocol)(sub))))
    return group


def joined_protocol(sub) -> str:
    """M3: the protocol a classic member's JoinGroup response names: the first of those it
    sent (its ``assignors``; "" for one implicit protocol), whatever the group selects
    elsewhere (classicGroupJoinToConsumerGroup's setProtocolName(supportedClassicProtocols()
    .iterator().next().name()), GroupMetadataManager.java:2902, Kafka 4.4.0)."""
    return sub.assignors[0] if sub.assignors else ""


def _sync(group: ConsumerGroup, conn: int, req: SyncGroup, out: list) -> ConsumerGroup:
    """M4: classicGroupSyncToConsumerGroup: the member's assigned partitions, at its epoch, once
    it has caught up with the target (throwIfRebalanceInProgress: REBALANCE_IN_PROGRESS while
    the target assignment epoch is ahead of it and it has nothing to revoke)."""
    error = member_error(group, req.member_id, req.group_instance_id)
    m = find(group, req.member_id)
    if not error and req.generation != m.epoch:
        error = Error.ILLEGAL_GENERATION
    if not error and group.target_epoch > m.epoch and m.state != MemberState.UNREVOKED_PARTITIONS:
        error = Error.REBALANCE_IN_PROGRESS
    if error:
        out.append(Reply(conn, SyncGroupResponse(error, EMPTY_ASSIGNMENT)))
        return group
    out.append(Reply(conn, SyncGroupResponse(Error.NONE, Assignment(m.assigned))))
    return group


def waiting_on_unreleased(group: ConsumerGroup, m: ConsumerGroupMember) -> bool:
    """ConsumerGroup.waitingOnUnreleasedPartition: an UNRELEASED_PARTITIONS member waits for a
    partition of its target that another member still holds (its epoch set)."""
    wanted = target_of(group, m.member_id) & ~m.assigned
    return m.state == MemberState.UNRELEASED_PARTITIONS and any(
        wanted >> p & 1 for p, e in enumerate(group.partition_epochs) if e != FREE)


def must_rejoin(group: ConsumerGroup, m: ConsumerGroupMember) -> bool:
    """M5: whether a classic member's Heartbeat is answered REBALANCE_IN_PROGRESS, for it to
    rejoin: its epoch is behind the target assignment epoch, it has partitions to revoke, or
    the partitions it waited for are released (GroupMetadataManager.java:8616-8640, Kafka 4.4.0)."""
    return (m.epoch < group.target_epoch or m.state == MemberState.UNREVOKED_PARTITIONS
            or m.state == MemberState.UNRELEASED_PARTITIONS and not waiting_on_unreleased(group, m))


def heartbeat_error(cfg: GroupConfig, group: ConsumerGroup, req: Heartbeat) -> Error:
    """M5: classicGroupHeartbeatToConsumerGroup: the member validated (``member_error``), its
    generation its member epoch (ILLEGAL_GENERATION), then ``must_rejoin``."""
    error = member_error(group, req.member_id, req.group_instance_id)
    if error:
        return error
    m = find(group, req.member_id)
    if req.generation != m.epoch:
        return Error.ILLEGAL_GENERATION
    return Error.REBALANCE_IN_PROGRESS if rule(cfg, must_rejoin)(group, m) else Error.NONE


def _leave(cfg: GroupConfig, group: ConsumerGroup, conn: int, req: LeaveGroup, out: list) -> ConsumerGroup:
    """M6: classicGroupLeaveToConsumerGroup: each member named (by instance id if static) is
    fenced as a consumer-protocol member leaving is (consumerGroupFenceMembers)."""
    results, gone = [], []
    for mid, iid in req.members:
        m = find_instance(group, iid) if iid != NO_INSTANCE_ID else find(group, mid)
        error = Error.UNKNOWN_MEMBER_ID if m is None else (
            Error.FENCED_INSTANCE_ID if mid != NO_MEMBER_ID and m.member_id != mid else Error.NONE)
        results.append((mid, iid, error))
        if not error:
            gone.append(m.member_id)
    for mid in gone:
        group = fence(cfg, group, mid)
    out.append(Reply(conn, LeaveGroupResponse(Error.NONE, tuple(results))))
    return group


def handle(cfg: GroupConfig, group: ConsumerGroup, conn: int, req) -> tuple:
    """One classic request ``req`` on connection ``conn``: ``(group', (Reply, ...))``. Other
    requests raise TypeError."""
    out: list = []
    kind = type(req)
    if kind is JoinGroup:
        group = _join(cfg, group, conn, req, out)
    elif kind is SyncGroup:
        group = _sync(group, conn, req, out)
    elif kind is Heartbeat:
        out.append(Reply(conn, HeartbeatResponse(heartbeat_error(cfg, group, req))))
    elif kind is LeaveGroup:
        group = _leave(cfg, group, conn, req, out)
    else:
        raise TypeError(f"a consumer group cannot handle the classic request {req!r}")
    return group, tuple(out)
