"""Partitioned breadth-first exploration: ``rebalance check --workers N`` (N
forked processes) and the Spark engine's partition owners (checker/engines/spark.py).

The state space is split among N *owners* by a stable fingerprint of each
canonical state (``fingerprint``: 64 bits of BLAKE2b over ``encode``, the same in
every process and on every machine, unlike Python's salted ``hash()``). An owner
keeps, for the states it owns, its own visited table (encoded state -> its
rank) and parent links, and expands its own frontier with ``System.successors``
(the local engine's successor function, renamed by the same ``Renamer``). Per
BFS level the owners exchange successors in one batch per destination,
deduplicated locally first, and gather small summaries so that every owner takes
the same decisions (stop, limits) at the same level end.

Every state gets its *rank*: its place in the local engine's breadth-first
order (checker/engines/explore.py). A state reached several times keeps the
discovery with the smallest (parent rank, successor index), the local engine's
first; a level's new states are ranked by that pair (each owner learns the
others' sorted keys and counts those below its own). So distinct states,
transitions, depth, verdicts, counterexamples and the liveness graph are those
of the local engine, state for state.

At the end the driver gathers only counters, the parent links (rank -> parent
rank, successor index), the first violation of each property and, for liveness,
the transitions between ranks; it rebuilds counterexamples by replaying the
successor indices from the initial state, and decides liveness as the local
engine does (``explore.decide_liveness``) on the gathered graph.
"""
from __future__ import annotations

import gc
import hashlib
import heapq
import marshal
import multiprocessing
import pickle
import threading
import time
import traceback
from array import array
from collections import Counter
from dataclasses import dataclass
from enum import IntEnum
from multiprocessing.connection import wait

import numpy as np

from rebalance.model import assignors, coordinator, member, protocol

from .. import system as system_module
from ..system import State, System
from .explore import (
    UNFAIR_KINDS, Result, Violation, concrete, conclude, decide_liveness, fairness_class, mark, marks_of,
)
from .guards import Guard
from .liveness import Graph
from .renaming import Renamer


def _registry() -> tuple:
    """The NamedTuple and IntEnum classes a state is made of, in a fixed order
    (module, name): the type codes ``encode`` writes, the same in every process."""
    found = []
    for module in (protocol, assignors, coordinator, member, system_module):
        for name, cls in sorted(vars(module).items()):
            if isinstance(cls, type) and cls.__module__ == module.__name__ and (
                    (issubclass(cls, tuple) and hasattr(cls, "_fields")) or issubclass(cls, IntEnum)):
                found.append(cls)
    return tuple(found)


TYPES = _registry()
CODES = {cls: i for i, cls in enumerate(TYPES)}
ENUMS = {i: {m.value: m for m in cls} for i, cls in enumerate(TYPES) if issubclass(cls, IntEnum)}


def _flat(obj):
    """Plain tuples become lists, a NamedTuple ``(code, fields...)``, an IntEnum ``(code, value)``."""
    t = type(obj)
    if t is int or t is str or t is bool or obj is None or t is bytes:
        return obj
    if t is tuple:
        return [_flat(x) for x in obj]
    code = CODES.get(t)
    if code is None:
        raise TypeError(f"cannot encode a {t.__name__} in a state (checker/engines/workers.py TYPES)")
    if code in ENUMS:
        return (code, int(obj))
    return (code, *[_flat(x) for x in obj])


def _unflat(obj):
    t = type(obj)
    if t is list:
        return tuple([_unflat(x) for x in obj])
    if t is tuple:
        code = obj[0]
        enum = ENUMS.get(code)
        if enum is not None:
            return enum[obj[1]]
        return tuple.__new__(TYPES[code], [_unflat(x) for x in obj[1:]])
    return obj


class Codec:
    """States to bytes and back, component by component: a state is encoded as its
    Group's and each Proc's encodings (memoised by value in this process: they
    recur across many states, as the handler memos in checker/system.py find) and
    its faults left. Equal states give equal bytes in any process, since each part
    is marshal version 2 of ``_flat`` (no back-references, so object identity does
    not show). The memos are dropped past ``MEMO`` entries."""

    MEMO = 1 << 18

    def __init__(self):
        self._enc: dict = {}
        self._dec: dict = {}

    def _part(self, x) -> bytes:
        b = self._enc.get(x)
        if b is None:
            if len(self._enc) > self.MEMO:
                self._enc.clear()
            b = self._enc[x] = marshal.dumps(_flat(x), 2)
        return b

    def _unpart(self, b: bytes):
        x = self._dec.get(b)
        if x is None:
            if len(self._dec) > self.MEMO:
                self._dec.clear()
            x = self._dec[b] = _unflat(marshal.loads(b))
        return x

    def encode(self, state: State) -> bytes:
        """A state's canonical bytes."""
        return marshal.dumps((self._part(state.group), tuple([self._part(p) for p in state.procs]),
                              state.faults_left), 2)

    def decode(self, blob: bytes) -> State:
        """The state ``encode`` wrote."""
        group, procs, faults_left = marshal.loads(blob)
        return State(self._unpart(group), tuple([self._unpart(p) for p in procs]), faults_left)


CODEC = Codec()
encode, decode = CODEC.encode, CODEC.decode


def fingerprint(state) -> int:
    """64 bits of BLAKE2b over ``encode(state)``, signed: the key of a shape in the
    churn search on the gathered graph (checker/engines/churn.py ``identify``)."""
    return int.from_bytes(_digest(encode(state))[:8], "big", signed=True)


def _digest(blob: bytes) -> bytes:
    """A state's key in its owner's visited table: 128 bits of BLAKE2b over its
    encoding. Two of n distinct states share one with probability about
    n^2 / 2^129 (1.5e-21 for a billion states; TLC's 64-bit fingerprints: 5e-2)."""
    return hashlib.blake2b(blob, digest_size=16).digest()


QUIESCENT = 1 << 30  # a quiescent check comes after every successor of its state
IDX_BITS = 20  # a discovery's key: parent rank << IDX_BITS | successor index
IDX_MASK = (1 << IDX_BITS) - 1


class Mesh:
    """Owner ``me`` of ``len(conns)``, with one duplex connection to every other
    owner (``conns[me]`` is None): multiprocessing pipes between forked workers,
    TCP (``multiprocessing.connection``) between Spark tasks."""

    def __init__(self, me: int, conns: list):
        self.me = me
        self.k = len(conns)
        self.conns = conns

    def exchange(self, out: list) -> list:
        """Send ``out[j]`` (bytes) to every owner j and return what each sent here
        (``out[me]`` is passed through as it is). A thread sends while this one
        receives from whichever owner is ready, so no pair of owners waits on each
        other."""
        got = [None] * self.k
        got[self.me] = out[self.me]
        if self.k == 1:
            return got
        sender = threading.Thread(target=lambda: [self.conns[j].send_bytes(out[j]) for j in self._peers()])
        sender.start()
        waiting = {self.conns[j]: j for j in self._peers()}
        while waiting:
            for c in wait(list(waiting)):
                got[waiting.pop(c)] = c.recv_bytes()
        sender.join()
        return got

    def _peers(self) -> list:
        return [(self.me + d) % self.k for d in range(1, self.k)]

    def allgather(self, obj) -> list:
        """Every owner's ``obj``, in owner order (the same list on every owner)."""
        blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        got = self.exchange([obj if j == self.me else blob for j in range(self.k)])
        return [x if j == self.me else pickle.loads(x) for j, x in enumerate(got)]


@dataclass(frozen=True)
class Job:
    """What every owner needs, picklable: the System's arguments (``System.spec``),
    the property and cover names checked, the limits (seconds: wall seconds left
    when the owners start; memory: MB of resident set per owner process)."""

    spec: tuple
    names: frozenset
    stop_on: frozenset
    max_states: int | None
    max_depth: int | None
    max_seconds: float | None
    max_memory_mb: float | None
    liveness: bool


def job_for(system: System, properties, covers, stop_on, max_states, max_depth, guard) -> Job:
    """The Job of an exploration with the local engine's arguments (``explore.explore``)."""
    left = None
    if guard is not None and guard.max_seconds is not None:
        left = guard.max_seconds - (time.perf_counter() - guard.t0)
    return Job(system.spec, frozenset(p.name for p in properties) | {c.name for c in covers}, frozenset(stop_on),
               max_states, max_depth, left, None if guard is None else guard.max_memory_mb,
               any(p.kind == "liveness" for p in properties))


def _checks(names) -> tuple:
    from ..properties import COVERS, PROPERTIES
    return [p for p in PROPERTIES if p.name in names], [c for c in COVERS if c.name in names]


def _first(found: dict, name: str, record: tuple) -> None:
    """Keep, per property, the violation the local engine meets first (smallest key)."""
    if name not in found or record[0] < found[name][0]:
        found[name] = record


def run_owner(job: Job, mesh: Mesh, report=None) -> dict:
    """``_explore`` with the cyclic garbage collector off: states are acyclic
    tuples that reference counting frees, and the collector's passes over the
    owner's tables cost about a tenth of its time."""
    gc.disable()
    try:
        return _explore(job, mesh, report)
    finally:
        gc.enable()


def _explore(job: Job, mesh: Mesh, report=None) -> dict:
    """One owner's part of the exploration (module docstring), in lockstep with the
    others through ``mesh``. ``report(distinct, transitions, frontier, depth)``, if
    given, is called after each level. Returns the run's counters and first
    violations (the same on every owner) and this owner's parent links, and for
    liveness its transitions (src rank, index, dst rank, class, marks) and its
    states' goal bits and churn summaries."""
    system = System(*job.spec)
    canonical = Renamer().canonical
    successors = system.successors
    props, covers = _checks(job.names)
    state_checks = [(p.name, p.invariant) for p in props if p.invariant]
    step_checks = [(p.name, p.step) for p in props if p.kind == "invariant" and p.step]
    quiescent = [(p.name, p.check) for p in props if p.kind == "quiescent"]
    live_props = [p for p in props if p.kind == "liveness"]
    marking = marks_of(live_props)
    goal_checks = [p.goal for p in live_props if p.goal]
    churn = next((p.lasso for p in live_props if p.lasso), None)
    guard = Guard(job.max_seconds, job.max_memory_mb)
    me, k = mesh.me, mesh.k
    with_graph = job.liveness

    index: dict = {}  # digest -> local id
    ranks, parents, steps = array("q"), array("q"), array("q")
    live_rows: list = []  # per local id: (goal bits, churn summary)
    edges: list = []  # (src rank, index, dst rank, class, marks), in (src rank, index) order

    def own(rank: int, d: bytes, s: State, key: int, found: dict) -> None:
        index[d] = len(ranks)
        ranks.append(rank)
        parents.append(key >> IDX_BITS if key >= 0 else -1)
        steps.append(key & IDX_MASK if key >= 0 else -1)
        order = (key >> IDX_BITS, key & IDX_MASK, 0) if key >= 0 else (-1, -1, 0)
        for name, check in state_checks:
            if name not in violations:
                why = check(system, s)
                if why:
                    _first(found, name, (order, why, rank, None))
        if with_graph:
            extra = None
            if churn is not None:
                form, served, bounces = churn.summary(system, s)
                extra = (None if form is None else fingerprint(form), served, bounces)
            live_rows.append((tuple(not g(system, s) for g in goal_checks), extra))

    violations: dict = {}  # property -> (order, reason, rank, successor index or None)
    init = canonical(system.initial())
    blob = encode(init)
    d0 = _digest(blob)
    found: dict = {}
    frontier = []
    if int.from_bytes(d0[:8], "big") % k == me:
        own(0, d0, init, -1, found)
        frontier = [(0, init)]
    for name, record in sorted(mesh.allgather(found).pop(int.from_bytes(d0[:8], "big") % k).items()):
        violations[name] = record
    stop = any(n in job.stop_on for n in violations)
    distinct, transitions, depth, pending = 1, 0, 0, 1
    kinds: Counter = Counter()
    reached: set = set()
    limit = None
    while pending and not stop:
        if job.max_depth is not None and depth >= job.max_depth:
            limit = f"max_depth {job.max_depth}"
            break
        out = [[] for _ in range(k)]  # per owner: (digest, bytes, parent rank, successor index)
        sent: dict = {}  # successor (as generated, and renamed) -> (owner, place in its batch, renamed)
        level_edges = []
        found = {}
        fired: Counter = Counter()
        covered = []
        moves = 0
        hit_limit = None
        for n_done, (rank, s) in enumerate(frontier):
            if not n_done & 255:
                hit_limit = guard.exceeded()
                if hit_limit:
                    break
            moved = False
            for idx, (action, n) in enumerate(successors(s)):
                moves += 1
                fired[action.kind] += 1
                where = sent.get(n)  # seen this level: most successors need no renaming (as explore.py finds)
                c = canonical(n) if where is None else where[2]
                if c == s:  # a stutter
                    if with_graph:
                        level_edges.append((rank, idx, rank, fairness_class(action), 0))
                    continue
                if action.kind not in UNFAIR_KINDS:
                    moved = True
                for name, step in step_checks:
                    if name not in violations and name not in found:
                        why = step(system, s, action, n)
                        if why:
                            found[name] = ((rank, idx, 1), why, rank, idx)
                for cover in covers:
                    if cover.name not in reached and cover.reached(system, s, action, n):
                        reached.add(cover.name)
                        covered.append(cover.name)
                if where is None:
                    where = sent.get(c)
                    if where is None:
                        b = encode(c)
                        d = _digest(b)
                        dest = int.from_bytes(d[:8], "big") % k
                        where = sent[c] = (dest, len(out[dest]), c)
                        out[dest].append((d, b, rank, idx))
                    sent[n] = where
                if with_graph:
                    level_edges.append((rank, idx, where, fairness_class(action),
                                        mark(marking, system, s, action, n)))
            if not moved:
                for name, check in quiescent:
                    if name not in violations and name not in found:
                        why = check(system, s)
                        if why:
                            found[name] = ((rank, QUIESCENT, 1), why, rank, None)
        del sent
        batches = [b if j == me else marshal.dumps(b) for j, b in enumerate(out)]
        incoming = [b if j == me else marshal.loads(b) for j, b in enumerate(mesh.exchange(batches))]
        fresh: dict = {}  # digest -> (key, bytes): the first discovery of each new state
        for batch in incoming:
            for d, b, prank, idx in batch:
                if d not in index:
                    key = prank << IDX_BITS | idx
                    was = fresh.get(d)
                    if was is None or key < was[0]:
                        fresh[d] = (key, b)
        new = sorted((key, d, b) for d, (key, b) in fresh.items())
        del fresh
        keys = np.fromiter((x[0] for x in new), dtype=np.int64, count=len(new))
        summaries = mesh.allgather((keys, moves, fired, covered, found, hit_limit))
        below = np.arange(distinct, distinct + len(keys), dtype=np.int64)  # its rank: those below it anywhere
        for j, other in enumerate(summaries):
            if j != me:
                below += np.searchsorted(other[0], keys)
        found = {}
        nxt = []
        for rank, (key, d, b) in zip(below.tolist(), new):
            s = decode(b)
            own(rank, d, s, key, found)
            nxt.append((rank, s))
        frontier = nxt
        del new
        if with_graph:  # every successor's rank, back to the owner that sent it
            replies = [array("q", [ranks[index[d]] for d, *_ in batch]) for batch in incoming]
            back = mesh.exchange([r if j == me else r.tobytes() for j, r in enumerate(replies)])
            back = [r if j == me else array("q", r) for j, r in enumerate(back)]
            edges.extend(e if type(e[2]) is int else (e[0], e[1], back[e[2][0]][e[2][1]], e[3], e[4])
                         for e in level_edges)
        del incoming
        records = [(r, name) for summary in summaries for name, r in summary[4].items()]
        records += [(r, name) for found_here in mesh.allgather(found) for name, r in found_here.items()]
        for r, name in sorted(records, key=lambda x: (x[0][0], x[1])):
            violations.setdefault(name, r)
        pending = sum(len(summary[0]) for summary in summaries)
        for summary in summaries:
            transitions += summary[1]
            kinds.update(summary[2])
            reached.update(summary[3])
        distinct += pending
        limit = next((summary[5] for summary in summaries if summary[5]), None)
        if limit:
            break
        if pending:
            depth += 1
        if report is not None:
            report(distinct, transitions, pending, depth)
        stop = any(n in job.stop_on for n in violations)
        if not stop and job.max_states is not None and distinct >= job.max_states and pending:
            limit = f"max_states {job.max_states}"
            break
    return {"distinct": distinct, "transitions": transitions, "depth": depth, "kinds": kinds,
            "reached": reached, "violations": violations, "limit": limit, "stop": stop,
            "links": (ranks.tobytes(), parents.tobytes(), steps.tobytes()),
            "edges": edges, "live": (ranks.tobytes(), live_rows) if with_graph else None}


def gather(system: System, properties, covers, results: list, t0: float, fair=None) -> Result:
    """The Result of an exploration from its owners' ``run_owner`` answers: the
    counterexamples replayed from the parent links, liveness decided on the
    gathered graph as the local engine does."""
    g = results[0]
    n = g["distinct"]
    parent = np.full(n, -1, dtype=np.int64)
    step = np.full(n, -1, dtype=np.int64)
    for r in results:
        rk, pa, st = (np.frombuffer(x, dtype=np.int64) for x in r["links"])
        parent[rk], step[rk] = pa, st
    canonical = Renamer().canonical
    init = canonical(system.initial())

    def path_to(i: int) -> list:
        chain = []
        while i > 0:
            chain.append(int(step[i]))
            i = int(parent[i])
        path, s = [(None, init)], init
        for idx in reversed(chain):
            action, nxt = system.successors(s)[idx]
            s = canonical(nxt)
            path.append((action, s))
        return path

    found = []
    for name, (_, why, rank, idx) in g["violations"].items():
        path = path_to(rank)
        if idx is not None:  # a step violation: one more transition, before renaming
            path.append(system.successors(path[-1][1])[idx])
        found.append(Violation(name, why, concrete(system, canonical, path)))
    live_props = [p for p in properties if p.kind == "liveness"]
    if live_props and g["limit"] is None and not g["stop"]:
        found.extend(_liveness(system, canonical, live_props, results, n, path_to, fair))
    return conclude(properties, found, g["limit"], g["stop"], n, g["transitions"], g["depth"], t0,
                    Counter({a: c for a, c in g["kinds"].items() if c}),
                    {c.name: c.name in g["reached"] for c in covers})


def _liveness(system, canonical, live_props, results, n: int, path_to, fair) -> list:
    """Liveness on the gathered graph: states numbered by rank, transitions added in
    (src rank, successor index) order, as the local engine numbers and adds them."""
    graph = Graph()
    for src, _, dst, cls, marks in heapq.merge(*(r["edges"] for r in results), key=lambda e: (e[0], e[1])):
        graph.add(src, dst, cls, marks)
    rows = [None] * n
    for r in results:
        rk, live_rows = r["live"]
        for i, row in zip(np.frombuffer(rk, dtype=np.int64).tolist(), live_rows):
            rows[i] = row
    goal_names = [p.name for p in live_props if p.goal]
    cache: dict = {}

    def state_at(i):
        if i not in cache:
            cache[i] = path_to(i)[-1][1]
        return cache[i]

    def goal_of(p):
        if not p.goal:
            return bytearray(b"\x01") * n
        k = goal_names.index(p.name)
        return bytearray(1 if row[0][k] else 0 for row in rows)

    return decide_liveness(system, live_props, graph, goal_of, lambda p: [row[1] for row in rows], state_at,
                           lambda i: concrete(system, canonical, path_to(i)), path_to, canonical, fair,
                           identify=fingerprint)


def _worker(job: Job, me: int, conns: list, result) -> None:
    """A forked owner: runs, then sends ("done", answer) or ("error", traceback) on ``result``."""
    try:
        report = (lambda *figures: result.send(("progress", figures))) if me == 0 else None
        result.send(("done", run_owner(job, Mesh(me, conns), report)))
    except BaseException:  # noqa: BLE001 - the driver must hear of it, or its peers wait for ever
        result.send(("error", traceback.format_exc()))


def explore_workers(system: System, properties, workers: int, covers=(), max_states=None, max_depth=None,
                    stop_on=frozenset(), fair=None, progress=None, guard=None) -> Result:
    """``explore.explore``'s contract on ``workers`` forked processes (module
    docstring): the same counts, verdicts and counterexamples. Liveness is decided
    in this process on the gathered graph. ``guard``'s limits apply in every owner
    (memory: each owner's resident set), checked every 256 expanded states.
    Raises RuntimeError if an owner fails (the others are stopped)."""
    t0 = time.perf_counter()
    job = job_for(system, properties, covers, stop_on, max_states, max_depth, guard)
    ctx = multiprocessing.get_context("fork")
    conns = [[None] * workers for _ in range(workers)]
    for i in range(workers):
        for j in range(i + 1, workers):
            conns[i][j], conns[j][i] = ctx.Pipe()
    results, procs = [], []
    for me in range(workers):
        read, write = ctx.Pipe(duplex=False)
        procs.append(ctx.Process(target=_worker, args=(job, me, conns[me], write), daemon=True))
        procs[-1].start()
        write.close()
        results.append(read)
    for row in conns:
        for c in row:
            if c is not None:
                c.close()
    answers: list = [None] * workers
    try:
        waiting = {c: i for i, c in enumerate(results)}
        while waiting:
            for c in wait(list(waiting)):
                try:
                    what, body = c.recv()
                except EOFError:
                    raise RuntimeError(f"worker {waiting[c]} died (exit code {procs[waiting[c]].exitcode})") from None
                if what == "error":
                    raise RuntimeError(f"worker {waiting[c]} failed:\n{body}")
                if what == "progress":
                    if progress is not None:
                        progress(*body)
                    continue
                answers[waiting.pop(c)] = body
    finally:
        for p in procs:
            if p.is_alive() and answers[procs.index(p)] is None:
                p.kill()
            p.join()
    return gather(system, properties, covers, answers, t0, fair)
