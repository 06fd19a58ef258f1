"""How long the consumer group coordinator's timers run, and which of them a step arms
or restarts: the timed reading of ``coordinator.armed_timers`` for a driver with a clock
(impl/'s asyncio timers in ``rebalance serve``). The classic protocol's is model/timing.py.

Durations are in ms:

* ``SessionTimeout(m)``: the broker's group.consumer.session.timeout.ms, the same for
  every member (KIP-848 moved the session timeout to the broker;
  GroupMetadataManager.consumerGroupSessionTimeoutMs, default 45 s);
* ``MemberRebalanceTimeout(m)``: the rebalance timeout ``m`` sent
  (ConsumerGroupHeartbeatRequest.RebalanceTimeoutMs, the client's max.poll.interval.ms;
  scheduleConsumerGroupRebalanceTimeout).

The members are told to heartbeat every group.consumer.heartbeat.interval.ms
(ConsumerGroupHeartbeatResponse.HeartbeatIntervalMs, default 5 s).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from ..protocol import Error, Heartbeat, JoinGroup, JoinGroupResponse, Receive, SessionTimeout, SyncGroup
from .coordinator import armed_timers
from .group import ConsumerGroup, find
from .messages import JOIN_EPOCH, ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse, MemberRebalanceTimeout


class ConsumerTimeouts(NamedTuple):
    """The broker's group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms
    (ms; GroupCoordinatorConfig's defaults)."""

    session_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000


def duration_ms(timer, timeouts: ConsumerTimeouts, rebalance_ms_of: Callable[[int], int],
                group: ConsumerGroup | None = None, classic_session_ms_of: Callable[[int], int] | None = None) -> int:
    """How long ``timer`` runs, ms. ``rebalance_ms_of(member_id)``: the rebalance timeout
    that member sent. With ``group`` and ``classic_session_ms_of(member_id)`` (the session
    timeout a classic member's JoinGroup sent, online migration M3): a classic member's
    session runs that long (scheduleConsumerGroupSessionTimeout with
    classicProtocolSessionTimeout, GroupMetadataManager.classicGroupJoinToConsumerGroup,
    Kafka 4.4.0)."""
    if type(timer) is SessionTimeout:
        m = find(group, timer.member_id) if group is not None and classic_session_ms_of else None
        return classic_session_ms_of(timer.member_id) if m is not None and m.classic else timeouts.session_ms
    return rebalance_ms_of(timer.member_id)


def session_refreshed(event, outputs) -> int | None:
    """The member whose session timer this step restarts, or None: a heartbeat that is
    answered without error and is not a leave restarts its member's session
    (consumerGroupHeartbeat ends with scheduleConsumerGroupSessionTimeout; a refused one
    throws before it; a static member's temporary leave, consumerGroupStaticMemberGroupLeave,
    schedules nothing). A classic member's JoinGroup and SyncGroup answered without error,
    and its Heartbeat answered without error or REBALANCE_IN_PROGRESS, restart its session
    too (classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup,
    classicGroupHeartbeatToConsumerGroup schedule it once the member is validated, Kafka 4.4.0)."""
    if type(event) is not Receive:
        return None
    kind = type(event.request)
    if kind in (JoinGroup, SyncGroup, Heartbeat):
        for out in outputs:
            r = out.response
            if type(r) is JoinGroupResponse and r.error == Error.NONE:
                return r.member_id
            if r.error == Error.NONE or (kind is Heartbeat and r.error == Error.REBALANCE_IN_PROGRESS):
                return event.request.member_id
        return None
    if kind is not ConsumerGroupHeartbeat:
        return None
    for out in outputs:
        r = out.response
        if type(r) is ConsumerGroupHeartbeatResponse and r.error == Error.NONE and r.member_epoch >= JOIN_EPOCH:
            return r.member_id
    return None


def _reconciliation(group: ConsumerGroup, mid: int) -> tuple | None:
    m = find(group, mid)
    return None if m is None else (m.epoch, m.state, m.assigned, m.revoking)


def rearm(before: ConsumerGroup, after: ConsumerGroup, armed, refreshed: int | None) -> tuple:
    """Which timers a coordinator step from ``before`` to ``after`` cancels and (re)starts:
    ``(cancel keys, ((key, timer), ...))``; a timer is its own key. ``armed``: the keys
    running now; ``refreshed``: ``session_refreshed``'s member. A member's rebalance
    timeout restarts whenever its reconciliation changes while it stays in
    UNREVOKED_PARTITIONS (maybeReconcile schedules it on every change of the member's
    assignment state, and cancels it on leaving that state)."""
    now = [timer for timer, _ in armed_timers(after)]
    cancel = tuple(k for k in armed if k not in now)
    start = []
    for timer in now:
        if timer not in armed:
            start.append((timer, timer))
        elif type(timer) is SessionTimeout:
            if timer.member_id == refreshed:
                start.append((timer, timer))
        elif type(timer) is MemberRebalanceTimeout and (
                _reconciliation(before, timer.member_id) != _reconciliation(after, timer.member_id)):
            start.append((timer, timer))
    return cancel, tuple(start)
