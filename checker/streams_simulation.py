"""Kafka Streams rebalancing with restore times, simulated (issue 16 item 5): the
seed 001 situations run over the ways Streams can move a stateful task, each run
the model's own coordinator and member handlers on checker/simulation.py's
virtual clock, with the state-store restores the checker leaves untimed (R55).

**Variants** (``VARIANTS``, one entry each: the protocol and assignor the run's
GroupConfig takes):

* ``eager``: Streams before KIP-429, stop the world. Every member revokes all
  its tasks before rejoining (R14); a task assigned to a process that did not
  have its state restores from scratch before it is processed (the seed's
  opening: "Replay the assigned tasks state ... Once all replay jobs finish,
  worker transits to running mode"). The ``sticky`` assignor, as Streams'
  StickyTaskAssignor was.
* ``cooperative``: KIP-429 without learners. A moving task is revoked in one
  round and assigned in the next (R23); its new owner restores it after it gets
  it.
* ``learners``: the seed's learner tasks (the ``streams`` assignor, R45-R55,
  version 2.0, conservative rejoin). A learner restores while the old owner
  keeps processing; once ready (``LearnerReady``, R55) it rejoins and the task
  moves to it.
* ``learners-eager``: the same with the seed's "Eager Rebalance" (version 3.0,
  R55's eager rejoin mode): a member rejoins as each of its learners is ready.
* ``high-availability``: KIP-441's HighAvailabilityTaskAssignor (R57-R60). A
  task moves only to a caught-up member; the balanced owner gets a warmup (at
  most max.warmup.replicas = 2 per assignment), which rides as a learner, so
  the same LearnerReady makes it ready, but its member does not rejoin: every
  assignment made while a task is kept off its balanced owner carries the
  probing rebalance (``scheduled``, R60), a ScheduledRebalanceTimeout that
  checker/simulation.py counts down and delivers as ScheduledRebalanceDue.
  probing.rebalance.interval.ms is ``DEFAULT_PROBING_MS`` = 60,000 ms (2 model
  ticks of 30 s), not Kafka's 600,000: a host swap needs about twenty probing
  rounds, which at ten minutes each would outlast the runs' horizon.

**Restore times.** Each time a process starts restoring a stateful task (as an
active task it has no state for, or as a learner) its restore takes ms drawn
uniformly from [``restore_ms`` / 2, 3 ``restore_ms`` / 2] by the run's own
``random.Random``: the same run and seed give the same draws. A process keeps
the state it restored for as long as it runs (its state directory); a restore
abandoned (the task neither active nor learned there any more) starts again from
scratch. The initial group's stores are restored before the script starts.

**Situations** (``SITUATIONS``; times in ms from the moment the group settled;
slots ``0..members-1`` the initial processes, ``members, ...`` new ones):

* ``scale_up``: a quarter more processes (at least one) start within 2 s
  (seed 001, "Scale-up");
* ``scale_down``: a quarter of the processes (at least one) are *retired* within
  2 s: the scale-down tool marks them leaving soon (R53) under ``learners``, a
  graceful stop (R20) otherwise (seed 001, scale down);
* ``host_swap``: as many new processes as there are start within 2 s, and all the
  old ones are retired 10-20 s later (seed 001, "Online Host Swapping");
* ``leader_crash``: a scale-up, and 5-20 s later the leader's process crashes and
  stays down (seed 001, "Leader crash during scaling").

**Metrics** (``StreamsMetrics``, from the script's start, ticks of ``tick_ms``):
``rebalances`` (generations completed), ``moved`` (active tasks given to another
process), ``unavailable_ticks`` (task-ticks during which a stateful task had no
running active process that had finished restoring it), ``double_ticks``
(task-ticks during which one process learned a task another processed) and
``ticks_to_balance`` (until the group was last *settled*: Stable, loads within
one, every task processed by a restored active, nobody learning or leaving).
"""
from __future__ import annotations

import random
from typing import NamedTuple

from rebalance.model import member
from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.member import MemberPhase
from rebalance.model.protocol import LearnerReady, ScaleDown, partitions_of, union

from .campaign import Measure, check_coverage, validate_grid
from .properties import imbalance
from .simulation import DEFAULT_HORIZON_MS, Simulation, Timing, run
from .situations import S, SITUATIONS as CONSUMER_SITUATIONS


class Variant(NamedTuple):
    """How a variant moves tasks (``doc``, shown by ``rebalance simulate --help``):
    its ``protocol`` and ``assignor`` and further
    GroupConfig ``options`` ((field, value), ...; model/config.py). Under the
    ``streams`` protocol the ``retire`` action is the scale-down tool (leaving
    soon, R53), under the others a graceful stop (R20)."""

    protocol: str
    assignor: str
    doc: str
    options: tuple = ()


VARIANTS = {
    "eager": Variant("eager", "sticky", "stop the world: everything revoked, moved tasks restore from scratch"),
    "cooperative": Variant("cooperative", "cooperative-sticky",
                           "KIP-429 without learners: two rounds, the new owner restores after it gets the task"),
    "learners": Variant("streams", "streams",
                        "seed 001: the learner restores while the old owner processes, then the task moves"),
    "learners-eager": Variant("streams", "streams", "seed 001's Eager Rebalance (version 3.0): a member rejoins as "
                              "each learner is ready, not once all are", (("rejoin_mode", "eager"),)),
    "high-availability": Variant("streams", "high-availability", "KIP-441: warmups restore while the owner "
                                 "processes; a probing rebalance every probing.rebalance.interval.ms moves the "
                                 "caught-up ones (max.warmup.replicas 2)"),
}


def _host_swap(rng: random.Random, members: int) -> list:
    return ([(rng.randint(0, 2 * S), "start", members + i) for i in range(members)]
            + [(rng.randint(10 * S, 20 * S), "retire", slot) for slot in range(members)])


def _leader_crash(rng: random.Random, members: int) -> list:
    return CONSUMER_SITUATIONS["scale_up"](rng, members) + [(rng.randint(5 * S, 20 * S), "crash_leader", -1)]


SITUATIONS = {
    "scale_up": CONSUMER_SITUATIONS["scale_up"],
    "scale_down": lambda rng, members: [(t, "retire", slot)
                                        for t, _, slot in CONSUMER_SITUATIONS["scale_down"](rng, members)],
    "host_swap": _host_swap,
    "leader_crash": _leader_crash,
}
DEFAULT_RESTORE_MS = 60_000
DEFAULT_SCALE_DOWN_MS = 300_000
DEFAULT_PROBING_MS = 60_000  # probing.rebalance.interval.ms: Kafka's 600,000 would outlast the runs' horizon


def script(name: str, rng: random.Random, members: int) -> tuple:
    """The script of Streams situation ``name``, sorted by time. KeyError for an unknown name."""
    return tuple(sorted(SITUATIONS[name](rng, members)))


def config(variant: str, tasks: int, timing: Timing = Timing(), scale_down_ms: int = DEFAULT_SCALE_DOWN_MS,
           mutations: frozenset = frozenset()) -> GroupConfig:
    """The GroupConfig of ``variant`` with ``tasks`` stateful tasks (no standby
    replicas); the scale-down timeout (R54) and, for KIP-441's assignor, the probing
    rebalance interval (R60, ``DEFAULT_PROBING_MS``, probing.rebalance.interval.ms) in
    the model's ticks of ``timing.clock_ms``, rounded up. ConfigError for an unknown
    variant (or mutation)."""
    if variant not in VARIANTS:
        raise ConfigError(f"unknown variant {variant!r} (expected one of {', '.join(VARIANTS)})")
    v = VARIANTS[variant]
    probing = {"probing_ticks": -(-DEFAULT_PROBING_MS // timing.clock_ms)} if v.assignor == "high-availability" else {}
    return GroupConfig(topics=(("t", tasks),), protocol=v.protocol, assignor=v.assignor, mutations=mutations,
                       scale_down_ticks=max(1, -(-scale_down_ms // timing.clock_ms)), **probing, **dict(v.options))


class StreamsMetrics(NamedTuple):
    """What one Streams run cost (module docstring); ``censored`` as in
    checker/simulation.Metrics."""

    rebalances: int
    moved: int
    unavailable_ticks: int
    double_ticks: int
    ticks_to_balance: int | None
    censored: bool
    events: int


class StreamsSimulation(Simulation):
    """A Simulation whose processes restore state stores (module docstring).
    ``restore_rng`` draws the restore times; ``restore_ms``: their mean, ms (> 0)."""

    def __init__(self, cfg: GroupConfig, members: int, timing: Timing, rng: random.Random,
                 restore_ms: int, restore_rng: random.Random):
        self.restore_ms, self.restore_rng = restore_ms, restore_rng
        self.stores: dict = {}      # slot -> {task: ms its restore finishes (finished if <= now)}
        self.warm_start = True      # the initial group's stores are restored already
        self.double_ms = 0
        self._double = 0
        self.stateful = cfg.all_partitions & ~cfg.stateless
        super().__init__(cfg, members, False, timing, rng)

    # --- the script's actions -------------------------------------------------------
    def act_at(self, time: int, action: str, slot: int) -> None:
        if action in ("retire", "crash_leader"):
            self.actions_left += 1
            self._at(time, "act", action, slot)
        else:
            super().act_at(time, action, slot)

    def _retire(self, slot: int) -> None:
        """The scale-down tool (R53) under a Streams protocol; a graceful stop otherwise."""
        if not self.cfg.streams:
            self._stop(slot)
        elif slot in self.consumers:
            self._scale_down(slot, self.epochs[slot])

    def _scale_down(self, slot: int, epoch: int) -> None:
        """ScaleDown reaches a member between rounds (as the checker's step, R53); else it is offered again."""
        c = self.consumers.get(slot)
        if c is None or self.epochs[slot] != epoch or c.streams.leaving:
            return
        if c.phase == MemberPhase.STABLE and not c.heartbeat_inflight:
            self._member(slot, ScaleDown())
        else:
            self._at(self.now + self.t.tick_ms, "scale_down", slot, epoch)

    def _crash_leader(self, _slot: int) -> None:
        leader = next((s for s, c in sorted(self.consumers.items()) if c.leader), None)
        if leader is not None:
            self._crash(leader)

    def _start(self, slot: int) -> None:
        if slot not in self.consumers:
            self.stores[slot] = {}  # a new process: a new host, no state
        super()._start(slot)

    # --- members and their restores --------------------------------------------------
    def _member(self, slot: int, event):
        before = self.consumers[slot]
        c = super()._member(slot, event)
        if c.owned != before.owned or c.streams != before.streams:
            self._ownership_changed()
        epoch = self.epochs[slot]
        if c.streams and member.counting(c) and (slot, epoch) not in self.scheduled:  # R54's countdown
            self.scheduled.add((slot, epoch))
            self._at(self.now + self.clock_ms, "tick", slot, epoch)
        if self.cfg.streams and member.shutting_down(self.cfg, c, True):
            self._at(self.now, "shutdown", slot, epoch)
        return c

    def _shutdown(self, slot: int, epoch: int) -> None:
        """R54: a leaving member shuts down (LeaveGroup, its process ends)."""
        c = self.consumers.get(slot)
        if c is not None and self.epochs[slot] == epoch and member.shutting_down(self.cfg, c, True):
            self._stop(slot)

    def _restored(self, slot: int, epoch: int, task: int, done: int) -> None:
        """A restore finished: a learner's readiness reaches its member between rounds
        (R55, as the checker's ``ready`` step); else it is offered again a tick later."""
        if slot not in self.consumers or self.epochs[slot] != epoch or self.stores[slot].get(task) != done:
            return
        self._ownership_changed()
        c = self.consumers[slot]
        if c.streams and c.streams.learning & ~c.streams.ready & (1 << task):
            if c.phase == MemberPhase.STABLE and not c.heartbeat_inflight:
                self._member(slot, LearnerReady(task))
            else:
                self._at(self.now + self.t.tick_ms, "restored", slot, epoch, task, done)

    def _restoring(self, slot: int, c) -> int:
        """Start the restores ``slot``'s process needs and forget abandoned ones; the
        bitmask of the stateful tasks it runs restored."""
        stores = self.stores.setdefault(slot, {})
        wanted = (c.owned | (c.streams.learning if c.streams else 0)) & self.stateful
        for task in [t for t, done in stores.items() if done > self.now and not wanted >> t & 1]:
            del stores[task]  # abandoned: from scratch next time
        for task in partitions_of(wanted):
            if task not in stores:
                if self.warm_start:
                    stores[task] = self.now
                else:
                    draw = self.restore_rng.randint(self.restore_ms // 2, self.restore_ms * 3 // 2)
                    done = stores[task] = self.now + max(1, draw)
                    self._at(done, "restored", slot, self.epochs[slot], task, done)
        return union(1 << t for t, done in stores.items() if done <= self.now) & c.owned

    def _ownership_changed(self) -> None:
        live = self.consumers
        processed = union(self._restoring(s, c) for s, c in live.items())
        learned = {s: c.streams.learning if c.streams else 0 for s, c in live.items()}
        self._unavailable = (self.stateful & ~processed).bit_count()
        self._double = sum((learned[s] & union(c.owned for o, c in live.items() if o != s)).bit_count()
                           for s in live)
        settled = (imbalance(self.cfg, self.group.phase, list(live.values())) is None and not self._unavailable
                   and not any(learned.values()) and not any(c.streams and c.streams.leaving for c in live.values()))
        if not settled:
            self.balanced_since = None
        elif self.balanced_since is None:
            self.balanced_since = self.now

    def _advance(self, time: int) -> None:
        self.double_ms += self._double * (time - self._since)
        super()._advance(time)

    # --- the verdict -----------------------------------------------------------------
    def begin(self) -> None:
        super().begin()
        self.warm_start, self.double_ms = False, 0

    def metrics(self, t0: int, rebalances: int, censored: bool) -> StreamsMetrics:
        m = super().metrics(t0, rebalances, censored)
        return StreamsMetrics(m.rebalances, m.moved, m.unavailable_ticks, self.t.ticks(self.double_ms),
                              m.ticks_to_balance, m.censored, m.events)


def simulate(variant: str, members: int, tasks: int, script, rng: random.Random, timing: Timing = Timing(),
             restore_ms: int = DEFAULT_RESTORE_MS, horizon_ms: int = DEFAULT_HORIZON_MS,
             scale_down_ms: int = DEFAULT_SCALE_DOWN_MS, mutations: frozenset = frozenset()) -> StreamsMetrics:
    """One Streams run of ``variant`` (VARIANTS) with ``members`` processes and
    ``tasks`` stateful tasks through ``script`` (``((time_ms, action, slot), ...)``,
    actions ``start``, ``stop``, ``crash``, ``retire``, ``crash_leader``), restores
    of mean ``restore_ms`` ms drawn from ``rng`` (which also staggers the initial
    starts). ConfigError for an unknown variant or a restore time <= 0;
    SimulationError as checker/simulation.run."""
    if restore_ms <= 0:
        raise ConfigError(f"the restore time must be positive (ms), got {restore_ms}")
    cfg = config(variant, tasks, timing, scale_down_ms, mutations)
    restore_rng = random.Random(rng.random())
    sim = StreamsSimulation(cfg, members, timing, rng, restore_ms, restore_rng)
    return run(sim, script, horizon_ms, warmup_ms=600_000)



# --- campaigns (rebalance simulate --streams) ---------------------------------------

DEFAULT_SIZES = ((3, 6), (10, 40))
MAX_SIZE = (100, 400)
ROW_FIELDS = ("run", "situation", "variant", "members", "tasks", "seed") + StreamsMetrics._fields


def run_one(spec: tuple, timing: Timing = Timing(), horizon_ms: int = DEFAULT_HORIZON_MS,
            restore_ms: int = DEFAULT_RESTORE_MS, scale_down_ms: int = DEFAULT_SCALE_DOWN_MS,
            mutations: frozenset = frozenset()) -> tuple:
    """One run of a StreamsCampaign: the spec ``(run, situation, variant, members,
    tasks, seed)`` followed by its StreamsMetrics, in ROW_FIELDS order. Its
    randomness (the script, the initial starts, the restore times) comes from
    ``random.Random(f"{seed}:{run}")``."""
    run_index, situation, variant, members, tasks, seed = spec
    rng = random.Random(f"{seed}:{run_index}")
    m = simulate(variant, members, tasks, script(situation, rng, members), rng, timing, restore_ms, horizon_ms,
                 scale_down_ms, mutations)
    return (*spec, *m)


def _mutations_of(variant: str, mutations: frozenset) -> frozenset:
    """The mutations a variant's runs take: the Streams assignor's (every mutation
    given) for a ``streams`` protocol variant, none for the consumer protocols'
    (an unknown variant keeps them, for config to name it)."""
    v = VARIANTS.get(variant)
    return mutations if v is None or v.protocol == "streams" else frozenset()


class StreamsCampaign(NamedTuple):
    """Streams runs (``rebalance simulate --streams``): ``runs`` runs seeded by
    ``seed`` over situations × sizes ((members, stateful tasks), ...) × variants,
    run ``i`` taking cell ``i mod len(grid)``; ``restore_ms``: the mean restore
    time (ms, > 0); ``scale_down_ms``: the scale-down timeout (R54); ``mutations``:
    model mutations (model/mutations.py) every run takes. The interface
    checker/campaign.run_campaign reads is checker/campaign.Campaign's."""

    runs: int
    seed: int
    situations: tuple = tuple(SITUATIONS)
    sizes: tuple = DEFAULT_SIZES
    variants: tuple = tuple(VARIANTS)
    timing: Timing = Timing()
    horizon_ms: int = DEFAULT_HORIZON_MS
    restore_ms: int = DEFAULT_RESTORE_MS
    scale_down_ms: int = DEFAULT_SCALE_DOWN_MS
    mutations: frozenset = frozenset()

    fields = ROW_FIELDS
    keys = ("situation", "members", "tasks", "variant")
    header = ("members × tasks", "variant")

    measures = (Measure("rebalances", "mean", 2, "rebalances"), Measure("moved", "mean", 1, "tasks moved"),
                Measure("unavailable_ticks", "mean", 0, "task-ticks unavailable"),
                Measure("double_ticks", "mean", 0, "task-ticks double processing"),
                Measure("ticks_to_balance", "median", 0, "ticks to balance"))

    def validate(self) -> None:
        """Raises ConfigError naming the first bad value."""
        if self.restore_ms <= 0:
            raise ConfigError(f"--restore-ms must be positive (the mean restore time, ms), got {self.restore_ms}")
        if self.scale_down_ms <= 0:
            raise ConfigError(f"--scale-down-timeout-ms must be positive, got {self.scale_down_ms}")
        validate_grid(self, "Streams situation", SITUATIONS, MAX_SIZE, "tasks")
        for name in self.variants:
            config(name, 1, self.timing, self.scale_down_ms, _mutations_of(name, self.mutations))
        if not (self.situations and self.variants and self.sizes):
            raise ConfigError("the grid is empty: give at least one situation, variant and size")
        check_coverage(self)

    axes = "situations × sizes × variants"  # what a cell is, for messages

    def grid(self) -> list:
        """The cells, one ``(situation, size, variant)`` each."""
        return [(sit, size, v) for sit in self.situations for size in self.sizes for v in self.variants]

    def specs(self) -> list:
        """One ``(run, situation, variant, members, tasks, seed)`` per run."""
        grid = self.grid()
        return [(i, sit, v, m, t, self.seed) for i in range(self.runs) for sit, (m, t), v in [grid[i % len(grid)]]]

    def run(self, spec: tuple) -> tuple:
        return run_one(spec, self.timing, self.horizon_ms, self.restore_ms, self.scale_down_ms,
                       _mutations_of(spec[2], self.mutations))

    def order(self, row: dict) -> tuple:
        return (self.situations.index(row["situation"]), row["members"], row["tasks"],
                self.variants.index(row["variant"]))

    def cells(self, row: dict) -> tuple:
        return (f"{row['members']} × {row['tasks']}", row["variant"])

    def bars(self) -> list:
        return [(v, {"variant": v}) for v in self.variants]

    def preamble(self) -> str:
        t = self.timing
        return (f"Kafka Streams, every task stateful. A tick is {t.tick_ms} ms. Restores take ms drawn uniformly "
                f"from [{self.restore_ms // 2:,}, {self.restore_ms * 3 // 2:,}]; scale-down timeout "
                f"{self.scale_down_ms:,} ms; session.timeout.ms {t.session_ms}, heartbeat.interval.ms "
                f"{t.heartbeat_ms}, latency {t.latency_ms} ms"
                + (f"; mutations {', '.join(sorted(self.mutations))}" if self.mutations else "") + ".")
