"""One simulated run: the model's coordinator and member handlers driven by a
virtual clock, through a scripted situation, with the costs a user of the group
pays measured.

Where the checker explores every interleaving untimed (R21), a simulation runs
one schedule with time: every message takes ``latency_ms``, members heartbeat
every ``heartbeat_ms``, the coordinator's timers run the durations of
model/timing.py (the same code as impl/'s asyncio timers), a member's
ScheduledRebalanceTimeout counts down in the model's ticks (R38), one every
``clock_ms`` (``Timing.group_ticks`` maps deferred's scheduled.rebalance.max.delay.ms,
``scheduled_delay_ms``, to them; 0: no delay, Connect's maxDelay == 0). The clock is in
ms; results are in ticks of ``tick_ms`` (``Timing.ticks``). Events at the same
time run in the order they were scheduled, so a run is a function of its inputs.

A script is ``((time_ms, action, slot), ...)`` relative to the moment the group
first settles (quiet, below, after the initial members start within one
heartbeat interval):
``start`` a process on the slot (static members keep ``instance_id(slot)``),
``stop`` it gracefully (R20: revoke, LeaveGroup unless static) or ``crash`` it
(nothing sent; requests in flight lost; its partitions unavailable until
reassigned), ``pause`` it (a zombie: a long GC pause, a stalled VM; it sends
nothing) or ``resume`` it (it commits what it still owns at once, R41, then
heartbeats again), or have an admin client ``remove`` the slot's static member by
its group.instance.id (R71: a batch LeaveGroup on a connection of the admin's own,
``latency_ms`` later; nothing for a dynamic slot).

An ``observer`` (checker/conform/emit.py writes traces with one) sees what a
broker sees: each process's connection opened and, at a crash, closed; each
request as the coordinator receives it; each response as it is produced. With
an observer, a connection is muted while its request is in flight, as Kafka's
SocketServer does (its next request reaches the coordinator once the response is
produced), and a reply no request waits for is dropped, as impl/ drops it.

A run goes to a verdict. It ends at the first event after its last scripted
action at which the group is *quiet* (``Simulation.quiet``): balanced as
``properties.imbalance`` defines it (Stable, every partition owned by exactly
one running process, loads within one), every running process a Stable member
of the current generation, the coordinator's members exactly those processes
(no departed member left for its session timeout, no member id pending), and no
ScheduledRebalanceTimeout counting down or overdue (R32, R38). From a quiet
state only heartbeats happen until the next scripted action. A run not quiet
``horizon_ms`` after its last scripted action is cut there and *censored*: its
figures are lower bounds and it has no ticks to balance; it is not an
unbalanced run, only one whose verdict the horizon did not wait for.

Measured from the script's start (``Metrics``): ``rebalances`` (generations
the coordinator completed), ``moved`` (partitions assigned to a different
process slot than the one that last owned them), ``unavailable_ticks``
(partition-ticks during which no running process owned the partition) and
``ticks_to_balance`` (until the group was last balanced, the state it stayed in
to the end of the run; None if censored).
"""
from __future__ import annotations

import heapq
import random
from typing import NamedTuple

from rebalance.model import coordinator, member
from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import EMPTY_GROUP
from rebalance.model.member import NEW_CONSUMER, MemberPhase
from rebalance.model.protocol import (
    NO_INSTANCE_ID, NO_MEMBER_ID, NOT_SCHEDULED, RESPONSE_OF, Callback, CommitDue, HeartbeatDue, Leave, LeaveGroup,
    Receive,
    ScheduledRebalanceDue, Send, Start, Tick, connection, epoch_of, instance_id, partitions_of, slot_of, union,
)
from rebalance.model.timing import DEFAULT_TIMEOUTS, Timeouts, duration_ms, rearm

from .properties import imbalance
from .system import ADMIN_EPOCH


class Timing(NamedTuple):
    """The clock's settings, ms. Defaults: the Java consumer's and broker's (3.0+),
    scheduled.rebalance.max.delay.ms shortened from Connect's 300 s to 60 s (0: no
    delay); ``clock_ms``: the model's tick, how often a ScheduledRebalanceTimeout
    counts down (R38)."""

    tick_ms: int = 100
    latency_ms: int = 5
    session_ms: int = DEFAULT_TIMEOUTS.session_ms
    rebalance_ms: int = DEFAULT_TIMEOUTS.rebalance_ms
    heartbeat_ms: int = 3_000
    initial_delay_ms: int = 3_000
    scheduled_delay_ms: int = 60_000
    clock_ms: int = 30_000
    commit_ms: int = 0  # how often a process commits what it owns (0: never)

    def ticks(self, ms: float) -> int:
        return round(ms / self.tick_ms)

    def group_ticks(self) -> dict:
        """The GroupConfig fields for ``scheduled_delay_ms`` in ticks of ``clock_ms``
        (rounded up): ``scheduled_delay_ticks`` and, for a delay of 0, Connect's
        ExponentialBackoff(0, ...) as ``revoking_backoff_ticks`` (0,): revoke at once."""
        if not self.scheduled_delay_ms:
            return {"scheduled_delay_ticks": 0, "revoking_backoff_ticks": (0,)}
        return {"scheduled_delay_ticks": -(-self.scheduled_delay_ms // self.clock_ms)}


ACTIONS = ("start", "stop", "crash", "pause", "resume", "remove")
DEFAULT_HORIZON_MS = 3_600_000  # an hour of simulated time after the last scripted action


class Metrics(NamedTuple):
    """What one run cost, from the script's start (see the module docstring).
    ``censored``: the run was cut at its horizon before it was quiet; its counts
    are then lower bounds and ``ticks_to_balance`` is None. ``events``: events
    processed, warm-up included."""

    rebalances: int
    moved: int
    unavailable_ticks: int
    ticks_to_balance: int | None
    censored: bool
    events: int


class SimulationError(RuntimeError):
    """The group was not quiet before the script could start, or a run exceeded its event budget."""


class Simulation:
    """One run. ``cfg``: the group's configuration; ``members``: slots started
    within the first heartbeat interval (at times drawn from ``rng``);
    ``static``: whether processes are static members (KIP-345). ``actions_left``
    counts the scheduled ``start`` / ``stop`` / ``crash`` actions not yet run."""

    MAX_EVENTS = 5_000_000

    def __init__(self, cfg: GroupConfig, members: int, static: bool, timing: Timing = Timing(),
                 rng: random.Random | None = None, observer=None):
        self.cfg, self.static, self.t = cfg, static, timing
        self.timeouts = Timeouts(timing.session_ms, timing.rebalance_ms)
        self.group = EMPTY_GROUP
        self.now = 0
        self.queue: list = []
        self.seq = 0
        self.events = 0
        self.timers: dict = {}        # key -> token of the live timer
        self.consumers: dict = {}     # slot -> Consumer of its running process
        self.epochs: dict = {}        # slot -> epoch of its latest process
        self.closed: set = set()      # connections cut by a crash
        self.scheduled: set = set()   # (slot, epoch) with a Tick pending
        self.clock_ms = timing.clock_ms  # the model's tick
        self.overdue: set = set()     # (slot, epoch) whose ScheduledRebalanceDue passed while busy
        self.last_owner: dict = {}    # partition -> slot that last had it assigned
        self.moved = 0
        self.unavailable_ms = 0
        self._unavailable = cfg.num_partitions
        self._since = 0
        self.balanced_since: int | None = None
        self.actions_left = 0
        self.observer = observer
        self.paused: set = set()      # slots whose process is a zombie (heartbeats stopped)
        self.in_flight: dict = {}     # connection -> the response class it waits for (observer only)
        self.backlog: dict = {}       # connection -> requests held behind the one in flight (observer only)
        rng = rng or random.Random(0)
        for slot in range(members):  # started within one heartbeat interval, so their heartbeats interleave
            self.act_at(rng.randrange(timing.heartbeat_ms), "start", slot)

    # --- the clock ----------------------------------------------------------------
    def _at(self, time: int, kind: str, *args) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (time, self.seq, kind, args))

    def act_at(self, time: int, action: str, slot: int) -> None:
        """Schedule ``action`` ("start" | "stop" | "crash") of ``slot`` at ``time`` ms."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
        self.actions_left += 1
        self._at(time, "act", action, slot)

    def _act(self, action: str, slot: int) -> None:
        self.actions_left -= 1
        getattr(self, "_" + action)(slot)

    def run_until(self, end: int, stop=None) -> None:
        """Process events up to time ``end`` (or until ``stop()`` is true after one)."""
        while self.queue and self.queue[0][0] <= end:
            time, _, kind, args = heapq.heappop(self.queue)
            self._advance(time)
            getattr(self, "_" + kind)(*args)
            self.events += 1
            if self.events > self.MAX_EVENTS:
                raise SimulationError(f"more than {self.MAX_EVENTS:,} events by {self.now} ms")
            if stop is not None and stop():
                return
        self._advance(max(self.now, end))

    def _advance(self, time: int) -> None:
        self.unavailable_ms += self._unavailable * (time - self._since)
        self._since = self.now = time

    # --- processes ------------------------------------------------------------------
    def _start(self, slot: int) -> None:
        if slot in self.consumers:
            return
        epoch = self.epochs[slot] = self.epochs.get(slot, 0) + 1
        self.consumers[slot] = NEW_CONSUMER
        self.paused.discard(slot)
        if self.observer is not None:
            self.observer.open(self.now, connection(slot, epoch))
        if self.t.commit_ms:
            self._at(self.now + self.t.commit_ms, "commit", slot, epoch)
        self._member(slot, Start(instance_id(slot) if self.static else NO_INSTANCE_ID))
        self._at(self.now + self.t.heartbeat_ms, "beat", slot, epoch)
        self._ownership_changed()  # a process owning nothing yet: loads may now differ by more than one

    def _stop(self, slot: int) -> None:
        if slot in self.consumers:
            self._member(slot, Leave())
            del self.consumers[slot]
            self._ownership_changed()

    def _crash(self, slot: int) -> None:
        if slot in self.consumers:
            del self.consumers[slot]
            self.closed.add(connection(slot, self.epochs[slot]))
            if self.observer is not None:
                self.observer.close(self.now, connection(slot, self.epochs[slot]))
            self._ownership_changed()

    def _pause(self, slot: int) -> None:
        if slot in self.consumers:
            self.paused.add(slot)

    def _resume(self, slot: int) -> None:
        if slot in self.paused:
            self.paused.discard(slot)
            self._member(slot, CommitDue())

    def _remove(self, slot: int) -> None:
        """R71: an admin client's LeaveGroup naming the slot's group.instance.id."""
        self._at(self.now + self.t.latency_ms, "admin", slot, LeaveGroup(((NO_MEMBER_ID, instance_id(slot)),)))

    def _admin(self, slot: int, request) -> None:
        self._coordinator(Receive(connection(slot, ADMIN_EPOCH), request), NO_MEMBER_ID)

    def _commit(self, slot: int, epoch: int) -> None:
        if slot in self.consumers and self.epochs[slot] == epoch and slot not in self.paused:
            self._member(slot, CommitDue())
            self._at(self.now + self.t.commit_ms, "commit", slot, epoch)

    def _beat(self, slot: int, epoch: int) -> None:
        if slot in self.consumers and self.epochs[slot] == epoch:
            if (slot, epoch) in self.overdue:
                self._due(slot, epoch)
            if slot not in self.paused:
                self._member(slot, HeartbeatDue())
            self._at(self.now + self.t.heartbeat_ms, "beat", slot, epoch)

    def _tick(self, slot: int, epoch: int) -> None:
        """One tick of the model's clock for a member whose ScheduledRebalanceTimeout
        counts down (R38); at 0 it is due."""
        key = (slot, epoch)
        self.scheduled.discard(key)
        if slot in self.consumers and self.epochs[slot] == epoch and self._member(slot, Tick()).scheduled == 0:
            self._due(slot, epoch)

    def _due(self, slot: int, epoch: int) -> None:
        """The member's ScheduledRebalanceTimeout passed. A member busy in a
        rebalance or a heartbeat refuses it (R32); it is offered again at each of
        its heartbeats until taken (the consumer's poll loop)."""
        key = (slot, epoch)
        c = self.consumers.get(slot)
        if c is None or self.epochs[slot] != epoch or c.scheduled != 0:
            return
        self.overdue.add(key)
        if self._member(slot, ScheduledRebalanceDue()) is not c:
            self.overdue.discard(key)

    def _member(self, slot: int, event):
        """One member step and its outputs; returns the new Consumer."""
        before = self.consumers[slot]
        c, outputs = member.handle(self.cfg, before, event)
        self.consumers[slot] = c
        epoch = self.epochs[slot]
        changed = c.owned != before.owned
        for out in outputs:
            if type(out) is Send:
                self._at(self.now + self.t.latency_ms, "deliver", connection(slot, epoch), out.request)
            elif type(out) is Callback and out.kind == "assigned":
                for p in partitions_of(out.partitions):
                    previous = self.last_owner.get(p)
                    if previous is not None and previous != slot:
                        self.moved += 1
                    self.last_owner[p] = slot
        if c.scheduled > 0 and (slot, epoch) not in self.scheduled:
            self.scheduled.add((slot, epoch))
            self._at(self.now + self.clock_ms, "tick", slot, epoch)
        if changed:
            self._ownership_changed()
        return c

    # --- the coordinator --------------------------------------------------------------
    def _deliver(self, conn: int, request) -> None:
        if conn in self.closed:
            return
        if self.observer is not None:
            if self.in_flight.get(conn) is not None:  # muted: behind the request in flight
                self.backlog.setdefault(conn, []).append(request)
                return
            self.in_flight[conn] = RESPONSE_OF[type(request)]
            self.observer.request(self.now, conn, request)
        self._coordinator(Receive(conn, request), coordinator.session_refreshed(self.cfg, request))

    def _release(self, conn: int) -> None:
        """The next request held behind a produced response reaches the coordinator."""
        if self.backlog.get(conn) and self.in_flight.get(conn) is None:
            self._deliver(conn, self.backlog[conn].pop(0))

    def _reply(self, conn: int, response) -> None:
        slot = slot_of(conn)
        if slot in self.consumers and self.epochs[slot] == epoch_of(conn):
            self._member(slot, response)

    def _timer(self, key, token: int, timer) -> None:
        if self.timers.get(key) == token:
            del self.timers[key]
            self._coordinator(timer, -1)

    def _coordinator(self, event, refreshed: int) -> None:
        before = self.group
        self.group, replies = coordinator.handle(self.cfg, before, event)
        for reply in replies:
            if self.observer is not None:
                if reply.conn in self.closed or self.in_flight.get(reply.conn) is not type(reply.response):
                    continue  # no request waits for it: impl/ drops it
                self.in_flight[reply.conn] = None
                self.observer.response(self.now, reply.conn, reply.response, before, self.group)
                self._at(self.now, "release", reply.conn)
            self._at(self.now + self.t.latency_ms, "reply", reply.conn, reply.response)
        cancel, start = rearm(before, self.group, self.timers, refreshed)
        for key in cancel:
            del self.timers[key]
        for key, timer in start:
            self.seq += 1
            self.timers[key] = self.seq
            due = self.now + duration_ms(timer, self.group, self._timeouts_of, self.t.initial_delay_ms)
            self._at(due, "timer", key, self.seq, timer)
        if self.group is not before and self.group.phase != before.phase:
            self._ownership_changed()

    def _timeouts_of(self, member_id: int) -> Timeouts:
        return self.timeouts

    # --- the script ---------------------------------------------------------------------
    def begin(self) -> None:
        """The script starts now: the costs so far (the warm-up's) are forgotten."""
        self.moved, self.unavailable_ms = 0, 0

    def metrics(self, t0: int, rebalances: int, censored: bool) -> Metrics:
        """The run's Metrics, the script having started at ``t0`` ms."""
        return Metrics(rebalances=rebalances, moved=self.moved, unavailable_ticks=self.t.ticks(self.unavailable_ms),
                       ticks_to_balance=None if censored else self.t.ticks(max(self.balanced_since - t0, 0)),
                       censored=censored, events=self.events)

    # --- what it costs ------------------------------------------------------------------
    def _ownership_changed(self) -> None:
        live = list(self.consumers.values())
        self._unavailable = self.cfg.num_partitions - union(c.owned for c in live).bit_count()
        if imbalance(self.cfg, self.group.phase, live) is None:
            if self.balanced_since is None:
                self.balanced_since = self.now
        else:
            self.balanced_since = None

    @property
    def balanced(self) -> bool:
        return self.balanced_since is not None

    def quiet(self) -> bool:
        """Whether the run has reached its verdict: no scheduled action left, the
        group balanced (``properties.imbalance``), every running process a Stable
        member (MemberPhase.STABLE) of the coordinator's generation with no
        ScheduledRebalanceTimeout counting down or due (R38; an overdue one has
        ``scheduled == 0``), and the coordinator's members exactly those
        processes, none of them held at a barrier, and no member id pending (R36).
        Nothing but heartbeats can then happen: no request other than a
        Heartbeat is in flight (each JoinGroup / SyncGroup leaves its member
        JOINING / SYNCING until answered; a LeaveGroup in flight leaves its member
        at the coordinator), and no timer but the running members' session
        timeouts is armed."""
        if self.actions_left or not self.balanced:
            return False
        group = self.group
        if group.pending or len(group.members) != len(self.consumers):
            return False
        if any(m.awaiting_join or m.awaiting_sync or m.pending_sync for m in group.members):
            return False
        ids = {m.member_id for m in group.members}
        return all(c.phase == MemberPhase.STABLE and c.generation == group.generation and c.member_id in ids
                   and c.scheduled == NOT_SCHEDULED for c in self.consumers.values())


def simulate(cfg: GroupConfig, members: int, static: bool, script, timing: Timing = Timing(),
             rng: random.Random | None = None, horizon_ms: int = DEFAULT_HORIZON_MS,
             warmup_ms: int = 600_000) -> Metrics:
    """Run ``script`` (``((time_ms, "start" | "stop" | "crash", slot), ...)``, times
    from the moment the initial ``members`` have formed a quiet group) to its
    verdict and measure it. The run ends at the first moment after the last
    action that the group is quiet (``Simulation.quiet``), or is cut and
    censored ``horizon_ms`` (ms of simulated time, positive) after the last
    action. ``rng``: where the initial processes' start times come from.
    Raises SimulationError if the group is not quiet within ``warmup_ms``
    first, ValueError for a bad horizon or action."""
    if horizon_ms <= 0:
        raise ValueError(f"horizon_ms must be positive, got {horizon_ms}")
    return run(Simulation(cfg, members, static, timing, rng), script, horizon_ms, warmup_ms)


def run(sim: Simulation, script, horizon_ms: int, warmup_ms: int):
    """Settle ``sim``'s initial group (SimulationError if it is not quiet within
    ``warmup_ms``), play ``script`` from that moment and run to the verdict or
    ``horizon_ms`` past the last action: ``sim.metrics(...)`` (``simulate``)."""
    sim.run_until(warmup_ms, stop=sim.quiet)
    if not sim.quiet():
        raise SimulationError(f"{len(sim.consumers)} members did not form a quiet group within {warmup_ms} ms")
    t0 = sim.now
    generation = sim.group.generation
    sim.begin()
    for time, action, slot in script:
        sim.act_at(t0 + time, action, slot)
    last = max((time for time, _, _ in script), default=0)
    sim.run_until(t0 + last + horizon_ms, stop=sim.quiet)
    return sim.metrics(t0, sim.group.generation - generation, not sim.quiet())
