"""Partitioned breadth-first exploration: ``rebalance check --workers N`` (N
forked processes) and the Spark engine's partition owners (checker/engines/spark.py).

The Group and Proc values that cross between processes are named by stable
keys (``Components``: 64 bits of BLAKE2b over their encoding, the same in every
process and on every machine, unlike Python's salted ``hash()``), and the state
space is split among N *owners* by the key of a value of each state's Group
(``Components.owners``): the refinement's view of it when that is checked, the
Group itself otherwise, so that the memos keyed by a Group, or by that view,
fill on one owner only. An owner expands its
frontier as the local engine does (checker/engines/explore.py): its own
``Interner`` gives every Group and Proc a dense local id, successors are
renamed and refinement-checked by those ids, and a state is a row of them. It
keeps, for the states it owns, a visited table (``FingerprintSet`` of the
local engine's fingerprints of id rows, ``fold``, in its own ids; the other
owners' rows are translated to them first: the local engine's 64-bit odds,
``Result.collision_probability``) and parent links. Per BFS level the owners
exchange successors in one batch per destination, deduplicated locally first
(each expanded batch's, then the level's): discovery keys and id rows as numpy arrays, with the
definitions of the components the destination has not been sent yet
(``Components``: a component dictionary grown per level, so a Group or Proc
crosses to an owner once, not once per state); and they gather small summaries
so that every owner takes the same decisions (stop, limits) at the same level
end.

Every state gets its *rank*: its place in the local engine's breadth-first
order (checker/engines/explore.py). A state reached several times keeps the
discovery with the smallest (parent rank, successor index), the local engine's
first; a level's new states are ranked by that pair (each owner learns the
others' sorted keys and counts those below its own). So distinct states,
transitions, depth, verdicts, counterexamples and the liveness graph are those
of the local engine, state for state.

At the end the driver gathers only counters, the parent links (rank -> parent
rank, successor index), the first violation of each property and, for liveness,
the transitions between ranks (``--workers``: each owner's in a file that the driver
reads a level at a time as it is written, checker/engines/gathered.py); it rebuilds counterexamples by replaying
the successor indices from the initial state, and decides liveness as the local
engine does (``explore.decide_liveness``) on the gathered graph.
"""
from __future__ import annotations

import gc
import hashlib
import marshal
import multiprocessing
import os
import pickle
import sys
import tempfile
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
from rebalance.model.consumer_group import (
    assignors as cg_assignors, classic_members, coordinator as cg_coordinator, group as cg_group, membership, messages,
    migration, reconciliation, timing,
)

from .. import system as system_module
from ..system import State, System, build
from .explore import (
    UNFAIR_KINDS, Result, Violation, concrete, conclude, cycles_uncollected, decide_liveness, fairness_class, marks_of,
    replay,
)
from .guards import Guard, exploration_mmap_threshold, map_large_blocks, release_free_heap
from .interning import FingerprintSet, IntMap, Interner, LazyStates, _intern, collision_probability, fold, grown
from .liveness import Graph, _np
from .gathered import Gathering, Levels, read_level
from .renaming import Renamer
from .level import BATCH, Level, cat
from .steps import Steps, goal_holds


def _registry() -> tuple:
    """The NamedTuple and IntEnum classes a state is made of, in a fixed order
    (module, name): the type codes ``_flat`` writes, the same in every process."""
    found = []
    for module in (protocol, assignors, coordinator, member, system_module, messages, cg_group, membership,
                   reconciliation, cg_assignors, timing, cg_coordinator, classic_members, migration):
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


def _encoding(value) -> bytes:
    """A value's encoding: marshal version 2 of ``_flat`` (no back-references, so equal
    values give equal bytes whatever their object identity)."""
    return marshal.dumps(_flat(value), 2)


def _stable_key(blob: bytes) -> int:
    """A component's key, the same in every process and on every machine: 64 bits of
    BLAKE2b over its encoding (``_encoding``)."""
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little", signed=True)


class Components:
    """An owner's dictionary of the Group and Proc values its states are made of, kept on
    its ``Interner`` (checker/engines/interning.py: dense local ids): each canonical
    component's stable key (``_stable_key``) computed once, when the component is first
    sent (``definitions``) or placed by (``owners``), not for every component met (of
    some 63,000 Groups an owner met at --partitions 16, 14,000 were ever sent); the
    components already sent to each other owner, and per other owner the translation of
    its local ids to this one's. A state crosses between owners as a row of local ids;
    the first state that uses a component sends its definition ``(id, key, encoding)``
    along, and the receiver decodes it only if it does not know the key yet, and takes
    the key with it rather than hashing the encoding again. A component's encoding is
    kept only while another owner may still need it (``held``): not once it was sent to
    or received from every other owner, and a Group goes only to its owner (``owners``),
    so no other ever needs it; an owner that holds a component gets its definition
    without the encoding, which it knows by its key. (The encodings of every component
    were 57 MB in each of two owners at --partitions 16.) (Two of c distinct components
    share a key with probability about c^2 / 2^65: 7e-13 for the main job's some 5,000.)"""

    def __init__(self, interner: Interner, k: int, me: int = 0, partition=None):
        self.interner = interner
        self.k, self.me = k, me
        self.partition = partition  # Group -> the value its states are placed by (``owners``), or None
        self._owners = np.zeros(0, np.int64)  # Group id -> its owner (-1: not known yet)
        self._by_part: dict = {}  # partition value -> its owner (far fewer than Groups: 718 on the main job)
        self.values = (interner.groups, interner.procs)
        self.intern = (interner.group_id, interner.proc_id)
        self.blobs: tuple = ({}, {})  # local id -> encoding, while an owner may still need it
        self.keys = [np.zeros(0, np.int64), np.zeros(0, np.int64)]
        self.known = [np.zeros(0, bool), np.zeros(0, bool)]  # whether keys[kind][id] is computed
        self.by_key = (IntMap(), IntMap())  # stable key -> local id (as dicts: 20 MB an owner at --partitions 16)
        self.sent = [[np.zeros(0, bool), np.zeros(0, bool)] for _ in range(k)]
        # per owner: whether it holds the value or never needs it (sent or received; this owner's own: all True)
        self.held = [[np.zeros(0, bool), np.zeros(0, bool)] for _ in range(k)]
        self.trans = [[np.zeros(0, np.int64), np.zeros(0, np.int64)] for _ in range(k)]

    def _grow(self, kind: int) -> tuple:
        """``(keys, known)`` of ``kind``, and its ``sent`` and ``held`` tables, as long as its interned values."""
        n = len(self.values[kind])
        if len(self.keys[kind]) < n:
            grow = n - len(self.keys[kind])
            self.keys[kind] = np.concatenate([self.keys[kind], np.zeros(grow, np.int64)])
            self.known[kind] = np.concatenate([self.known[kind], np.zeros(grow, bool)])
            for j, (sent, held) in enumerate(zip(self.sent, self.held)):
                sent[kind] = np.concatenate([sent[kind], np.zeros(grow, bool)])
                held[kind] = np.concatenate([held[kind], np.full(grow, j == self.me)])
        return self.keys[kind], self.known[kind]

    def _keyed(self, kind: int, ids: list, keys: list, blobs: list) -> None:
        """Record the stable keys of local ids ``ids``, and keep the encodings that an
        owner may still need."""
        at = np.array(ids, np.int64)
        got = np.array(keys, np.int64)
        table, known = self._grow(kind)
        table[at], known[at] = got, True
        self.by_key[kind].resolve(got, lambda _, firsts: at[firsts])  # a key known already keeps its id
        if kind == 0:  # a Group goes only to its owner
            owner = self.owners(at)
            for j, held in enumerate(self.held):
                held[0][at[owner != j]] = True
        pending = ~np.logical_and.reduce([held[kind][at] for held in self.held])
        kept = self.blobs[kind]
        for i, b, p in zip(ids, blobs, pending.tolist()):
            if p:
                kept[i] = b

    def keys_of(self, kind: int, ids: np.ndarray) -> np.ndarray:
        """The stable keys of local ids ``ids`` (any shape), computed once each."""
        keys, known = self._grow(kind)
        new = np.unique(ids[~known[ids]]).tolist()
        if new:
            blobs = [_encoding(self.values[kind][i]) for i in new]
            self._keyed(kind, new, [_stable_key(b) for b in blobs], blobs)
        return self.keys[kind][ids]

    def owners(self, ids: np.ndarray) -> np.ndarray:
        """The owner of each Group of local ids ``ids``: the unsigned stable key of its
        ``partition`` value (``_stable_key``; without one, of the Group itself) modulo
        the owners' count, computed once per value and looked up once per Group.
        States whose Groups share that value are one owner's, so that the memos keyed
        by it fill on that owner alone: by the Group, the coordinator's steps; by the
        refinement's view of the coordinator (checker/refinement.py
        ``Refinement.owner_part``, which keeps Groups apart where any such memo does),
        the refinement's verdicts and Inv."""
        if self.partition is None:
            return _owner_of(self.keys_of(0, ids), self.k)
        self._owners = grown(self._owners, len(self.values[0]), -1)
        for i in np.unique(ids[self._owners[ids] < 0]).tolist():
            part = self.partition(self.values[0][i])
            owner = self._by_part.get(part)
            if owner is None:
                key = _stable_key(_encoding(part))
                owner = self._by_part[part] = int(_owner_of(np.array([key], np.int64), self.k)[0])
            self._owners[i] = owner
        return self._owners[ids]

    def fingerprint(self, state: State) -> int:
        """One state's stable fingerprint (``fold`` of its components' stable keys and its
        faults left): the key of a shape in the churn search (checker/engines/churn.py
        ``identify``), the same in the driver and in every owner."""
        ids = self.interner.ids(state)
        columns = [*self.keys_of(0, np.array(ids[:1])), *self.keys_of(1, np.array(ids[1:-1])), ids[-1]]
        return int(fold(np.array([columns], np.int64))[0])

    def _held(self, j: int, kind: int, ids: np.ndarray) -> None:
        """Mark local ids ``ids`` as held by owner ``j``; drop the encodings no owner still needs."""
        self.held[j][kind][ids] = True
        done = np.logical_and.reduce([held[kind][ids] for held in self.held])
        kept = self.blobs[kind]
        for i in ids[done].tolist():
            kept.pop(i, None)

    def definitions(self, j: int, rows: np.ndarray) -> tuple:
        """Per kind, ``(ids, keys, encodings)`` of the components of ``rows`` not yet
        sent to owner ``j`` (an encoding empty if ``j`` holds it), keyed here if
        they were not yet (``keys_of``)."""
        out = []
        for kind, ids in ((0, rows[:, 0]), (1, rows[:, 1:-1])):
            self._grow(kind)
            sent = self.sent[j][kind]
            new = np.unique(ids[~sent[ids]])
            sent[new] = True
            out.append((new, self.keys_of(kind, new), [self.blobs[kind].get(i, b"") for i in new.tolist()]))
            self._held(j, kind, new)
        return tuple(out)

    def learn(self, j: int, definitions: tuple) -> None:
        """Owner ``j``'s new component definitions (``definitions``): its ids mapped to local ones."""
        for kind, (ids, keys, blobs) in enumerate(definitions):
            if not len(ids):
                continue
            trans = self.trans[j][kind]
            top = int(ids.max()) + 1
            if len(trans) < top:
                trans = self.trans[j][kind] = np.concatenate([trans, np.full(top - len(trans), -1, np.int64)])
            intern = self.intern[kind]
            new: tuple = ([], [], [])  # the components decoded here: local ids, keys (they come with them), encodings

            def decode(unknown, firsts, intern=intern, new=new, blobs=blobs):
                for key, f in zip(unknown, firsts):
                    for column, x in zip(new, (intern(_unflat(marshal.loads(blobs[f]))), key, blobs[f])):
                        column.append(x)
                return new[0][len(new[0]) - len(firsts):]
            trans[ids] = self.by_key[kind].resolve(keys, decode)
            if new[0]:
                self._keyed(kind, *new)
            self._grow(kind)
            self._held(j, kind, trans[ids])

    def translate(self, j: int, rows: np.ndarray) -> np.ndarray:
        """Owner ``j``'s id rows in local ids."""
        out = np.empty_like(rows)
        out[:, 0] = self.trans[j][0][rows[:, 0]]
        out[:, 1:-1] = self.trans[j][1][rows[:, 1:-1]]
        out[:, -1] = rows[:, -1]
        return out


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


def _checks(system: System, names) -> tuple:
    """The properties and covers named ``names`` of ``system``'s protocol (properties.py
    ``_table``: the classic protocols', KIP-848's or its online migration's)."""
    from ..properties import _table
    return ([p for p in _table(system, "PROPERTIES") if p.name in names],
            [c for c in _table(system, "COVERS") if c.name in names])


def _first(found: dict, name: str, record: tuple) -> None:
    """Keep, per property, the violation the local engine meets first (smallest key)."""
    if name not in found or record[0] < found[name][0]:
        found[name] = record


@cycles_uncollected()
def run_owner(job: Job, mesh: Mesh, report=None, keep: list | None = None, levels: Levels | None = None) -> dict:
    """``_explore`` with the cyclic garbage collector off (explore.py ``cycles_uncollected``) and
    large blocks mapped (guards.py ``map_large_blocks``). ``keep``, if given, gets the
    exploration's memos, so that they outlive it (``_worker``); ``levels``, if given, gets
    the owner's levels of edges (``_explore``; by default, an unnamed file's)."""
    map_large_blocks(exploration_mmap_threshold(0))
    return _explore(job, mesh, report, keep, Levels() if levels is None else levels)


def _first_seen(fps: np.ndarray) -> tuple:
    """``(positions, place)``: the positions in ``fps`` (int64) of each distinct
    fingerprint's first occurrence, in the order of those occurrences, and each
    fingerprint's place among them."""
    _, first, inverse = np.unique(fps, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    place = np.empty(len(order), np.int64)
    place[order] = np.arange(len(order))
    return first[order], place[inverse.reshape(-1)]


def _owner_of(group_keys: np.ndarray, k: int) -> np.ndarray:
    """The owner of each of ``group_keys``, stable keys (``_stable_key``): its
    unsigned value modulo ``k`` (``Components.owners``)."""
    return (group_keys.view(np.uint64) % np.uint64(k)).astype(np.int64)


def _explore(job: Job, mesh: Mesh, report, keep: list | None, edges: Levels) -> dict:
    """One owner's part of the exploration (module docstring), in lockstep with the
    others through ``mesh``. ``report(distinct, transitions, frontier, depth)``, if
    given, is called after each level; ``keep``, if given, gets the memos (the
    system, its interner, the level's and the checks' memos, the components), which
    are then not freed on return. For liveness, each level's transitions go to
    ``edges`` (src rank, dst rank, class code, marks; by src rank, a state's in
    successor order: each state is expanded in one level by one owner). Returns
    the run's counters and first violations (the same on every owner) and this
    owner's parent links, and for liveness ``edges``, the class keys by code, and
    its states' goal bits and churn summaries."""
    system = build(*job.spec)
    interner = system.interner = Interner()  # the local engine's successor path: ids, renaming and refinement by id
    canonical = Renamer().canonical
    props, covers = _checks(system, job.names)
    place = {p.name: i for i, p in enumerate(props)}
    state_checks = [(p.name, p.invariant) for p in props if p.invariant]
    step_checks = [(p.name, p.step) for p in props if p.kind == "invariant" and p.step]
    quiescent = [(p.name, p.check) for p in props if p.kind == "quiescent"]
    live_props = [p for p in props if p.kind == "liveness"]
    stepping = Steps(system, interner, state_checks, step_checks, covers, marks_of(live_props))
    goal_checks = [goal_holds(system, p.goal, interner) for p in live_props if p.goal]
    churn = next((p.lasso for p in live_props if p.lasso), None)
    guard = Guard(job.max_seconds, job.max_memory_mb)
    me, k = mesh.me, mesh.k
    # states placed by the refinement's view of their Group when it is checked (``Components.owners``)
    partition = next((p.step.partition(system) for p in props if hasattr(p.step, "partition")), None)
    components = Components(interner, k, me, partition)
    with_graph = job.liveness

    visited = FingerprintSet()  # this owner's states' fingerprints -> local index
    ranks, parents, steps = array("i"), array("i"), array("i")  # per local index
    goals = bytearray()  # per local index, per liveness goal: 1 where it holds
    churn_rows: list = []  # per local index, with a churn search: its churn summary
    classes: dict = {}  # fairness class -> code
    class_keys: list = []  # code -> fairness class

    def own(new_ranks: np.ndarray, rows: np.ndarray, keys: np.ndarray, found: dict) -> None:
        """Take the new states with these ranks, id rows and discovery keys (-1: the
        initial state's): their links, their invariants and, for liveness, their goal
        bits (each projected goal decided once per distinct projection, as the local
        engine does) and churn summaries."""
        states = LazyStates(interner, rows)
        ranks.frombytes(new_ranks.astype(np.int32).tobytes())
        parents.frombytes(np.where(keys >= 0, keys >> IDX_BITS, -1).astype(np.int32).tobytes())
        steps.frombytes(np.where(keys >= 0, keys & IDX_MASK, -1).astype(np.int32).tobytes())
        for j, part, name, why in stepping.invalid(rows, states):
            key = int(keys[j])
            at = (key >> IDX_BITS, key & IDX_MASK) if key >= 0 else (-1, -1)
            _first(found, name, ((*at, part), why, int(new_ranks[j]), None))
        if with_graph:
            bits = np.empty((len(rows), len(goal_checks)), np.uint8)
            for c, g in enumerate(goal_checks):
                bits[:, c] = g(rows, states.__getitem__)
            goals.extend(bits.tobytes())
            if churn is not None:
                for i in range(len(rows)):
                    form, served, bounces = churn.summary(system, states[i])
                    churn_rows.append((None if form is None else components.fingerprint(form), served, bounces))

    violations: dict = {}  # property -> (order, reason, rank, successor index or None)
    init = canonical(system.initial())
    init_ids = interner.ids(init)
    width = len(init_ids)
    fp0 = fold(np.array([init_ids], np.int64))
    home = int(components.owners(np.array([init_ids[0]]))[0])
    found: dict = {}
    level = Level(system, interner, stepping, UNFAIR_KINDS, fairness_class,
                  (lambda key: _intern(classes, class_keys, key)) if with_graph else None)
    frontier = (np.empty(0, np.int64), np.empty((0, width), np.int64))  # ranks, id rows
    if home == me:
        visited.resolve(fp0, 0)
        init_row = np.array([init_ids], np.int64)
        frontier = (np.zeros(1, np.int64), init_row)
        own(frontier[0], init_row, np.array([-1]), found)
    for name, record in sorted(mesh.allgather(found)[home].items(), key=lambda x: place[x[0]]):
        violations[name] = record
        stepping.drop(name)
    stop = any(n in job.stop_on for n in violations)
    distinct, transitions, depth, pending = 1, 0, 0, 1
    kinds: Counter = Counter()
    reached: set = set()
    limit = None
    while pending and not stop:
        if job.max_depth is not None and depth >= job.max_depth:
            limit = f"max_depth {job.max_depth}"
            break
        found = {}
        fired: Counter = Counter()
        covered = stepping.reached = []  # the covers this owner met on this level
        moves = 0
        hit_limit = None
        f_ranks, f_rows = frontier
        # per batch, its distinct successors to other states: fingerprints, canonical rows, keys; the edges
        c_fps, c_rows, c_keys, level_edges = [], [], [], []
        offset = 0  # the batches' distinct successors so far
        for lo in range(0, len(f_ranks), BATCH):
            hit_limit = guard.exceeded()
            if hit_limit:
                break
            states = LazyStates(interner, f_rows[lo:lo + BATCH])
            batch = level.expand(states.rows, states)
            moves += len(batch.src)
            fired.update(batch.kinds)
            rank = f_ranks[lo:lo + BATCH][batch.src]
            for t, name, why in batch.broken:  # violated ones are dropped
                found[name] = ((int(rank[t]), int(batch.index[t]), 1), why, int(rank[t]), int(batch.index[t]))
            for j in np.flatnonzero(~batch.moved).tolist():
                for name, check in quiescent:
                    if name not in violations and name not in found:
                        why = check(system, states[j])
                        if why:
                            r = int(f_ranks[lo + j])
                            found[name] = ((r, QUIESCENT, 1), why, r, None)
            # the batch's distinct successors to other states, told apart by the fingerprints of their id
            # rows (as the local engine's and the owners' visited tables tell them apart), each with its
            # first discovery's key
            live = ~batch.stutter
            b_rows = batch.canonical[live]
            b_fps = fold(b_rows)
            pick, b_place = _first_seen(b_fps)
            c_fps.append(b_fps[pick])
            c_rows.append(b_rows[pick])
            c_keys.append((rank[live] << IDX_BITS | batch.index[live])[pick])
            if with_graph:  # b_place, offset to the level's list of batches' distinct successors
                level_edges.append((rank, live, b_place + offset, batch.classes, batch.marks))
            offset += len(pick)
        # this level's distinct successors, in the order first generated
        fps = cat(c_fps, np.int64)
        pick, of_cand = _first_seen(fps)
        fps = fps[pick]
        rows = cat(c_rows, np.int64, (0, width))[pick]
        keys = cat(c_keys, np.int64)[pick]
        e_src, e_pos, e_cls, e_marks = [], [], [], []
        for rank, live, b_place, cls, marks in level_edges:
            pos = np.full(len(rank), -1, np.int64)  # each edge's successor's place in the level's (-1: a stutter)
            pos[live] = of_cand[b_place]
            e_src.append(rank), e_pos.append(pos), e_cls.append(cls)
            e_marks.append(np.where(live, marks, 0))
        del c_fps, c_rows, c_keys, of_cand
        dest = components.owners(rows[:, 0])
        by_dest = np.argsort(dest, kind="stable")
        bounds = np.searchsorted(dest[by_dest], np.arange(k + 1))
        out = []
        for j in range(k):
            sel = by_dest[bounds[j]:bounds[j + 1]]
            out.append((fps[sel], keys[sel], rows[sel]) if j == me else pickle.dumps(
                (keys[sel], rows[sel], components.definitions(j, rows[sel])), protocol=pickle.HIGHEST_PROTOCOL))
        incoming = []
        for j, got in enumerate(mesh.exchange(out)):
            if j != me:  # another owner's rows, in its local ids: fingerprinted here once in this one's
                got_keys, got_rows, definitions = pickle.loads(got)
                components.learn(j, definitions)
                got_rows = components.translate(j, got_rows)
                got = (fold(got_rows), got_keys, got_rows)
            incoming.append(got)
        sizes = [len(f) for f, _, _ in incoming]
        all_fps = np.concatenate([f for f, _, _ in incoming])
        all_keys = np.concatenate([x for _, x, _ in incoming])
        all_rows = np.concatenate([r for _, _, r in incoming])
        del incoming
        by_key = np.argsort(all_keys, kind="stable")  # the first discovery of a state is its smallest key
        dst, fresh = visited.resolve(all_fps[by_key], len(ranks))
        new = by_key[fresh]  # the new states, in key order (their local indices: len(ranks), ...)
        new_keys = all_keys[new]
        summaries = mesh.allgather((new_keys, moves, fired, covered, found, hit_limit))
        below = np.arange(distinct, distinct + len(new_keys), dtype=np.int64)  # its rank: those below it anywhere
        for j, other in enumerate(summaries):
            if j != me:
                below += np.searchsorted(other[0], new_keys)
        found = {}
        new_rows = all_rows[new]
        frontier = (below, new_rows)
        own(below, new_rows, new_keys, found)
        del all_rows, new
        release_free_heap()
        if with_graph:  # every successor's rank, back to the owner that sent it
            got_rank = np.empty(len(all_keys), np.int32)
            got_rank[by_key] = _np(ranks, np.int32)[dst]
            offsets = np.cumsum([0, *sizes])
            replies = [got_rank[offsets[j]:offsets[j + 1]] for j in range(k)]
            back = mesh.exchange([r if j == me else r.tobytes() for j, r in enumerate(replies)])
            cand_rank = np.empty(len(keys), np.int32)
            for j, r in enumerate(back):
                cand_rank[by_dest[bounds[j]:bounds[j + 1]]] = r if j == me else np.frombuffer(r, np.int32)
            src, pos = cat(e_src, np.int32), cat(e_pos, np.int32)
            edges.append((src, np.where(pos >= 0, cand_rank[pos], src), cat(e_cls, np.uint16), cat(e_marks, np.uint8)),
                         class_keys)
        records = [(r, name) for summary in summaries for name, r in summary[4].items()]
        records += [(r, name) for found_here in mesh.allgather(found) for name, r in found_here.items()]
        for r, name in sorted(records, key=lambda x: (x[0][0], place[x[1]])):  # ties: in the properties' order
            violations.setdefault(name, r)
        pending = sum(len(summary[0]) for summary in summaries)
        for summary in summaries:
            transitions += summary[1]
            kinds.update(summary[2])
            reached.update(summary[3])
        stepping.pending = [c for c in stepping.pending if c.name not in reached]
        for name in violations:
            stepping.drop(name)
        distinct += pending
        map_large_blocks(exploration_mmap_threshold(distinct))
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
    if keep is not None:
        keep.append((system, interner, level, stepping, components, visited))
    return {"distinct": distinct, "transitions": transitions, "depth": depth, "kinds": kinds,
            "reached": reached, "violations": violations, "limit": limit, "stop": stop,
            "links": (ranks.tobytes(), parents.tobytes(), steps.tobytes()),
            "edges": edges,
            "classes": class_keys, "live": (bytes(goals), churn_rows if churn is not None else None)}


def gather(system: System, properties, covers, results: list, t0: float, fair=None,
           gathering: Gathering | None = None, workers: int = 1) -> Result:
    """The Result of an exploration from its owners' ``run_owner`` answers: the
    counterexamples replayed from the parent links, liveness decided on the
    gathered graph as the local engine does: ``gathering``'s, or, if None, one
    gathered here from the answers' levels of edges and class keys; its trimming
    passes in ``workers`` processes of this machine (``Graph.workers``)."""
    g = results[0]
    n = g["distinct"]
    parent = np.full(n, -1, dtype=np.int32)
    step = np.full(n, -1, dtype=np.int32)
    for r in results:
        rk, pa, st = (np.frombuffer(x, dtype=np.int32) for x in r["links"])
        parent[rk], step[rk] = pa, st
    canonical = Renamer().canonical
    init = canonical(system.initial())

    def path_to(i: int) -> list:
        chain = []
        while i > 0:
            chain.append(int(step[i]))
            i = int(parent[i])
        return replay(system, canonical, init, chain[::-1])

    found = []
    for name, (_, why, rank, idx) in g["violations"].items():
        path = path_to(rank)
        if idx is not None:  # a step violation: one more transition, before renaming
            path.append(system.successors(path[-1][1])[idx])
        found.append(Violation(name, why, concrete(system, canonical, path)))
    live_props = [p for p in properties if p.kind == "liveness"]
    if live_props and g["limit"] is None and not g["stop"]:
        if gathering is None:
            gathering = Gathering(len(results))
            for at, level in enumerate(zip(*(r["edges"] for r in results), strict=True)):
                for j, (r, columns) in enumerate(zip(results, level)):
                    gathering.add(j, columns, r["classes"] if at == 0 else ())
        for r in results:  # the gathered levels, once in the graph's files
            r["edges"] = ()
        found.extend(_liveness(system, canonical, live_props, results, n, path_to, fair, gathering.graph(workers)))
    result = conclude(properties, found, g["limit"], g["stop"], n, g["transitions"], g["depth"], t0,
                      Counter({a: c for a, c in g["kinds"].items() if c}),
                      {c.name: c.name in g["reached"] for c in covers})
    result.collision_probability = collision_probability(n, g["transitions"] + 1)
    return result


def _liveness(system, canonical, live_props, results, n: int, path_to, fair, graph: Graph) -> list:
    """Liveness on the gathered graph (``Gathering.graph``): states numbered by rank,
    transitions added in (src rank, successor index) order, as the local engine
    numbers and adds them."""
    goal_names = [p.name for p in live_props if p.goal]
    goals = np.ones((n, len(goal_names)), np.uint8)  # by rank, per goal: 1 where it holds
    churn: list = [None] * n  # by rank: the churn summary, if a property has a churn search
    for r in results:
        rank = np.frombuffer(r["links"][0], np.int32)
        goals[rank] = np.frombuffer(r["live"][0], np.uint8).reshape(len(rank), len(goal_names))
        if r["live"][1] is not None:
            for i, summary in zip(rank.tolist(), r["live"][1]):
                churn[i] = summary
    cache: dict = {}

    def state_at(i):
        if i not in cache:
            cache[i] = path_to(i)[-1][1]
        return cache[i]

    def goal_of(p):
        return bytearray(goals[:, goal_names.index(p.name)].tobytes()) if p.goal else bytearray(b"\x01") * n

    return decide_liveness(system, live_props, graph, goal_of, lambda p: churn, state_at,
                           lambda i: concrete(system, canonical, path_to(i)), path_to, canonical, fair,
                           identify=Components(Interner(), 1).fingerprint)


def _worker(job: Job, me: int, conns: list, result, edges: str) -> None:
    """A forked owner: runs, then sends ("done", answer) or ("error", traceback) on
    ``result``, and exits. Its levels of edges go to the file ``edges``, and each
    level, once written, is told on ``result`` as ("level", (edges, new class
    keys)), so that the driver adds it to the liveness graph while the owners
    explore (``Gathering``). Its memos go with the process: the
    cyclic collector stays off to the end and the memos are kept (``run_owner``'s
    ``keep``) until it exits at once (``os._exit``), for the collector's first pass
    over them after the exploration, and freeing millions of objects one by one,
    cost some 3 of the 119 CPU-s of 2 owners at --partitions 16."""
    gc.disable()
    keep: list = []
    try:
        report = (lambda *figures: result.send(("progress", figures))) if me == 0 else None
        levels = Levels(edges, tell=lambda n, keys: result.send(("level", (n, keys))))
        answer = run_owner(job, Mesh(me, conns), report, keep, levels)
        levels.close()
        result.send(("done", {name: x for name, x in answer.items() if name != "edges"}))
    except BaseException:  # noqa: BLE001 - the driver must hear of it, or its peers wait for ever
        result.send(("error", traceback.format_exc()))
    result.close()
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(0)


def explore_workers(system: System, properties, workers: int, covers=(), max_states=None, max_depth=None,
                    stop_on=frozenset(), fair=None, progress=None, guard=None) -> Result:
    """``explore.explore``'s contract on ``workers`` forked processes (module
    docstring): the same counts, verdicts and counterexamples. Liveness is decided
    in this process on the gathered graph, which it builds while the owners
    explore, its trimming passes shared with ``workers - 1`` forked helpers once
    the owners exited (liveness.py ``_Passes``). ``guard``'s limits apply in every owner (memory: each owner's
    resident set), checked every 256 expanded states.
    Raises RuntimeError if an owner fails (the others are stopped)."""
    t0 = time.perf_counter()
    job = job_for(system, properties, covers, stop_on, max_states, max_depth, guard)
    gathering = Gathering(workers)
    with tempfile.TemporaryDirectory(prefix="rebalance-edges-") as spill:
        answers = _run_owners(job, workers, spill, progress, gathering)
    return gather(system, properties, covers, answers, t0, fair, gathering, workers)


def _run_owners(job: Job, workers: int, spill: str, progress, gathering: Gathering) -> list:
    """Fork ``workers`` owners (``_worker``), their edges written to files in the
    directory ``spill`` and added to ``gathering`` a level at a time as they are
    told; relay owner 0's progress; return their answers once every owner has
    exited. Raises RuntimeError if an owner fails (the others are killed)."""
    ctx = multiprocessing.get_context("fork")
    conns = [[None] * workers for _ in range(workers)]
    for i in range(workers):
        for j in range(i + 1, workers):
            conns[i][j], conns[j][i] = ctx.Pipe()
    results, procs, paths = [], [], []
    for me in range(workers):
        read, write = ctx.Pipe(duplex=False)
        paths.append(os.path.join(spill, f"owner-{me}"))
        procs.append(ctx.Process(target=_worker, args=(job, me, conns[me], write, paths[-1]), daemon=True))
        procs[-1].start()
        write.close()
        results.append(read)
    for row in conns:
        for c in row:
            if c is not None:
                c.close()
    answers: list = [None] * workers
    files: list = [None] * workers  # each owner's edges, read as its levels are told
    try:
        waiting = {c: i for i, c in enumerate(results)}
        while waiting:
            for c in wait(list(waiting)):
                j = waiting[c]
                try:
                    what, body = c.recv()
                except EOFError:
                    raise RuntimeError(f"worker {j} died (exit code {procs[j].exitcode})") from None
                if what == "error":
                    raise RuntimeError(f"worker {j} failed:\n{body}")
                if what == "progress":
                    if progress is not None:
                        progress(*body)
                elif what == "level":
                    files[j] = files[j] or open(paths[j], "rb")
                    gathering.add(j, read_level(files[j], body[0]), body[1])
                else:
                    answers[waiting.pop(c)] = body
    finally:
        for f in files:
            if f is not None:
                f.close()
        for p in procs:
            if p.is_alive() and answers[procs.index(p)] is None:
                p.kill()
            p.join()  # every owner gone, its memos with it, before the graph is loaded
    return answers
