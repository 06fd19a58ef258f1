"""The timed exploration mode (issue 43; docs/timed.md): a discrete clock, each of
the coordinator's armed timers carrying its deadline and firing in the window
model/timing.py gives it, as conform's coordinator side and impl/'s asyncio timers
do. Untimed (R21) a timer may fire once the members it waits for are silent, at
any point after: "fires too early", "fires too late" and "never fires" are then
interleavings, not violations. Timed, they are violations:

* **Durations.** Each member's ``Timeouts`` (session.timeout.ms, the rebalance
  timeout) and group.initial.rebalance.delay.ms give each timer its duration
  (model/timing.py ``duration_ms``), in ticks of ``tick_ms`` rounded up. Which
  timers a coordinator step starts, restarts and cancels is timing.py's ``rearm``,
  exactly as impl/ arms its asyncio timers; a timer that fires is spent, and
  started anew if the step leaves it armed (Kafka reschedules a DelayedJoin that
  found nobody rejoined, GroupMetadataManager.completeClassicGroupJoin).
* **Deadlines.** A ``Clock`` in the checker's ``Group.clock``: per armed timer, in
  ``armed_timers``' order, the ticks left. A timer fires when its ticks left reach
  0, whoever it waits for (a live member that let its session lapse is expired),
  and must fire before time passes on.
* **Time passes** (``tick``) only when nothing is urgent: no timer is due, no
  message is in flight (but responses a paused process has yet to read: its pause
  is time passing), and no running member has a step it would take at once: a
  Heartbeat answered with an error (it learns of a rebalance within a heartbeat
  interval), or one it owes before its session lapses (its session timer has one
  tick left; a Heartbeat that only restarts the session is taken then and only
  then), or a ScheduledRebalanceTimeout that passed. A tick counts every armed
  timer down, and the members' ScheduledRebalanceTimeouts (R38).
* **History variables** for the timed properties: the ticks since the group began
  rebalancing with no fault since (``Clock.rebalancing``; ``bounded_rebalance``)
  and, per static client slot, the ticks since the coordinator last heard from its
  process (``Proc.quiet``; ``static_restart_no_rebalance``: a restart within the
  session timeout).

The initial state is the untimed settled group (``System.initial``) with every
armed timer at its full duration. Timed mode does not explore coordinator failover
(R72: a loaded group's timers would need the store's clock).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from rebalance.model import timing as classic_timing
from rebalance.model.consumer_group import coordinator as cg_coordinator, timing as cg_timing
from rebalance.model.coordinator import Group, armed_timers
from rebalance.model.protocol import Phase, PendingMemberTimeout, SessionTimeout
from rebalance.model.timing import DEFAULT_TIMEOUTS, Timeouts

NOT_REBALANCING, DISQUALIFIED = -1, -2  # Clock.rebalancing: Stable or Empty; a fault since the rebalance began
SETTLED = (Phase.STABLE, Phase.EMPTY, Phase.DEAD)


class Timing(NamedTuple):
    """The timed mode's settings: ``tick_ms``, one tick of the discrete clock; the
    members' ``timeouts`` (every member joins with these); ``initial_delay_ms``,
    group.initial.rebalance.delay.ms (KIP-134)."""

    tick_ms: int = 10_000
    timeouts: Timeouts = DEFAULT_TIMEOUTS
    initial_delay_ms: int = 3_000
    heartbeat_interval_ms: int = 5_000  # KIP-848: group.consumer.heartbeat.interval.ms

    def ticks(self, ms: int) -> int:
        """``ms`` in ticks, rounded up, at least one (a deadline is never now)."""
        return max(1, -(-ms // self.tick_ms))

    @property
    def session_ticks(self) -> int:
        return self.ticks(self.timeouts.session_ms)

    @property
    def rebalance_ticks(self) -> int:
        return self.ticks(self.timeouts.rebalance_ms)

    @property
    def heartbeat_ticks(self) -> int:
        return self.ticks(self.heartbeat_interval_ms)

    def duration(self, timer, group) -> int:
        """How many ticks ``timer`` runs, started in ``group`` (model/timing.py ``duration_ms``; a
        consumer group's, model/consumer_group/timing.py's: ``timeouts.session_ms`` is then the
        broker's group.consumer.session.timeout.ms, ``timeouts.rebalance_ms`` every member's
        rebalance timeout)."""
        if type(group) is Group:
            return self.ticks(classic_timing.duration_ms(timer, group, lambda _: self.timeouts,
                                                         self.initial_delay_ms))
        return self.ticks(cg_timing.duration_ms(timer, cg_timing.ConsumerTimeouts(
            self.timeouts.session_ms, self.heartbeat_interval_ms), lambda _: self.timeouts.rebalance_ms))


class Timers(NamedTuple):
    """One protocol's coordinator timers as the clock reads them: ``armed(group)``, the armed
    timers in order, ``[(timer, waiting), ...]``; ``key(timer, group)``, the key ``rearm``
    names the timer by; ``rearm(before, after, armed keys, refreshed)``; ``settled(group)``,
    whether the group is not rebalancing (``Clock.rebalancing``)."""

    armed: Callable
    key: Callable
    rearm: Callable
    settled: Callable


CLASSIC = Timers(armed_timers,
                 lambda t, g: t if type(t) in (SessionTimeout, PendingMemberTimeout) else (t, g.generation),
                 classic_timing.rearm, lambda g: g.phase in SETTLED)
# KIP-848 (model/consumer_group/timing.py): every timer is its own key; no group-wide rebalance is timed
# (``bounded_rebalance`` is the classic protocol's), so the group counts as settled
CONSUMER = Timers(cg_coordinator.armed_timers, lambda t, g: t, cg_timing.rearm, lambda g: True)


class Clock(NamedTuple):
    """``Group.clock`` in timed mode: ``left``, per armed timer of the group in
    ``armed_timers``' order, the ticks before it fires; ``rebalancing``, the ticks
    since the group left Stable or Empty, capped one past the rebalance timeout
    (``NOT_REBALANCING``; ``DISQUALIFIED`` once a fault happened since)."""

    left: tuple = ()
    rebalancing: int = NOT_REBALANCING


def keys(group: Group, timers: Timers = CLASSIC) -> list:
    """The armed timers' keys as model/timing.py ``rearm`` names them: a per-member
    timer by itself, a barrier's by (timer, generation)."""
    return [timers.key(t, group) for t, _ in timers.armed(group)]


def started(timing: Timing, group: Group, timers: Timers = CLASSIC) -> Group:
    """``group`` with every armed timer at its full duration (the initial state)."""
    return group._replace(clock=Clock(tuple(timing.duration(t, group) for t, _ in timers.armed(group)),
                                      NOT_REBALANCING if timers.settled(group) else 0))


def stepped(timing: Timing, before: Group, after: Group, refreshed: int, fired=None,
            timers: Timers = CLASSIC) -> Group:
    """``after`` (the coordinator's step from ``before``) with its clock: the timers
    the step cancels dropped, those it starts or restarts at their full duration
    (``rearm``; ``refreshed``: the member whose request restarts its session, R11),
    the others keeping their ticks left; ``fired``: the timer input that fired, if
    the step is a timer's (it is spent). The rebalance's age starts when the group
    leaves Stable or Empty and ends when it is back."""
    clock = before.clock
    before_keys = keys(before, timers)
    left = dict(zip(before_keys, clock.left))
    if fired is not None:
        for k in before_keys:
            if k == fired or (type(k) is tuple and k[0] == fired):
                del left[k]
    cancel, start = timers.rearm(before, after, tuple(left), refreshed)
    for k in cancel:
        left.pop(k, None)
    for k, t in start:
        left[k] = timing.duration(t, after)
    age = clock.rebalancing
    if timers.settled(after):
        age = NOT_REBALANCING
    elif age == NOT_REBALANCING:
        age = 0
    return after._replace(clock=Clock(tuple(left[k] for k in keys(after, timers)), age))


def due(group: Group, timers: Timers = CLASSIC) -> list:
    """The armed timers whose deadline has come (0 ticks left), in ``armed_timers``' order."""
    return [t for (t, _), left in zip(timers.armed(group), group.clock.left) if left == 0]


def session_left(group: Group, mid: int, timers: Timers = CLASSIC) -> int | None:
    """Ticks left on member ``mid``'s session timer, None if it is not armed."""
    for (t, _), left in zip(timers.armed(group), group.clock.left):
        if type(t) is SessionTimeout and t.member_id == mid:
            return left
    return None


def ticked(timing: Timing, group: Group) -> Group:
    """``group`` one tick later: every armed timer one tick nearer (none is due: time
    does not pass a deadline), the rebalance one tick older (capped)."""
    clock = group.clock
    age = clock.rebalancing
    if age >= 0:
        age = min(age + 1, timing.rebalance_ticks + 1)
    return group._replace(clock=Clock(tuple(x - 1 for x in clock.left), age))


def faulted(group: Group) -> Group:
    """``group`` after a fault: a rebalance under way is no longer judged by
    ``bounded_rebalance`` (a fault may rightly prolong it)."""
    clock = group.clock
    if clock.rebalancing < 0:
        return group
    return group._replace(clock=clock._replace(rebalancing=DISQUALIFIED))

