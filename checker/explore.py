"""Breadth-first explicit-state exploration with a visited set.

Every reachable state (within the limits) is checked against the invariants, every
step against the step checks, every quiescent state (no transition to another
state) against the quiescent properties. Breadth-first order makes the first
counterexample found a shortest one; parent links rebuild it. The successor order
is fixed, so counts and counterexamples are the same on every run.
"""
from __future__ import annotations

import time
from array import array
from collections import Counter
from dataclasses import dataclass, field

from .liveness import Graph, find_lasso
from .system import ACTION_KINDS, BOUNCE, ENVIRONMENT, Action, State, System


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


FAULT_KINDS = frozenset(ENVIRONMENT + (BOUNCE,))
TIMER_KINDS = ("timer", "scheduled", "tick")  # the coordinator's timers, ScheduledRebalanceTimeouts, the clock


def fairness_class(action: Action) -> tuple:
    """The same action of the same actor: a channel's deliveries, a member's
    heartbeats, one timer (a session timeout per member id)."""
    if action.kind == "timer":
        return ("timer", type(action.detail).__name__, getattr(action.detail, "member_id", None))
    return (action.kind, action.slot)


def environmental(key: tuple) -> bool:
    """Whether a fairness class is the environment's (a fault or a resume)."""
    return key[0] in FAULT_KINDS


def fair_except_timers(key: tuple) -> bool:
    """Whether a fairness class (``fairness_class``) is weakly fair when timers
    are not (``--no-timer-fairness``): every class but the timers'."""
    return key[0] not in TIMER_KINDS


def lasso_violation(system, name: str, lasso, graph, stem: list, state_at) -> Violation:
    """A Violation from ``find_lasso``'s answer: ``stem`` is the path to the lasso's
    stem state, ``state_at(i)`` gives graph state ``i``; the cycle's actions are
    found again among the successors (the graph keeps only classes)."""
    _, cycle, reason = lasso
    path = list(stem)
    loop_start = len(path) - 1
    for k in cycle:
        src, dst = state_at(graph.src[k]), state_at(graph.dst[k])
        key = graph.names[graph.cls[k]]
        action = next(a for a, n in system.successors(src) if n == dst and fairness_class(a) == key)
        path.append((action, dst))
    return Violation(name, reason, path, loop_start)


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


def _path(states: list, parents: array, labels: list, i: int) -> list:
    path = []
    while i >= 0:
        path.append((labels[i], states[i]))
        i = parents[i]
    path.reverse()
    return path


def explore(system: System, properties, initial: State | None = None,
            max_states: int | None = None, max_depth: int | None = None,
            progress=None, stop_on=frozenset(), covers=(), fair=None) -> Result:
    """Explore from ``initial`` (default ``system.initial()``).

    Exploration goes level by level (breadth first). A violated property is
    recorded with its shortest counterexample and no longer checked; if its name is
    in ``stop_on`` the run stops at the end of the level, otherwise it goes on so
    that every other property gets a definite status. ``max_states`` (checked at
    the end of each level) and ``max_depth`` bound the run (None: unbounded);
    hitting one makes the unviolated properties "incomplete". Stopping only at
    level ends makes the counts the same for every engine.
    ``progress``, if given, is called as ``progress(distinct, transitions, frontier,
    depth)`` after each level and every 20,000 states. ``covers`` are checked on
    every step until reached. Liveness properties (kind "liveness": their ``goal``
    None on goal states, or their own ``lasso`` search) are decided after a complete
    exploration under weak fairness of the action classes for which ``fair(class
    key)`` is true (default: all), see ``liveness``; the transition graph they
    search holds every transition, the environment's too.
    """
    t0 = time.perf_counter()
    state_checks = [(p.name, p.invariant) for p in properties if p.invariant]
    step_checks = [(p.name, p.step) for p in properties if p.kind == "invariant" and p.step]
    quiescent = [(p.name, p.check) for p in properties if p.kind == "quiescent"]
    live_props = [p for p in properties if p.kind == "liveness"]
    graph = Graph() if live_props else None  # every transition, the environment's too
    init = system.initial() if initial is None else initial
    states = [init]
    index = {init: 0}
    parents = array("q", [-1])
    labels: list = [None]
    kinds = dict.fromkeys(ACTION_KINDS, 0)
    violations: list = []
    pending = list(covers)
    reached: dict = {}
    transitions = 0
    depth = 0
    frontier = [0]
    limit = None

    def record(name, why, i, checks, last=None):
        path = _path(states, parents, labels, i)
        if last is not None:
            path.append(last)
        violations.append(Violation(name, why, path))
        checks[:] = [c for c in checks if c[0] != name]
        return name in stop_on

    stop = False
    for name, check in tuple(state_checks):
        why = check(system, init)
        if why:
            stop = record(name, why, 0, state_checks) or stop

    successors = system.successors
    while frontier and not stop:
        if max_depth is not None and depth >= max_depth:
            limit = f"max_depth {max_depth}"
            break
        nxt_frontier = []
        for i in frontier:
            s = states[i]
            moved = False
            for action, n in successors(s):
                transitions += 1
                kinds[action.kind] += 1
                if n == s:
                    if graph is not None:
                        graph.add(i, i, fairness_class(action))
                    continue
                moved = True
                known = index.get(n)
                if known is None:
                    known = len(states)
                    index[n] = known
                    states.append(n)
                    parents.append(i)
                    labels.append(action)
                    for name, check in tuple(state_checks):
                        why = check(system, n)
                        if why:
                            stop = record(name, why, known, state_checks) or stop
                    nxt_frontier.append(known)
                    if progress is not None and known % 20000 == 0:
                        progress(len(index), transitions, len(nxt_frontier), depth + 1)
                for name, step in tuple(step_checks):
                    why = step(system, s, action, n)
                    if why:
                        stop = record(name, why, i, step_checks, last=(action, n)) or stop
                if pending:
                    hit = False
                    for cover in pending:
                        if cover.reached(system, s, action, n):
                            reached[cover.name] = hit = True
                    if hit:
                        pending = [c for c in pending if c.name not in reached]
                if graph is not None:
                    graph.add(i, known, fairness_class(action))
            if not moved:
                for name, check in list(quiescent):
                    why = check(system, s)
                    if why:
                        stop = record(name, why, i, quiescent) or stop
        frontier = nxt_frontier
        if frontier:
            depth += 1
        if progress is not None:
            progress(len(index), transitions, len(frontier), depth)
        if stop:
            break
        if max_states is not None and len(index) >= max_states and frontier:
            limit = f"max_states {max_states}"
            break

    if live_props and limit is None and not stop:
        for p in live_props:
            if p.lasso:
                lasso = p.lasso.search(system, p.name, graph, [p.lasso.summary(system, x) for x in states],
                                       states.__getitem__, lambda i: _path(states, parents, labels, i),
                                       fair or (lambda key: True))
                if lasso:
                    violations.append(lasso)
                continue
            goal = bytearray(0 if p.goal(system, x) else 1 for x in states)
            lasso = find_lasso(len(index), graph, goal, fair or (lambda key: True), excluded=environmental)
            if lasso:
                stem = _path(states, parents, labels, lasso[0])
                violations.append(lasso_violation(system, p.name, lasso, graph, stem, states.__getitem__))

    fired = Counter({k: v for k, v in kinds.items() if v})
    return conclude(properties, violations, limit, stop, len(index), transitions, depth, t0, fired,
                    {c.name: c.name in reached for c in covers})


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
