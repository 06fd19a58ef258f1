"""One state representation for the engines (design brief, "One state
representation"): the model's Group and Proc values stay readable NamedTuples,
and the engines hash-cons them into dense integer ids, so that a global state
is a small tuple of ints ``(group id, proc id per client slot, faults left)``.

Each distinct part is hashed once, when first seen; a successor that keeps a
part of its parent (the very same object: most steps change one or two slots)
reuses the parent's id without hashing it again. Memos keyed by these ids (the
renaming's name sets, the refinement check's abstraction) cost a list index
instead of a deep tuple hash.

``FingerprintSet`` is the visited set: 64-bit fingerprints of those id tuples in
sorted numpy arrays, probed and grown one breadth-first level at a time (as TLC's
fingerprint set, with its collision estimate).
"""
from __future__ import annotations

import numpy as np

from ..system import State


class Interner:
    """Dense ids for Group and Proc values: ``ids(state)`` is ``(group id, proc ids...,
    faults left)``; ``state(ids)`` the State back (the very objects first seen)."""

    def __init__(self):
        self.groups: list = []
        self.procs: list = []
        self._group_ids: dict = {}
        self._proc_ids: dict = {}

    def group_id(self, g) -> int:
        return _intern(self._group_ids, self.groups, g)

    def proc_id(self, p) -> int:
        return _intern(self._proc_ids, self.procs, p)

    def ids(self, state: State, base: State | None = None, base_ids: tuple = ()) -> tuple:
        """The id tuple of ``state``; with ``base`` (a state whose ids are ``base_ids``),
        parts that are the very same objects as the base's keep their ids unhashed."""
        if base is None:
            return (self.group_id(state.group), *map(self.proc_id, state.procs), state.faults_left)
        proc_id = self.proc_id
        return (base_ids[0] if state.group is base.group else self.group_id(state.group),
                *[base_ids[k] if p is q else proc_id(p) for k, (p, q) in enumerate(zip(state.procs, base.procs), 1)],
                state.faults_left)

    def state(self, ids: tuple) -> State:
        return State(self.groups[ids[0]], tuple(map(self.procs.__getitem__, ids[1:-1])), ids[-1])


def _intern(ids: dict, values: list, v) -> int:
    """``v``'s dense id in ``ids`` (value -> id), appended to ``values`` when new."""
    i = ids.get(v)
    if i is None:
        i = ids[v] = len(values)
        values.append(v)
    return i


class FingerprintSet:
    """The visited set: ``fingerprint -> state index`` for 64-bit fingerprints, as two
    sorted numpy arrays (8 + 4 bytes a state), looked up and extended a whole
    breadth-first level at once (``resolve``)."""

    def __init__(self):
        self.keys = np.empty(0, np.int64)
        self.index = np.empty(0, np.int32)

    def __len__(self) -> int:
        return len(self.keys)

    def resolve(self, fps: np.ndarray, base: int) -> tuple:
        """For one level's candidate fingerprints ``fps`` (in the order generated):
        ``(index of each candidate's state, positions of the candidates that are new
        states, in the order first generated)``; the new states get the indices
        ``base``, ``base + 1``, ... in that order and are added to the set."""
        uniq, first, inverse = np.unique(fps, return_index=True, return_inverse=True)
        pos = np.searchsorted(self.keys, uniq)
        clipped = np.minimum(pos, max(len(self.keys) - 1, 0))
        found = (pos < len(self.keys)) & (self.keys[clipped] == uniq) if len(self.keys) else np.zeros(len(uniq), bool)
        of_uniq = np.where(found, self.index[clipped] if len(self.keys) else 0, -1).astype(np.int32)
        fresh = np.flatnonzero(~found)
        order = fresh[np.argsort(first[fresh], kind="stable")]  # new states in the order first generated
        of_uniq[order] = np.arange(base, base + len(order), dtype=np.int32)
        self.keys = np.insert(self.keys, pos[fresh], uniq[fresh])
        self.index = np.insert(self.index, pos[fresh], of_uniq[fresh])
        return of_uniq[inverse.reshape(-1)], first[order]


def collision_probability(distinct: int, generated: int) -> float:
    """TLC's "calculated (optimistic)" probability that two of ``distinct`` states
    among ``generated`` fingerprinted ones collided in 64 bits: each of the
    ``generated - distinct`` duplicate hits could have been a new state whose
    fingerprint equals one of the ``distinct`` seen: ``distinct * (generated -
    distinct) / 2**64`` (tlc2.tool.TLC, reportSuccess)."""
    return distinct * max(generated - distinct, 0) / 2.0 ** 64
