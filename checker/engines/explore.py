"""Breadth-first explicit-state exploration with a visited set.

Every reachable state (within the limits) is checked against the invariants, every
step against the step checks, every quiescent state (no transition to another
state) against the quiescent properties. Breadth-first order makes the first
counterexample found a shortest one; parent links rebuild it. The successor order
is fixed, so counts and counterexamples are the same on every run.
"""
from __future__ import annotations

import gc
import time
from array import array
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from rebalance.model.protocol import slot_of

from .checkpoint import run_key
from .guards import ANALYSIS_MMAP_THRESHOLD, exploration_mmap_threshold, map_large_blocks, release_free_heap
from .interning import FingerprintSet, Interner, LazyStates, collision_probability, fold
from .level import BATCH, Level, cat
from .liveness import Graph, find_recurrence
from .renaming import Renamer
from .steps import Steps, goal_holds
from ..system import ACTION_KINDS, BOUNCE, COMMIT, ENVIRONMENT, Action, State, System


@dataclass
class Violation:
    """``property`` broke at the last state of ``path``: ``[(Action | None, State), ...]``
    from the initial state (its action None). For a liveness property the path is a
    lasso: from index ``loop_start`` on it repeats forever (a stutter when
    ``loop_start`` is the last index)."""

    property: str
    reason: str
    path: list
    loop_start: int | None = None


# the actions not the protocol's own, never fair: the environment's (faults, resume, bounce) and the
# application's commits
UNFAIR_KINDS = frozenset(ENVIRONMENT + (BOUNCE, COMMIT))
TIMER_KINDS = ("timer", "scheduled", "tick")  # the coordinator's timers, ScheduledRebalanceTimeouts, the clock


@contextmanager
def cycles_uncollected():
    """The cyclic garbage collector off for the block (a decorator too), as it was
    after: an exploration makes no reference cycles (states are tuples of ids, the
    memos dicts of them, freed by reference counting; none were found in the main
    job with the collector saving all it finds), and the collector's passes over
    ever larger memos cost about 6% of the main job's CPU time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def fairness_class(action: Action) -> tuple:
    """The same action of the same actor: a channel's deliveries, a member's
    heartbeats, one timer. A timer that waits for a member (a session timeout)
    is told apart by the member's client slot, not its member id: states are
    explored up to renaming of member ids, so a slot is what stays the same
    along a cycle."""
    if action.kind == "timer":
        mid = getattr(action.detail, "member_id", None)
        return ("timer", type(action.detail).__name__, None if mid is None else slot_of(mid))
    return (action.kind, action.slot)


def environmental(key: tuple) -> bool:
    """Whether a fairness class is not the protocol's own: a fault, a resume, a
    bounce or the application's commit."""
    return key[0] in UNFAIR_KINDS


def fair_except_timers(key: tuple) -> bool:
    """Whether a fairness class (``fairness_class``) is weakly fair when timers
    are not (``--no-timer-fairness``): every class but the timers'."""
    return key[0] not in TIMER_KINDS


def concrete(system, canonical, path: list) -> list:
    """One concrete execution for ``path`` (``[(Action | None, State), ...]``, its
    states up to renaming): each step replays, from the previous concrete state,
    the successor of the same action kind and slot whose ``canonical`` form is
    the path's next state. Generations and member ids then grow along the
    execution as they would in the system, around a lasso's loop too."""
    x = path[0][1]
    out = [(None, x)]
    for action, want in path[1:]:
        want = canonical(want)
        x_action, x = next((a, n) for a, n in system.successors(x)
                           if a.kind == action.kind and a.slot == action.slot and canonical(n) == want)
        out.append((x_action, x))
    return out


def lasso_violation(system, name: str, lasso, graph, stem: list, state_at, canonical) -> Violation:
    """A Violation from a lasso search's answer: ``stem`` is the path (states up to
    renaming) to the lasso's stem state, ``state_at(i)`` gives graph state ``i``;
    the cycle's actions are found again among the successors (the graph keeps
    only classes). Its reason is the search's; the caller says more."""
    _, cycle, how = lasso
    path = list(stem)
    loop_start = len(path) - 1
    for k in cycle:
        src, dst = state_at(graph.source(k)), state_at(graph.dst[k])
        key = graph.names[graph.cls[k]]
        action = next(a for a, n in system.successors(src)
                      if fairness_class(a) == key and canonical(n) == dst)
        path.append((action, dst))
    return Violation(name, how, concrete(system, canonical, path), loop_start)


def storm_result(system, properties, storm, covers=()) -> "Result":
    """The Result of a run whose initial state never settles (``system.Storm``): the
    settled schedule from the started members loops. Its steps are cut at the first
    state that repeats an earlier one up to renaming, a lasso whose loop is an
    infinite execution of the schedule (weakly fair: it delivers every message in
    the order sent and fires what is due); reported as a violation of the property
    it breaks, ``no_rebalance_storm`` when a generation completes on the loop, else
    ``eventual_balance``, with every other property incomplete (nothing explored)."""
    t0 = time.perf_counter()
    canonical = Renamer().canonical
    path = [(None, storm.start)] + storm.trace
    seen: dict = {}
    for k, (_, state) in enumerate(path):
        form = canonical(state._replace(faults_left=0))
        if form in seen:
            loop_start, path = seen[form], path[:k + 1]
            break
        seen[form] = k
    else:  # no repeat within the schedule's limit: the end of the run stands for the rest
        loop_start = len(path) - 1
    rises = [b[1].group.generation > a[1].group.generation for a, b in zip(path[loop_start:], path[loop_start + 1:])]
    name = "no_rebalance_storm" if any(rises) else "eventual_balance"
    reason = (f"the initial group never settles: {sum(rises)} generation(s) complete on every turn of a "
              f"{len(path) - 1 - loop_start}-step cycle of its settling schedule" if any(rises) else
              f"the initial group never settles: a {len(path) - 1 - loop_start}-step cycle of its settling schedule")
    violation = Violation(name, reason, path, loop_start)
    statuses = {p.name: "violated" if p.name == name else "incomplete" for p in properties}
    fired = Counter(a.kind for a, _ in path[1:])
    return Result(len(seen), len(path) - 1, len(path) - 1, time.perf_counter() - t0, statuses, [violation],
                  Counter({k: fired[k] for k in ACTION_KINDS if fired[k]}), "the settling of the initial state, which never ends",
                  {c.name: False for c in covers})


@dataclass
class Result:
    """The outcome of one exploration: counts, each property's status, the
    violations found. The run's verdict weighs them against what the
    configuration expects (cli ``_summary``)."""

    distinct_states: int
    transitions: int
    max_depth: int
    seconds: float
    statuses: dict  # property name -> "holds" | "violated" | "incomplete"
    violations: list = field(default_factory=list)  # [Violation], in the order found
    actions_fired: Counter = field(default_factory=Counter)  # action kind -> transitions of that kind
    limit: str | None = None
    covers: dict = field(default_factory=dict)  # cover name -> reached
    # that two states' 64-bit fingerprints collided (checker/engines/interning.py); None: not estimated
    collision_probability: float | None = None


def replay(system, canonical, init: State, chain) -> list:
    """The explored path (states up to renaming) from ``init`` along successor indices
    ``chain``: ``[(Action | None, State), ...]``, each step the ``chain[k]``-th
    successor of the state before, renamed."""
    path = [(None, init)]
    s = init
    for idx in chain:
        action, n = system.successors(s)[idx]
        s = canonical(n)
        path.append((action, s))
    return path


def _chain(parents: array, steps: array, i: int) -> list:
    """The successor indices leading from the initial state to state ``i``."""
    chain = []
    while i > 0:
        chain.append(steps[i])
        i = parents[i]
    return chain[::-1]


class _Store:
    """The explored states, compactly: one column per part of the interned id tuple
    (checker/engines/interning.py), uint16 while the ids fit (the main job's do:
    some 5,000 Groups and Procs) and int32 past that, and a uint8 column of faults
    left, so state ``i`` is ``row(i)``. With ``links``, the parent's index (int32)
    and the successor's index among its parent's successors (uint16) of each;
    without, ``parents`` and ``steps`` are None (a run that keeps the liveness
    graph reads them off it, ``Graph.tree_path``)."""

    def __init__(self, init_ids: tuple, links: bool = True):
        self.columns = [array("H") for _ in init_ids[:-1]]
        self.faults = array("B")
        self.parents = array("i") if links else None
        self.steps = array("H") if links else None
        self.extend(np.array([init_ids]), np.array([-1]), np.array([0]))

    def __len__(self) -> int:
        return len(self.faults)

    def extend(self, rows: np.ndarray, parents: np.ndarray, steps: np.ndarray) -> None:
        """Append states: ``rows`` an (n, parts + 1) int array of id tuples, with
        each one's parent index and successor index (kept only with ``links``).
        An id past 65,535 widens every id column to int32, once; faults left past
        255, the faults column."""
        if len(rows) and self.columns[0].typecode == "H" and rows[:, :-1].max() > 0xFFFF:
            self.columns = [array("i", column) for column in self.columns]
        if len(rows) and self.faults.typecode == "B" and rows[:, -1].max() > 0xFF:
            self.faults = array("i", self.faults)
        for j, column in enumerate((*self.columns, self.faults)):
            column.frombytes(rows[:, j].astype(column.typecode).tobytes())
        if self.parents is not None:
            self.parents.frombytes(np.asarray(parents, np.int32).tobytes())
            self.steps.frombytes(np.asarray(steps, np.uint16).tobytes())

    def row(self, i: int) -> tuple:
        return (*map(itemgetter(i), self.columns), self.faults[i])

    def matrix(self, lo: int, hi: int) -> np.ndarray:
        """States ``lo`` .. ``hi - 1`` as an (hi - lo, parts + 1) int64 matrix of id rows."""
        return np.stack([np.frombuffer(c, c.typecode)[lo:hi] for c in (*self.columns, self.faults)],
                        axis=1).astype(np.int64)


@cycles_uncollected()
def explore(system: System, properties, initial: State | None = None,
            max_states: int | None = None, max_depth: int | None = None,
            progress=None, stop_on=frozenset(), covers=(), fair=None, guard=None, checkpoint=None) -> Result:
    """Explore from ``initial`` (default ``system.initial()``), up to renaming.

    States are interned in their canonical form (checker/engines/renaming.py: generations,
    member-id serials and epochs renamed 1, 2, ... in order), so two states that
    differ only in how far those counters have run are one state: the explored
    graph is finite even where the system is not (a rebalance storm), and a path
    back to a state is the loop of an infinite execution. Every property is
    invariant under that renaming; step checks and covers see each step as it
    happens, before its successor is renamed; counterexamples are replayed as
    concrete executions (``concrete``).

    A state is kept as its interned id tuple (checker/engines/interning.py) in
    int32 columns; the visited set holds 64-bit fingerprints of those tuples
    (``FingerprintSet``, the collision odds in ``Result.collision_probability``);
    a state's parent is an int32 index and the successor index that led from it
    (read off the liveness graph when the run keeps one: the first edge into a
    state, ``Graph.tree_path``), and the path to a state is rebuilt by replaying
    those indices from the initial state.

    Exploration goes level by level (breadth first). A violated property is
    recorded with its shortest counterexample and no longer checked; if its name is
    in ``stop_on`` the run stops at the end of the level, otherwise it goes on so
    that every other property gets a definite status. ``max_states`` (checked at
    the end of each level) and ``max_depth`` bound the run (None: unbounded);
    hitting one makes the unviolated properties "incomplete". Stopping only at
    level ends makes the counts the same for every engine.
    ``progress``, if given, is called as ``progress(distinct, transitions, frontier,
    depth)`` after each level, and with ``phase="liveness"`` once more when the liveness
    analysis starts. ``covers`` are checked on
    every step until reached. A state is quiescent when no action of the system's
    own (only the environment's) leads to another state. Liveness properties (kind
    "liveness") are decided after a complete exploration (``decide_liveness``)
    under weak fairness of the system's action classes for which ``fair(class
    key)`` is true (default: all). ``guard`` (checker/engines/guards.py Guard), if given, is
    asked before every ``BATCH`` expanded states: a limit it names stops the run at once
    (incomplete, its counts those reached). ``checkpoint`` (checker/engines/checkpoint.py
    Checkpoint), if given, is written at the end of a complete level when it is due
    (``Checkpoint.due``) and, if it holds one, resumed from first.
    """
    t0 = time.perf_counter()
    map_large_blocks(exploration_mmap_threshold(0))
    state_checks = [(p.name, p.invariant) for p in properties if p.invariant]
    step_checks = [(p.name, p.step) for p in properties if p.kind == "invariant" and p.step]
    quiescent = [(p.name, p.check) for p in properties if p.kind == "quiescent"]
    live_props = [p for p in properties if p.kind == "liveness"]
    place = {p.name: i for i, p in enumerate(properties)}
    marking = marks_of(live_props)
    # every transition, the environment's too
    graph = Graph(spill=True if checkpoint is None else checkpoint.root) if live_props else None
    interner = system.interner = Interner()
    renamer = Renamer()
    canonical = renamer.canonical
    init = canonical(system.initial() if initial is None else initial)
    init_ids = interner.ids(init)
    width = len(init_ids)
    store = _Store(init_ids, links=graph is None)
    visited = FingerprintSet()
    visited.resolve(fold(np.array([init_ids], np.int64)), 0)
    kinds: Counter = Counter()  # action kind -> transitions of that kind
    violations: list = []
    stepping = Steps(system, interner, state_checks, step_checks, covers, marking)
    transitions = 0
    depth = 0
    lo, hi = 0, 1  # the frontier: states lo .. hi - 1
    limit = None

    def path_to(i):
        return replay(system, canonical, init,
                      _chain(store.parents, store.steps, i) if graph is None else graph.tree_path(i))

    found: list = []  # this level's violations: (order key, name, why, state index, last step)

    def record(key, name, why, i, last=None):
        found.append((key, name, why, i, last))

    for _, part, name, why in stepping.invalid(np.array([init_ids], np.int64), [init]):
        record((0, part), name, why, 0)
    level = Level(system, interner, stepping, UNFAIR_KINDS, fairness_class, graph.class_id if graph is not None else None)
    stop = _settle(system, canonical, path_to, found, violations, stop_on, stepping, place)
    if checkpoint is not None:
        checkpoint.bind(run_key(system, properties, covers, stop_on, fair))
        if checkpoint.saved is not None:  # from the end of the last level checkpointed
            figures, visited = checkpoint.restore(store, graph, interner)
            lo, hi, depth, transitions = figures["lo"], figures["hi"], figures["depth"], figures["transitions"]
            kinds, violations = Counter(figures["kinds"]), list(figures["violations"])
            stepping.reached = list(figures["reached"])
            stepping.pending = [c for c in stepping.pending if c.name not in stepping.reached]
            for v in violations:
                stepping.drop(v.property)
            quiescent = [q for q in quiescent if q[0] not in {v.property for v in violations}]
            stop = any(v.property in stop_on for v in violations)
            map_large_blocks(exploration_mmap_threshold(len(store)))
    while lo < hi and not stop:
        if max_depth is not None and depth >= max_depth:
            limit = f"max_depth {max_depth}"
            break
        # every transition's canonical successor: its fingerprint and its id row, in the order
        # generated, a batch of states at a time (checker/engines/level.py)
        fps, rows, sources, indices, classes, marks = [], [], [], [], [], []
        at = 0  # transitions so far in this level
        for b_lo in range(lo, hi, BATCH):
            if guard is not None:
                limit = guard.exceeded()
                if limit:
                    break
            b_hi = min(b_lo + BATCH, hi)
            states = LazyStates(interner, store.matrix(b_lo, b_hi))
            batch = level.expand(states.rows, states)
            transitions += len(batch.src)
            kinds.update(batch.kinds)
            fps.append(fold(batch.canonical))
            rows.append(batch.canonical.astype(np.int32))
            sources.append((batch.src + b_lo).astype(np.int32))  # a level's columns are kept narrow
            indices.append(batch.index.astype(np.uint16))
            classes.append(batch.classes.astype(np.uint16))
            marks.append(np.where(batch.stutter, 0, batch.marks))
            for t, name, why in batch.broken:
                record((at + t, 1), name, why, b_lo + int(batch.src[t]),
                       (batch.actions[batch.aid[t]], interner.state(tuple(batch.raw[t].tolist()))))
            if quiescent:
                ends = np.cumsum(np.bincount(batch.src, minlength=b_hi - b_lo))
                for j in np.flatnonzero(~batch.moved).tolist():
                    s = states[j]
                    for name, check in list(quiescent):
                        why = check(system, s)
                        if why:
                            record((at + int(ends[j]), -1), name, why, b_lo + j)
                            quiescent.remove((name, check))
            at += len(batch.src)
        fps, flat = cat(fps, np.int64), cat(rows, np.int32, (0, width))
        sources, indices = cat(sources, np.int32), cat(indices, np.uint16)
        base = len(store)
        dst, fresh = visited.resolve(fps, base)
        rows = flat[fresh]
        store.extend(rows, sources[fresh], indices[fresh])
        new = rows.astype(np.int64)
        for j, part, name, why in stepping.invalid(new, LazyStates(interner, new)):
            record((int(fresh[j]), part), name, why, base + j)
            stepping.drop(name)
        if graph is not None:
            graph.extend(sources, dst, cat(classes, np.uint16), cat(marks, np.uint8))
        del fps, flat, rows
        release_free_heap()
        map_large_blocks(exploration_mmap_threshold(len(store)))
        stop = _settle(system, canonical, path_to, found, violations, stop_on, stepping, place)
        if limit:
            break
        lo, hi = hi, len(store)
        if lo < hi:
            depth += 1
        if checkpoint is not None and checkpoint.due(final=stop or lo >= hi or (
                max_states is not None and len(store) >= max_states) or (max_depth is not None and depth >= max_depth)):
            checkpoint.save(store, graph, interner, lo=lo, hi=hi, depth=depth, transitions=transitions,
                            kinds=dict(kinds), violations=violations, reached=list(stepping.reached))
        if progress is not None:
            progress(len(store), transitions, hi - lo, depth)
        if stop:
            break
        if max_states is not None and len(store) >= max_states and lo < hi:
            limit = f"max_states {max_states}"
            break

    def state_at(i):
        return interner.state(store.row(i))

    # the expansion's caches (successors, renaming and checks by id) are not needed past here: the
    # liveness search and the counterexamples replay through System; the refinement check's caches and
    # System's handler memos go too (pure memos, rebuilt if a replay or a counterexample's reason asks)
    reached = stepping.reached
    del level, stepping, visited
    system.forget()
    map_large_blocks(ANALYSIS_MMAP_THRESHOLD)
    release_free_heap()
    if live_props and limit is None and not stop:
        if progress is not None:
            progress(len(store), transitions, 0, depth, phase="liveness")
        graph.load()  # only now, the memos gone
        violations.extend(decide_liveness(
            system, live_props, graph,
            _goals(system, store, state_at, interner),
            lambda p: _Summaries(system, p, store, state_at, interner), state_at,
            lambda i: concrete(system, canonical, path_to(i)), path_to, canonical, fair,
            identify=lambda form: interner.ids(form)))

    fired = Counter({k: kinds[k] for k in ACTION_KINDS if kinds[k]})  # in a fixed order
    result = conclude(properties, violations, limit, stop, len(store), transitions, depth, t0, fired,
                      {c.name: c.name in reached for c in covers})
    result.collision_probability = collision_probability(len(store), transitions + 1)
    return result


def _goals(system, store: _Store, state_at, interner: Interner):
    """``goal_of`` for ``decide_liveness``: a property's goal bytearray (1 where the
    goal holds), computed once per goal function (the properties without a goal
    reach it everywhere) and shared by the properties with the same goal
    (``_goal_bits``)."""
    done: dict = {}

    def goal_of(p) -> bytearray:
        hit = done.get(p.goal)
        if hit is None:
            n = len(store)
            hit = bytearray(b"\x01") * n if p.goal is None else _goal_bits(system, p.goal, store, state_at, interner)
            done[p.goal] = hit
        return hit
    return goal_of


_GOAL_CHUNK = 1 << 14  # explored states per chunk of ``_goal_bits``


def _goal_bits(system, goal, store: _Store, state_at, interner: Interner) -> bytearray:
    """``goal``'s bytearray (as ``_goals``'s), decided by ``steps.goal_holds`` (a
    projected goal once per distinct projection, on the first explored state that
    has it), the states read ``_GOAL_CHUNK`` at a time."""
    holds = goal_holds(system, goal, interner)
    n = len(store)
    out = bytearray(n)
    for lo in range(0, n, _GOAL_CHUNK):
        hi = min(lo + _GOAL_CHUNK, n)
        out[lo:hi] = holds(store.matrix(lo, hi), lambda i, lo=lo: state_at(lo + i)).tobytes()
    release_free_heap()  # the chunks' numpy temporaries
    return out


def _settle(system, canonical, path_to, found: list, violations: list, stop_on, stepping: Steps,
            place: dict) -> bool:
    """Turn a level's violations, the first of each property in the order a
    sequential search meets them (by transition: the new state's invariants, then
    the step's checks; a state's quiescence after its successors; at the same
    place, in the order of the properties, ``place``: name -> position), into
    Violations with their shortest paths; ``stepping`` checks those properties no
    more. Returns whether one stops the run."""
    stop = False
    first: dict = {}
    for f in sorted(found, key=lambda f: (f[0], place[f[1]])):
        first.setdefault(f[1], f)
    for _, name, why, i, last in first.values():
        stepping.drop(name)
        path = path_to(i)
        if last is not None:
            path.append(last)
        violations.append(Violation(name, why, concrete(system, canonical, path)))
        stop = stop or name in stop_on
    found.clear()
    return stop


class _Summaries:
    """``p.lasso.summary`` of each explored state, computed when asked (by graph
    index), its shape keyed by interned ids instead of kept: the churn search
    (checker/engines/churn.py) reads each once or twice, and holding them all would
    cost a state's worth of objects per state."""

    def __init__(self, system, p, store: _Store, state_at, interner: Interner):
        self.system, self.p, self.store, self.state_at, self.interner = system, p, store, state_at, interner

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, i: int):
        key, served, bounces = self.p.lasso.summary(self.system, self.state_at(i))
        return (None if key is None else self.interner.ids(key)), served, bounces

    def __iter__(self):
        return (self[i] for i in range(len(self)))


def marks_of(live_props) -> list:
    """``[(bit, property)]``: the mark each liveness property with a step part sets
    on a transition (``Graph.mark``), in the properties' order."""
    return [(1 << b, p) for b, p in enumerate(p for p in live_props if p.step)]


def decide_liveness(system, live_props, graph: Graph, goal_of, summaries_of, state_at, stem_of, path_to,
                    canonical, fair=None, identify=None) -> list:
    """Every liveness property's lasso, if it has one (both engines): ``graph`` holds
    every explored transition, marked as ``marks_of(live_props)`` says;
    ``goal_of(p)``: a bytearray, 1 on the explored states (by graph index) where
    ``p``'s goal holds; ``summaries_of(p)``: ``p.lasso.summary`` of each state;
    ``state_at(i)``: state ``i``; ``stem_of(i)``: a concrete path to it;
    ``path_to(i)``: the explored path to it (up to renaming); ``identify``: how
    the summaries key a shape (checker/engines/churn.py). A property with its own
    ``lasso`` search runs it; the others are ◇□ properties (``find_recurrence``):
    once faults stop (the environment's edges excluded), the goal is reached and
    kept, and no step the property marks is taken for ever after.
    Returns ``[Violation]``."""
    fair = fair or (lambda key: True)
    bits = {p.name: bit for bit, p in marks_of(live_props)}
    found = []
    for p in live_props:
        if p.lasso:
            v = p.lasso.search(system, p.name, graph, summaries_of(p), state_at, stem_of, fair,
                               **({"identify": identify} if identify else {}))
            if v:
                found.append(v)
            continue
        goal = goal_of(p)
        lasso = find_recurrence(len(goal), graph, goal, fair, bits.get(p.name, 0), excluded=environmental)
        if lasso:
            v = lasso_violation(system, p.name, lasso, graph, path_to(lasso[0]), state_at, canonical)
            v.reason = f"{_lasso_reason(system, p, v)} ({v.reason})"
            found.append(v)
    return found


def _lasso_reason(system, p, v: Violation) -> str:
    """What a ◇□ property's lasso does wrong, in one line, read off its concrete path."""
    loop = v.path[v.loop_start:]
    if len(loop) == 1:
        return f"stuck where {p.goal(system, loop[0][1])}"
    storm = [why for (_, s), (a, n) in zip(loop, loop[1:]) if p.step for why in (p.step(system, s, a, n),) if why]
    if storm:
        return f"{len(storm)} step(s) on every turn of the cycle where {storm[0]}, for ever"
    bad = next(why for why in (p.goal(system, s) for _, s in loop) if why)
    return f"never settles: {bad} on every turn of the cycle"


def conclude(properties, violations: list, limit, stopped: bool, distinct: int, transitions: int,
             depth: int, t0: float, fired: Counter, covers: dict) -> Result:
    """The Result of an exploration (either engine): a property is violated if it has
    a counterexample, holds if the space was exhausted, and is incomplete otherwise.
    A property keeps one counterexample, the last found: a lasso, found after the
    exploration, says more than a finite one to the same property."""
    last = {}
    for v in violations:
        last[v.property] = v  # keeps the first one's place in the order
    violations = list(last.values())
    broken = set(last)
    complete = limit is None and not stopped
    statuses = {p.name: "violated" if p.name in broken else ("holds" if complete else "incomplete")
                for p in properties}
    return Result(distinct, transitions, depth, time.perf_counter() - t0, statuses, violations,
                  fired, limit, covers)
