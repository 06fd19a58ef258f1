"""Level-synchronous breadth-first exploration on Spark (``--engine spark``).

Each level's frontier is an RDD of ``(fingerprint, state bytes)`` partitioned by
fingerprint; executors expand it with the model's handlers (``System.successors``,
the same code as the local engine) and check the same properties. A state's
fingerprint is 64 bits of BLAKE2b over its canonical form (with a million states
the chance of a collision is about 3e-8); states travel as pickles. Deduplication keeps the
visited set partitioned on the executors (``subtractByKey`` against an RDD with the
same partitioner): nothing but counters, violations and, for liveness, the
transition graph comes back to the driver. The visited set and the frontier are
checkpointed every ``CHECKPOINT_EVERY`` levels so the lineage stays short and a
lost executor costs at most that many levels.

Counts (distinct states, transitions, depth), verdicts and counterexamples
equal the local engine's: both stop only at the end of a level, and every state
carries its *rank*, its place in the local engine's breadth-first order. The
parent kept for a state reached twice is the one with the smallest (parent
rank, successor index), the local engine's first discovery; a level's new
states are ranked by that pair; the first violation of a property is the one
the local engine meets first; and liveness numbers states by rank and adds
edges in (rank, successor index) order, so both engines search the same graph
and find the same lassos.

Spark runs in local mode by default (``local[*]``) or on any master URL; its UI,
console progress bar and INFO logs are off (``log4j2.properties`` beside this file).
"""
from __future__ import annotations

import hashlib
import pickle
import shutil
import tempfile
import time
from collections import Counter

from .explore import (
    UNFAIR_KINDS, Result, Violation, concrete, conclude, decide_liveness, fairness_class, mark, marks_of, replay,
)
from .liveness import Graph
from .renaming import Renamer
from ..spark_session import session
from ..system import State, System

CHECKPOINT_EVERY = 10
_SYSTEMS: dict = {}  # executor-side cache: system key -> (System, Renamer)


def _canonical(obj, out: list) -> None:
    """Flatten a state to ints, strings and brackets: equal states give equal lists
    (pickle does not: it shares repeated objects by identity)."""
    if type(obj) is tuple or isinstance(obj, tuple):
        out.append("(")
        for x in obj:
            _canonical(x, out)
        out.append(")")
    elif obj is None:
        out.append("N")
    elif isinstance(obj, (str, bytes)):  # a selected protocol name, opaque metadata
        out.append(obj)
    else:
        out.append(int(obj))


def fingerprint(state: State) -> int:
    """64 bits of BLAKE2b over the state's canonical form."""
    flat: list = []
    _canonical(state, flat)
    return int.from_bytes(hashlib.blake2b(repr(flat).encode(), digest_size=8).digest(), "big", signed=True)


def encode(state: State) -> bytes:
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def _system(key) -> tuple:
    """The executor's System for ``key`` (a ``System.spec``) and its Renamer (states
    are explored up to renaming, as by the local engine), built once per worker."""
    hit = _SYSTEMS.get(key)
    if hit is None:
        hit = _SYSTEMS[key] = (System(*key), Renamer())
    return hit


def _checks(system: System, names) -> tuple:
    from ..properties import PROPERTIES, COVERS
    props = [p for p in PROPERTIES if p.name in names]
    covers = [c for c in COVERS if c.name in names]
    return props, covers


QUIESCENT = 1 << 30  # a quiescent check comes after every successor of its state


def _expand(key, names, with_graph, partition):
    """Executor side: expand a frontier partition of ``(fp, (rank, state bytes))``.
    Yields tagged records: ("succ", dst_fp, (src_rank, index, dst_bytes, src_fp))
    with the successor renamed (explore.explore), ("edge", src_rank, index,
    dst_fp, class, marks) (if ``with_graph``), ("stat", transitions, covers
    reached, transitions per action kind), ("bad", property, reason, (src_rank,
    index, 1), src_fp, index) for step and quiescent violations (index QUIESCENT)."""
    system, renamer = _system(key)
    props, covers = _checks(system, names)
    steps = [p for p in props if p.kind == "invariant" and p.step]
    quiescent = [p for p in props if p.kind == "quiescent"]
    marking = marks_of([p for p in props if p.kind == "liveness"])
    transitions = 0
    fired = Counter()
    reached = set()
    for fp, (rank, blob) in partition:
        s = pickle.loads(blob)
        moved = False
        for idx, (action, n) in enumerate(system.successors(s)):
            transitions += 1
            fired[action.kind] += 1
            c = renamer.canonical(n)
            nblob = blob if c == s else encode(c)
            nfp = fp if c == s else fingerprint(c)
            if with_graph:
                yield ("edge", rank, idx, nfp, fairness_class(action),
                       0 if c == s else mark(marking, system, s, action, n))
            if c == s:
                continue
            if action.kind not in UNFAIR_KINDS:
                moved = True
            yield ("succ", nfp, (rank, idx, nblob, fp))
            for p in steps:
                why = p.step(system, s, action, n)
                if why:
                    yield ("bad", p.name, why, (rank, idx, 1), fp, idx)
            for cv in covers:
                if cv.name not in reached and cv.reached(system, s, action, n):
                    reached.add(cv.name)
        if not moved:
            for p in quiescent:
                why = p.check(system, s)
                if why:
                    yield ("bad", p.name, why, (rank, QUIESCENT, 1), fp, None)
    yield ("stat", transitions, tuple(sorted(reached)), tuple(fired.items()))


def _check_new(key, names, goals, partition):
    """Executor side, on newly discovered states ``(fp, (parent rank, successor
    index, bytes, parent fp, rank))``: ("bad", property, reason, (parent rank,
    index, 0), fp, None) for state invariants, and a record of each state with its
    parent, its rank, whether it is a goal of each liveness property in ``goals``
    and what a lasso search needs of it, if ``lasso`` names a property with one
    ("seen", fp, parent fp, successor index, rank, goal bits, (shape fingerprint,
    partitions served, leader bounces) or None; see churn.summary)."""
    system, _ = _system(key)
    props, _ = _checks(system, names | set(goals))
    invariants = [p for p in props if p.invariant]
    goal_checks = [p.goal for name in goals for p in props if p.name == name]
    churn = next((p.lasso for p in props if p.lasso and p.name in names), None)
    for fp, (parent_rank, idx, blob, parent, rank) in partition:
        s = pickle.loads(blob)
        for p in invariants:
            why = p.invariant(system, s)
            if why:
                yield ("bad", p.name, why, (parent_rank, idx, 0), fp, None)
        extra = None
        if churn is not None:
            form, served, bounces = churn.summary(system, s)
            extra = (None if form is None else fingerprint(form), served, bounces)
        yield ("seen", fp, parent, idx, rank, tuple(not g(system, s) for g in goal_checks), extra)


def _summarize(partition):
    """Executor side: the violations of a checked partition and how many states it had."""
    n = 0
    for r in partition:
        if r[0] == "bad":
            yield r
        else:
            n += 1
    yield ("count", n)


def _earlier(a, b):
    """Of two discoveries of one state, the local engine's first: (parent rank, index)."""
    return a if (a[0], a[1]) <= (b[0], b[1]) else b


def _ranked(new, base: int, parts: int):
    """A level's new states, ``(fp, (parent rank, index, bytes, parent fp))``, each
    given its rank: ``base`` plus its place in (parent rank, index) order."""
    return (new.sortBy(lambda kv: (kv[1][0], kv[1][1])).zipWithIndex()
            .map(lambda x: (x[0][0], x[0][1] + (base + x[1],))).partitionBy(parts))


def explore_spark(system: System, properties, covers=(), max_states=None, max_depth=None,
                  stop_on=frozenset(), fair=None, master: str = "local[*]", progress=None, guard=None) -> Result:
    """The same contract as ``explore.explore``, run on Spark (``guard`` asked at the
    end of each level, on the driver)."""
    t0 = time.perf_counter()
    spark = session(master)
    sc = spark.sparkContext
    parts = max(2, sc.defaultParallelism)
    checkpoint_dir = tempfile.mkdtemp(prefix="rebalance-spark-")
    sc.setCheckpointDir(checkpoint_dir)
    key = system.spec
    live_props = [p for p in properties if p.kind == "liveness"]
    names = frozenset(p.name for p in properties) | {c.name for c in covers}
    with_graph = bool(live_props)
    goals = tuple(p.name for p in live_props if p.goal)
    try:
        canonical = Renamer().canonical
        init = canonical(system.initial())
        blob = encode(init)
        fp0 = fingerprint(init)
        violations: dict = {}  # property -> (reason, fp, successor index for a step violation)
        first = list(_check_new(key, names, goals, [(fp0, (-1, -1, blob, None, 0))]))
        _first_violations(violations, first)
        seen0 = next(r for r in first if r[0] == "seen")
        frontier = sc.parallelize([(fp0, (0, blob))], 1).partitionBy(parts)
        visited = sc.parallelize([(fp0, seen0[2:])], 1).partitionBy(parts).persist()
        edges = []
        fired: Counter = Counter()
        reached: set = set()
        transitions = 0
        depth = 0
        distinct = 1
        limit = None
        stop = any(n in stop_on for n in violations)
        level = 0
        stale: list = []  # cached RDDs the next level no longer needs
        while not stop:
            if max_depth is not None and depth >= max_depth:
                limit = f"max_depth {max_depth}"
                break
            out = frontier.mapPartitions(lambda it: _expand(key, names, with_graph, it)).persist()
            small = out.filter(lambda r: r[0] != "succ").collect()  # counters, violations, edges
            transitions += sum(r[1] for r in small if r[0] == "stat")
            for r in small:
                if r[0] == "stat":
                    reached.update(r[2])
                    fired.update(dict(r[3]))
            bad = [r for r in small if r[0] == "bad"]
            if with_graph:
                edges.extend(r[1:] for r in small if r[0] == "edge")
            del small
            cands = out.filter(lambda r: r[0] == "succ").map(lambda r: (r[1], r[2]))
            new = _ranked(cands.reduceByKey(_earlier, parts).subtractByKey(visited), distinct, parts).persist()
            checked = new.mapPartitions(lambda it: _check_new(key, names, goals, it)).persist()
            report = checked.mapPartitions(_summarize).collect()  # violations and counts
            count = sum(r[1] for r in report if r[0] == "count")
            _first_violations(violations, bad + report)
            added = checked.filter(lambda r: r[0] == "seen").map(lambda r: (r[1], r[2:])).partitionBy(parts)
            old_visited = visited
            visited = visited.union(added).persist()
            frontier = new.mapValues(lambda v: (v[4], v[2])).persist()
            level += 1
            if level % CHECKPOINT_EVERY == 0:
                visited.checkpoint()
                frontier.checkpoint()
                visited.count()
                frontier.count()
            for rdd in stale:
                rdd.unpersist()
            stale = [out, old_visited, new, checked]
            distinct += count
            if count:
                depth += 1
            if progress is not None:
                progress(distinct, transitions, count, depth)
            stop = any(n in stop_on for n in violations)
            if not count:
                break
            if max_states is not None and distinct >= max_states:
                limit = f"max_states {max_states}"
                break
            limit = guard.exceeded() if guard is not None else None
            if limit:
                break
        found = [_violation(system, canonical, visited, init, fp0, name, *v) for name, v in violations.items()]
        complete = limit is None and not stop
        if live_props and complete:
            found.extend(_liveness(system, canonical, visited, init, fp0, live_props, edges, fair))
    finally:
        spark.stop()
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return conclude(properties, found, limit, stop, distinct, transitions, depth, t0, fired,
                    {c.name: c.name in reached for c in covers})


def _first_violations(violations: dict, records) -> None:
    """Keep, per property not yet violated, the first "bad" record in the local
    engine's order (its key: discovering parent's rank, successor index, step
    checks after state checks)."""
    for _, name, why, _, fp, idx in sorted((r for r in records if r[0] == "bad"), key=lambda r: (r[3], r[1])):
        violations.setdefault(name, (why, fp, idx))


def _route(visited, fp0, fp) -> list:
    """The successor indices leading from the initial state to ``fp``."""
    chain = []
    while fp != fp0:
        parent, idx = visited.lookup(fp)[0][:2]
        chain.append(idx)
        fp = parent
    return chain[::-1]


def _violation(system, canonical, visited, init, fp0, name, why, fp, idx) -> Violation:
    path = replay(system, canonical, init, _route(visited, fp0, fp))
    if idx is not None:  # a step violation: one more transition
        path.append(system.successors(path[-1][1])[idx])
    return Violation(name, why, concrete(system, canonical, path))


def _liveness(system, canonical, visited, init, fp0, live_props, edges, fair) -> list:
    """Decide liveness on the driver over the collected transition graph, states
    numbered by rank and edges added in the local engine's order."""
    rows = [(fp, extra) for _, fp, extra in sorted(visited.map(lambda kv: (kv[1][2], kv[0], kv[1][3:])).collect())]
    index = {fp: i for i, (fp, _) in enumerate(rows)}
    graph = Graph()
    for src, _, dst, cls, marks in sorted(edges, key=lambda e: (e[0], e[1])):
        graph.add(src, index[dst], cls, marks)
    cache: dict = {}

    def path_to(i):
        return replay(system, canonical, init, _route(visited, fp0, rows[i][0]))

    def state_at(i):
        if i not in cache:
            cache[i] = path_to(i)[-1][1]
        return cache[i]

    goal_names = [p.name for p in live_props if p.goal]

    def goal_of(p):
        if not p.goal:
            return bytearray(b"\x01") * len(rows)
        k = goal_names.index(p.name)
        return bytearray(1 if extra[0][k] else 0 for _, extra in rows)

    return decide_liveness(system, live_props, graph, goal_of, lambda p: [extra[1] for _, extra in rows],
                           state_at, lambda i: concrete(system, canonical, path_to(i)), path_to, canonical,
                           fair, identify=fingerprint)
