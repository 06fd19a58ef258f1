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


class LazyStates:
    """The States of a matrix of id rows ((m, w) int64, ``Interner.ids``), each built
    when first asked for (``Interner.state``): most of a batch's are never needed
    as values."""

    def __init__(self, interner: Interner, rows: np.ndarray):
        self.interner, self.rows, self.built = interner, rows, {}

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> State:
        s = self.built.get(i)
        if s is None:
            s = self.built[i] = self.interner.state(tuple(self.rows[i].tolist()))
        return s


def _intern(ids: dict, values: list, v) -> int:
    """``v``'s dense id in ``ids`` (value -> id), appended to ``values`` when new."""
    i = ids.get(v)
    if i is None:
        i = ids[v] = len(values)
        values.append(v)
    return i


class FingerprintSet:
    """The visited set: ``fingerprint -> state index`` for 64-bit fingerprints, looked
    up and extended a whole breadth-first level at once (``resolve``). It is split
    by a fingerprint's top ``BITS`` bits into ``2 ** BITS`` runs, so that no copy
    is of the whole set (a copy of the whole set at every level was 12 bytes a
    state of transient peak). Each run is a main and a recent part, each two sorted
    numpy arrays (8 + 4 bytes a state): a level's new fingerprints are inserted
    into the recent part, merged into the main one once it holds an eighth as
    many, so that a level copies the recent parts, not every fingerprint."""

    BITS = 4

    def __init__(self):
        runs = 1 << self.BITS
        empty = (np.empty(0, np.int64), np.empty(0, np.int32))
        self.main, self.recent = [empty] * runs, [empty] * runs  # per run: (keys, state indices)
        # the smallest fingerprint of runs 1 .. runs - 1, in signed order (run r holds the top bits r - runs / 2)
        self._bounds = (np.arange(1, runs, dtype=np.int64) - runs // 2) << (64 - self.BITS)

    def __len__(self) -> int:
        return sum(len(keys) for keys, _ in self.main + self.recent)

    def resolve(self, fps: np.ndarray, base: int) -> tuple:
        """For one level's candidate fingerprints ``fps`` (int64, in the order
        generated): ``(index of each candidate's state, positions of the candidates
        that are new states, in the order first generated)``; the new states get
        the indices ``base``, ``base + 1``, ... in that order and are added to the set."""
        uniq, first, inverse = np.unique(fps, return_index=True, return_inverse=True)
        cuts = np.searchsorted(uniq, self._bounds).tolist()
        spans = list(zip([0, *cuts], [*cuts, len(uniq)]))  # run r's candidates: uniq[lo:hi]
        of_uniq = np.full(len(uniq), -1, np.int32)
        for (lo, hi), *parts in zip(spans, self.main, self.recent):
            for keys, index in parts:
                if lo < hi and len(keys):
                    at = keys.searchsorted(uniq[lo:hi])
                    hit = keys.take(at, mode="clip") == uniq[lo:hi]
                    of_uniq[lo:hi][hit] = index[at[hit]]
        fresh = (of_uniq < 0).nonzero()[0]
        order = fresh[np.argsort(first[fresh], kind="stable")]  # new states in the order first generated
        of_uniq[order] = np.arange(base, base + len(order), dtype=np.int32)
        ends = np.searchsorted(fresh, [hi for _, hi in spans]).tolist()
        for r, (f_lo, f_hi) in enumerate(zip([0, *ends[:-1]], ends)):
            if f_lo < f_hi:
                new = fresh[f_lo:f_hi]
                (keys, index), (main_keys, main_index) = self.recent[r], self.main[r]
                keys, index = _inserted(keys.searchsorted(uniq[new]), (keys, uniq[new]), (index, of_uniq[new]))
                if len(keys) * 8 > len(main_keys):
                    self.main[r] = tuple(_inserted(main_keys.searchsorted(keys), (main_keys, keys),
                                                   (main_index, index)))
                    keys, index = np.empty(0, np.int64), np.empty(0, np.int32)
                self.recent[r] = (keys, index)
        return of_uniq[inverse.reshape(-1)], first[order]


def collision_probability(distinct: int, generated: int) -> float:
    """TLC's "calculated (optimistic)" probability that two of ``distinct`` states
    among ``generated`` fingerprinted ones collided in 64 bits: each of the
    ``generated - distinct`` duplicate hits could have been a new state whose
    fingerprint equals one of the ``distinct`` seen: ``distinct * (generated -
    distinct) / 2**64`` (tlc2.tool.TLC, reportSuccess)."""
    return distinct * max(generated - distinct, 0) / 2.0 ** 64


class IntMap:
    """An int64 -> int64 memo held as sorted numpy arrays (16 bytes an entry), asked a
    batch of keys at a time: the engines' per-transition memos on packed ids
    (checker/engines/level.py, expansion.py), where a dict lookup per transition
    would be the cost to save. New entries go to a small sorted run, merged into
    the main one once it holds an eighth as many, so that an insertion copies the
    small run, not every entry."""

    def __init__(self):
        self.runs = [(np.empty(0, np.int64), np.empty(0, np.int64))] * 2  # (keys, values): main, recent

    def __len__(self) -> int:
        return sum(len(keys) for keys, _ in self.runs)

    def resolve(self, keys: np.ndarray, compute) -> np.ndarray:
        """The value of each of ``keys`` (int64, any order, repeats allowed); the keys
        not known yet are computed once each, ``compute(distinct new keys ascending,
        the position in ``keys`` of each one's first occurrence) -> their values``
        (lists), and kept."""
        (main_keys, main_values), (recent_keys, recent_values) = self.runs
        if not len(main_keys):
            values, where, missing = np.empty(len(keys), np.int64), np.arange(len(keys)), keys
        else:  # the main run first: most keys are there, and only the others are looked up again
            at = main_keys.searchsorted(keys)
            values = main_values.take(at, mode="clip")
            where = (main_keys.take(at, mode="clip") != keys).nonzero()[0]
            missing = keys[where]
        if len(where) and len(recent_keys):
            at = recent_keys.searchsorted(missing)
            hit = recent_keys.take(at, mode="clip") == missing
            values[where[hit]] = recent_values.take(at[hit])
            where, missing = where[~hit], missing[~hit]
        if len(where):
            new, first = np.unique(missing, return_index=True)
            got = np.array(compute(new.tolist(), where[first].tolist()), np.int64)
            values[where] = got[new.searchsorted(missing)]
            recent = tuple(_inserted(recent_keys.searchsorted(new), (recent_keys, new), (recent_values, got)))
            if len(recent[0]) * 8 > len(main_keys):
                merged_keys = np.concatenate([main_keys, recent[0]])
                order = merged_keys.argsort(kind="stable")
                self.runs = [(merged_keys[order], np.concatenate([main_values, recent[1]])[order]),
                             (np.empty(0, np.int64), np.empty(0, np.int64))]
            else:
                self.runs = [self.runs[0], recent]
        return values


class RowMemo:
    """A memo of a function of rows of small ids (an int64 matrix of ids in ``0 ..
    bound - 1``), asked a batch of rows at a time: while a row's ids fit side by
    side in one int64 (``key_bits // width`` bits each), keyed by them packed, an
    ``IntMap`` entry; past that, by the row's number, which a chain of ``IntMap``
    entries gives it a column at a time (its prefix's number and its next id,
    packed, to the longer prefix's number): exact, 16 bytes an entry, where a
    dict of the rows' tuples held some 250 bytes a row (--partitions 16: 146 MB
    in each of two workers)."""

    key_bits = 63  # the bits of a packed key
    ID_BITS = 31  # past the packed keys: an id's bits in a chain key (a prefix's number takes the other 32)

    def __init__(self):
        self._packed = IntMap()
        self._chain: list = []  # per column after the first: (prefix number, id) -> that longer prefix's number
        self._counts: list = []  # per column after the first: the prefixes numbered
        self._values = np.empty(0, np.int64)  # a whole row's number -> its value (-1: not computed yet)

    def resolve(self, rows: np.ndarray, bound: int, compute) -> np.ndarray:
        """The value of each row of ``rows`` ((m, w) int64, ids below ``bound``); the
        rows not known yet are computed once each, ``compute(the position in
        ``rows`` of each one's first occurrence) -> their values`` (int list).
        Raises OverflowError past the chain's fields (ids of 2**31, 2**32 prefixes)."""
        bits = self.key_bits // max(rows.shape[1], 1)
        if bound <= 1 << bits:
            keys = np.zeros(len(rows), np.int64)
            for column in rows.T:
                keys = keys << bits | column
            return self._packed.resolve(keys, lambda _, firsts: compute(firsts))
        if bound >> self.ID_BITS:
            raise OverflowError(f"ids of 2**{self.ID_BITS}: past a row memo's chain keys")
        number = rows[:, 0]
        for j in range(1, rows.shape[1]):
            if len(self._chain) < j:
                self._chain.append(IntMap())
                self._counts.append(0)

            def numbered(new, _, j=j):
                first = self._counts[j - 1]
                self._counts[j - 1] += len(new)
                if self._counts[j - 1] >> (63 - self.ID_BITS):
                    raise OverflowError(f"2**{63 - self.ID_BITS} prefixes: past a row memo's chain keys")
                return range(first, self._counts[j - 1])
            number = self._chain[j - 1].resolve(number << self.ID_BITS | rows[:, j], numbered)
        values = self._values = grown(self._values, int(number.max()) + 1 if len(number) else 0, -1)
        missing = (values[number] < 0).nonzero()[0]
        if len(missing):
            new, first = np.unique(number[missing], return_index=True)
            values[new] = compute(missing[first].tolist())
        return values[number]


def _inserted(pos: np.ndarray, *columns) -> list:
    """``np.insert`` for sorted positions, on several columns at once: each
    ``(array, values)`` of ``columns`` as a new array with ``values[j]`` before
    ``array[pos[j]]`` (``pos`` non-decreasing, one per value). The places are
    computed once for every column, without ``np.insert``'s general-case work
    (its own cost, on the engines' small memo runs, was most of an insertion)."""
    n = len(columns[0][0]) + len(pos)
    at = pos + np.arange(len(pos))
    old = np.ones(n, bool)
    old[at] = False
    out = []
    for array, values in columns:
        merged = np.empty(n, array.dtype)
        merged[at] = values
        merged[old] = array
        out.append(merged)
    return out


def row_keys(matrix: np.ndarray) -> np.ndarray:
    """One int64 per row of an int64 matrix, equal exactly when the rows are equal,
    for ``np.unique`` on rows without its slow ``axis=0``: the columns packed side
    by side, each in the bits its range of values needs, when they fit in 63 bits;
    otherwise each row's rank among the distinct rows."""
    if not len(matrix):
        return np.empty(0, np.int64)
    low = matrix.min(axis=0)
    bits = [int(span).bit_length() for span in (matrix.max(axis=0) - low).tolist()]
    if sum(bits) > 63:
        return np.unique(matrix, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    keys = np.zeros(len(matrix), np.int64)
    for j, b in enumerate(bits):
        if b:
            keys = keys << b | (matrix[:, j] - low[j])
    return keys


def grown(table: np.ndarray, n: int, fill: int) -> np.ndarray:
    """A dense int64 table indexed by interned id, extended with ``fill`` to length
    ``n`` (``table`` itself if long enough)."""
    return table if len(table) >= n else np.concatenate([table, np.full(n - len(table), fill, np.int64)])


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def fold(columns: np.ndarray) -> np.ndarray:
    """Each row of an int64 matrix to one signed 64-bit fingerprint, the columns
    folded in with SplitMix64 in numpy's wrapping uint64 arithmetic: the same on
    every machine, unlike Python's salted ``hash()``."""
    h = np.full(len(columns), 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in columns.T.astype(np.uint64):
            h = _mix(h ^ col)
    return h.view(np.int64)
