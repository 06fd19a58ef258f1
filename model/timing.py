"""How long the coordinator's timers run, and which of them a step arms or
restarts: the timed reading of ``armed_timers`` shared by every driver that has
a clock (impl/'s asyncio timers, the simulator's virtual clock).

The checker explores untimed (R21: a timer may fire once the members it waits
for are silent); a driver with a clock fires each armed timer when its duration
has passed. Durations are in ms:

* ``SessionTimeout(m)``, ``PendingMemberTimeout(m)``: the session.timeout.ms of
  ``m``'s JoinGroup (GroupCoordinator.completeAndScheduleNextHeartbeatExpiration,
  addPendingMemberExpiration);
* ``RebalanceTimeout``, ``SyncTimeout``: the largest rebalance timeout
  (max.poll.interval.ms) of the members (GroupCoordinator.prepareRebalance;
  KAFKA-12890 for the pending sync);
* ``InitialRebalanceDelay``: group.initial.rebalance.delay.ms, at most the
  rebalance timeout (KIP-134; InitialDelayedJoin).

A JoinGroup's session.timeout.ms must lie within the broker's
group.min.session.timeout.ms and group.max.session.timeout.ms
(``session_timeout_error``), or the timers above could not be run as asked.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from .coordinator import Group, armed_timers
from .protocol import Error, InitialRebalanceDelay, PendingMemberTimeout, Phase, SessionTimeout


class Timeouts(NamedTuple):
    """A member's timeouts from its JoinGroup, ms: session.timeout.ms and the
    rebalance timeout (max.poll.interval.ms). Defaults: the Java consumer's (3.0+)."""

    session_ms: int = 45_000
    rebalance_ms: int = 300_000


DEFAULT_TIMEOUTS = Timeouts()


class SessionBounds(NamedTuple):
    """The broker's group.min.session.timeout.ms and group.max.session.timeout.ms
    (ms; Kafka's defaults)."""

    min_ms: int = 6_000
    max_ms: int = 1_800_000


def session_timeout_error(session_ms: int, bounds: SessionBounds = SessionBounds()) -> Error:
    """INVALID_SESSION_TIMEOUT for a JoinGroup whose session.timeout.ms lies outside
    ``bounds``, else NONE: the coordinator answers it at once, before it looks at the
    group (GroupCoordinator.handleJoinGroup), so a member cannot ask for a session
    that never expires (R42)."""
    return Error.NONE if bounds.min_ms <= session_ms <= bounds.max_ms else Error.INVALID_SESSION_TIMEOUT


def _per_member(timer) -> bool:
    kind = type(timer)
    return kind is SessionTimeout or kind is PendingMemberTimeout


def duration_ms(timer, group: Group, timeouts_of: Callable[[int], Timeouts], initial_delay_ms: int) -> int:
    """How long ``timer`` runs, ms. ``timeouts_of(member_id)``: that member's Timeouts."""
    if _per_member(timer):
        return timeouts_of(timer.member_id).session_ms
    rebalance = max((timeouts_of(m.member_id).rebalance_ms for m in group.members),
                    default=DEFAULT_TIMEOUTS.rebalance_ms)
    if type(timer) is InitialRebalanceDelay:
        return min(initial_delay_ms, rebalance)
    return rebalance


def joined_timeouts(group: Group, conn: int, timeouts: Timeouts | None, table: dict) -> dict:
    """Each member's Timeouts after a coordinator step that changed ``group``: the
    members (and pending member ids, R36) whose connection is ``conn`` take the
    ``timeouts`` of the JoinGroup that step handled (None: the step was no
    JoinGroup), members gone are forgotten. ``table``: member id -> Timeouts
    before the step (not changed); returns the new table. Kafka keeps them in
    MemberMetadata (sessionTimeoutMs, rebalanceTimeoutMs)."""
    live = {m.member_id: m.conn for m in group.members}
    live.update((mid, conn) for mid in group.pending)
    out = {mid: t for mid, t in table.items() if mid in live}
    if timeouts:
        out.update((mid, timeouts) for mid, c in live.items() if c == conn)
    return out


def rearm(before: Group, after: Group, armed, refreshed: int) -> tuple:
    """Which timers a coordinator step from ``before`` to ``after`` cancels and
    (re)starts: ``(cancel keys, ((key, timer), ...))``. ``armed``: the keys running
    now; ``refreshed``: the member whose request restarts its session timer
    (``session_refreshed``, R11/R37), or NO_MEMBER_ID. A per-member timer's key is
    the timer; a barrier's key is (timer, generation), so a new barrier runs a new
    deadline while one that stays armed keeps its own. A completed JoinGroup barrier
    restarts every member's session, a static member that did not rejoin (R27)
    included (GroupMetadataManager.completeClassicGroupJoin calls
    rescheduleClassicGroupMemberHeartbeat for each member, GroupMetadataManager.java:7561,
    Kafka 4.4.0)."""
    if after is before:  # a heartbeat, most often: only its member's session restarts
        timer = SessionTimeout(refreshed)
        return (), (((timer, timer),) if timer in armed else ())
    keyed = {}
    for timer, _ in armed_timers(after):
        keyed[timer if _per_member(timer) else (timer, after.generation)] = timer
    cancel = tuple(k for k in armed if k not in keyed)
    completed = after.phase == Phase.COMPLETING_REBALANCE and after.generation != before.generation
    start = tuple((k, t) for k, t in keyed.items()
                  if k not in armed or (type(t) is SessionTimeout and (completed or t.member_id == refreshed)))
    return cancel, start
