"""The liveness graph of a partitioned exploration (checker/engines/workers.py),
gathered from its owners' transitions a BFS level at a time.

Each owner writes its levels of edges to a file (``Levels``), as the local
engine spills its graph (liveness.py ``Graph``), and may tell another process
of each level as it is written. The driver adds the owners' levels to one
``Graph`` in the local engine's order (``Gathering``): ``--workers`` while the
owners still explore, each level once every owner has written it; the Spark
engine once their answers are in.
"""
from __future__ import annotations

import tempfile

import numpy as np

from .liveness import Graph

EDGE_COLUMNS = (np.int32, np.int32, np.uint16, np.uint8)  # an owner's level of edges: src, dst, class code, marks
_CHUNK = 1 << 20  # edges per chunk of ``Gathering``'s scan for new fairness classes


def read_level(f, n: int) -> tuple:
    """The next level of ``n`` edges in an owner's file ``f`` (``Levels``): its
    ``EDGE_COLUMNS`` as numpy arrays."""
    return tuple(np.frombuffer(f.read(n * np.dtype(t).itemsize), t) for t in EDGE_COLUMNS)


class Levels:
    """An owner's levels of edges (``EDGE_COLUMNS``), kept in a temporary file while
    the exploration runs, and read back a level at a time (iterating) once it is
    over. Held in memory, they were 60 MB of each of two owners' peak at
    --partitions 16. The file is unnamed, or, given ``path``, named there, and
    ``tell(edges, keys)``, if given, is called once each level is written and
    flushed, with its number of edges and the fairness class keys its codes name
    that no earlier level's did, so that another process reads the file as it
    grows (``read_level``)."""

    def __init__(self, path: str | None = None, tell=None):
        self.path = path
        self.tell = tell
        self._file = None
        self._sizes: list = []  # edges per level
        self._told = 0  # the class keys told so far

    def _opened(self):
        if self._file is None:
            self._file = tempfile.TemporaryFile() if self.path is None else open(self.path, "a+b")
        return self._file

    def append(self, columns: tuple, keys: list) -> None:
        """Write a level, ``(src rank, dst rank, class code, marks)``; ``keys``: the
        class keys by code, the level's included."""
        f = self._opened()
        self._sizes.append(len(columns[0]))
        for column, t in zip(columns, EDGE_COLUMNS):
            f.write(np.ascontiguousarray(column, t).tobytes())
        if self.tell is not None:
            f.flush()
            self.tell(len(columns[0]), keys[self._told:])
            self._told = len(keys)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __iter__(self):
        f = self._opened()
        f.seek(0)
        for n in self._sizes:
            yield read_level(f, n)


def _runs(src: np.ndarray) -> tuple:
    """The runs of equal sources in ``src`` (sorted): each run's first place and
    its length, in one linear pass (``np.unique`` would sort what is sorted)."""
    first = np.flatnonzero(np.concatenate([[True], src[1:] != src[:-1]])) if len(src) else np.zeros(0, np.int64)
    return first, np.diff(np.append(first, len(src)))


class Gathering:
    """The liveness graph of ``k`` owners' levels (``add``): states numbered by
    rank, each level's transitions added in (src rank, successor index) order and
    fairness classes numbered in the order the edges first use them, as the local
    engine numbers and adds them. The graph spills to temporary files as it grows
    (``Graph(spill=True)``): while the owners explore, the driver holds only the
    levels some owner has not written yet, and ``graph`` loads it."""

    def __init__(self, k: int):
        self._graph = Graph(spill=True)
        self._waiting: list = [[] for _ in range(k)]  # per owner: its levels not added yet
        self._index: list = [[] for _ in range(k)]  # per owner: class code -> its index in ``_keys``
        self._keys: list = []  # every owner's class keys, as they came
        self._class_ids = np.zeros(0, np.uint16)  # by index in ``_keys``: the graph's class id, once used
        self._seen = np.zeros(0, bool)

    def add(self, owner: int, level: tuple, keys: list) -> None:
        """An owner's next level, ``(src rank, dst rank, class code, marks)`` by src
        rank, and the class keys of its codes not given before (code order). A
        level is added to the graph once every owner has given it (the owners'
        levels go in lockstep). Raises ValueError if a level is not by source rank."""
        self._index[owner].extend(range(len(self._keys), len(self._keys) + len(keys)))
        self._keys.extend(keys)
        self._waiting[owner].append(level)
        while all(self._waiting):
            self._put([waiting.pop(0) for waiting in self._waiting])

    def graph(self, workers: int = 1) -> Graph:
        """The graph of every level given, loaded (``Graph.load``), its trimming
        passes in ``workers`` processes (``Graph.workers``). Raises ValueError if an
        owner gave a level that another has not."""
        if any(self._waiting):
            raise ValueError("the owners gave different numbers of levels")
        self._graph.load()
        self._graph.workers = workers
        return self._graph

    def _put(self, level: list) -> None:
        """Add one level of every owner's edges to the graph. A level's sources are
        one range of ranks, each state's edges on one owner: each edge is put
        straight at its place (its state's first place, from the level's
        out-degrees, plus its place among its state's edges), with no sort."""
        for src, *_ in level:
            if len(src) and (src[1:] < src[:-1]).any():
                raise ValueError("an owner's level of edges is not by source rank")
        sources = [src for src, *_ in level if len(src)]
        if not sources:
            return
        lo = min(int(src[0]) for src in sources)
        degree = np.zeros(max(int(src[-1]) for src in sources) + 1 - lo, np.int64)
        runs = [_runs(src) for src, *_ in level]
        for (src, *_), (first, count) in zip(level, runs):
            degree[src[first] - lo] = count
        start = np.concatenate([[0], np.cumsum(degree)])
        total = int(start[-1])
        dst, codes, marks = np.empty(total, np.int32), np.empty(total, np.int64), np.empty(total, np.uint8)
        for (src, to, code, mark), index, (first, count) in zip(level, self._index, runs):
            # an edge's place: its state's first place in the level, plus its own place among its state's edges
            at = np.repeat(start[src[first] - lo] - first, count) + np.arange(len(src))
            dst[at], codes[at], marks[at] = to, np.asarray(index, np.int64)[code], mark
        self._graph.extend_runs(lo, degree, dst, self._ids(codes), marks)

    def _ids(self, codes: np.ndarray) -> np.ndarray:
        """The graph's class ids of ``codes`` (indices in ``_keys``), numbering the
        classes not met yet in the order the codes first use them."""
        grow = len(self._keys) - len(self._seen)
        if grow:
            self._class_ids = np.append(self._class_ids, np.zeros(grow, np.uint16))
            self._seen = np.append(self._seen, np.zeros(grow, bool))
        for lo in range(0, len(codes), _CHUNK):  # a chunk at a time: few edges bring a class not seen yet
            chunk = codes[lo:lo + _CHUNK]
            new = chunk[~self._seen[chunk]]
            if len(new):
                met, first = np.unique(new, return_index=True)
                for c in met[np.argsort(first)].tolist():
                    self._class_ids[c] = self._graph.class_id(self._keys[c])
                self._seen[met] = True
        return self._class_ids[codes]
