"""Liveness under weak fairness (spec/SPEC.md section 7).

The exploration records every transition (including stutters, s -> s) with its
*fairness class* (the same action of the same actor: a delivery on one channel,
one member's heartbeat, one timer) and a *mark* (bits a step property sets:
``no_rebalance_storm``'s "a generation completed"). The environment's actions
(faults) carry no fairness and, for the properties that speak of "once faults
stop", are ``excluded`` from every run considered: their enabledness is no
progress and their edges are in no cycle.

Two searches, both on the explored graph, which the engines explore up to
renaming of generations, member ids and epochs (checker/engines/renaming.py), so that an
endless rebalance storm, an infinite path of ever newer generations, is a cycle:

* ``find_lasso``: a fair path that never reaches the goal (◇ goal fails);
* ``find_recurrence``: a fair path that leaves the goal, or takes a marked step,
  infinitely often (◇□ goal fails: the goal is not reached *and kept*).

A counterexample is a lasso:

* a *stuttering* lasso: a non-goal state where no fair class of the system's
  own actions is enabled (the environment's may be): the system may stay there
  forever;
* a *fair cycle*: inside a strongly connected component in which every class
  enabled in all of its states is also taken (weak fairness), a cycle that
  takes such edges, visits what the property needs (a non-goal state, a marked
  edge, a ``required`` class) and is itself fair: any class enabled in every
  state it visits is taken on it.

States the exploration did not expand (a limit was hit) make the verdict
incomplete, never holds: the caller does not call these then.
"""
from __future__ import annotations

import hashlib
import mmap
import multiprocessing
import os
import tempfile
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from operator import itemgetter

import numpy as np


class Graph:
    """Transitions grouped by source state, as compact arrays: state ``i``'s edges
    are ``ends[i - 1] .. ends[i] - 1`` (``ends``: int32; state 0's from edge 0), in the
    order added, edge ``k`` to state ``dst[k]`` (int32) of fairness class ``cls[k]``
    (uint8, a 16-bit array past 256 classes) with the bits ``mark(k)`` (0: none;
    the marked edges' ids, int32 ascending, in ``marked`` and their bits, uint8, in
    ``mark_bits``: about one edge in a hundred is marked on the main job): 5 bytes a
    transition, 5 more a marked one, and 4 a state. Edges are added by source state
    (both engines expand states in index order); ``of`` sorts any other order.
    Raises ValueError for an edge from a state before the last one added.

    With ``spill``, the destinations, classes and ends go to unnamed temporary files
    (or, ``spill`` a directory, to files named there: a checkpoint's, ``checkpoint``)
    as they are added (TLC's DiskGraph): ``dst`` and ``cls`` stay empty, and ``ends``
    holds only the last state's end, until ``load`` reads them back, which the local
    engine does once its exploration's memos are freed, so that they are not in
    memory together (the main job: 9.3 MB of 1,456,382 edges and 492,020 states).
    ``tree_path`` and ``source`` read them from either."""

    def __init__(self, spill=False):
        self.ends = array("i")  # the states up to the last with an edge
        self.dst = array("i")
        # (destinations, classes as uint16, ends) not loaded yet; unbuffered: pread
        self._spilled = None
        if spill is True:
            self._spilled = (tempfile.TemporaryFile(buffering=0), tempfile.TemporaryFile(),
                             tempfile.TemporaryFile(buffering=0))
        elif spill:  # a checkpoint's directory (checker/engines/checkpoint.py): files named there
            self._spilled = tuple(open(os.path.join(spill, name), "a+b", buffering=b)
                                  for name, b in (("graph.dst", 0), ("graph.cls", -1), ("graph.ends", 0)))
        self._flushed = 0  # the ends in the spill file: ``ends`` holds those after them
        self.cls = array("B")
        self.marked = array("i")
        self.mark_bits = array("B")
        self.classes: dict = {}  # class key -> id
        self.names: list = []
        self.acyclic: dict = {}  # ``_acyclic``'s answers, by its question (the properties share most)
        self.workers = 1  # processes a trimming pass over a large graph may use (``_trimmed``)

    @classmethod
    def of(cls, edges) -> Graph:
        """A graph of ``[(source, destination, class key[, mark]), ...]`` in any order:
        each state's edges in the order given, the classes numbered in the order
        first given (as if added one by one)."""
        g = cls()
        edges = edges if isinstance(edges, (list, tuple)) else list(edges)  # read twice: no copy of a sequence
        for e in edges:
            g.class_id(e[2])
        for e in sorted(edges, key=itemgetter(0)):
            g.add(*e)
        return g

    def class_id(self, key) -> int:
        c = self.classes.get(key)
        if c is None:
            c = self.classes[key] = len(self.names)
            self.names.append(key)
            if c == 256:
                self.cls = array("H", self.cls)
        return c

    def add(self, i: int, j: int, key, mark: int = 0) -> None:
        self.extend([i], [j], [self.class_id(key)], [mark])

    def _put(self, dst, classes) -> None:
        """Append destinations (int32 bytes) and their class ids to ``dst`` and ``cls``
        or to the spill files."""
        if self._spilled is not None:
            self._spilled[0].write(dst)
            self._spilled[1].write(np.asarray(classes, np.uint16).tobytes())
        else:
            self.dst.frombytes(dst)
            self.cls.extend(classes)

    @property
    def edges(self) -> int:
        """How many transitions were added (``len(dst)`` once loaded)."""
        return self.ends[-1] if self.ends else 0

    def load(self) -> None:
        """Read the spilled destinations, classes and ends back into ``dst``, ``cls``
        and ``ends`` (a no-op if none were spilled), ``_LOAD`` at a time, and drop the
        files."""
        spilled, self._spilled = self._spilled, None
        if spilled is not None:
            with spilled[0] as f, spilled[1] as c, spilled[2] as e:
                for x in spilled:
                    x.seek(0)
                for lo in range(0, self.edges, _LOAD):
                    n = min(_LOAD, self.edges - lo)
                    self.dst.fromfile(f, n)
                    self.cls.frombytes(np.frombuffer(c.read(2 * n), np.uint16).astype(self.cls.typecode).tobytes())
                tail, self.ends = self.ends, array("i")
                for lo in range(0, self._flushed, _LOAD):
                    self.ends.fromfile(e, min(_LOAD, self._flushed - lo))
                self.ends.extend(tail)
                self._flushed = 0

    def checkpoint(self) -> dict:
        """What a checkpoint keeps of a graph spilled to its directory, besides the
        marked edges: the spill files' lengths (edges, ends flushed), the ends held in
        memory and the fairness classes."""
        self._spilled[1].flush()
        return {"edges": self.edges, "flushed": self._flushed, "ends": self.ends.tolist(),
                "names": list(self.names)}

    def resume(self, saved: dict) -> None:
        """Back to ``checkpoint``'s answer ``saved``: the spill files cut to its lengths
        (a run killed after it may have written more), the classes renumbered alike."""
        dst, cls, ends = self._spilled
        for f, size in ((dst, 4 * saved["edges"]), (cls, 2 * saved["edges"]), (ends, 4 * saved["flushed"])):
            f.truncate(size)
            f.seek(size)
        self._flushed = saved["flushed"]
        self.ends = array("i", saved["ends"])
        self.names, self.classes = [], {}
        for key in saved["names"]:
            self.class_id(key)

    def _into(self, i: int) -> int:
        """The first edge into state ``i``, read ``_LOAD`` destinations at a time from
        the spill file or ``dst``; -1 if none."""
        for lo in range(0, self.edges, _LOAD):
            n = min(_LOAD, self.edges - lo)
            if self._spilled is not None:
                chunk = _pread(self._spilled[0], lo, n)
            else:
                chunk = _np(self.dst, np.int32)[lo:lo + n]
            hit = np.flatnonzero(chunk == i)
            if len(hit):
                return lo + int(hit[0])
        return -1

    def extend(self, src, dst, classes, marks) -> None:
        """Add transitions in bulk: parallel sequences of sources (non-decreasing,
        none before the last source added), destinations (any int sequence or
        numpy int32 array), class ids (``class_id``) and marks."""
        src = np.asarray(src, np.int64)
        if len(src) and np.any(src[1:] < src[:-1]):
            raise ValueError("Graph: edges are added by source state (Graph.of sorts them)")
        lo = int(src[0]) if len(src) else 0
        self.extend_runs(lo, np.bincount(src - lo) if len(src) else np.zeros(0, np.int64), dst, classes, marks)

    def extend_runs(self, lo: int, degrees, dst, classes, marks) -> None:
        """``extend`` with the sources given as runs: ``degrees[i]`` edges from state
        ``lo + i`` (none before the last source added), in that order."""
        self.acyclic.clear()
        marks = np.asarray(marks, np.uint8)
        at = np.flatnonzero(marks)
        self.marked.frombytes((at + self.edges).astype(np.int32).tobytes())
        self.mark_bits.frombytes(marks[at].tobytes())
        if len(dst):
            first = max(self._flushed + len(self.ends) - 1, 0)  # the last state with edges may get more
            if lo < first:
                raise ValueError("Graph: edges are added by source state (Graph.of sorts them)")
            counts = np.concatenate([np.zeros(lo - first, np.int64), degrees])
            ends = self.edges + np.cumsum(counts).astype(np.int32)
            del self.ends[first - self._flushed:]
            self.ends.frombytes(ends.tobytes())
            if self._spilled is not None and len(self.ends) > 1:  # all but the last, which may still grow
                self._spilled[2].write(memoryview(self.ends).cast("B")[:-self.ends.itemsize])
                self._flushed += len(self.ends) - 1
                del self.ends[:-1]
        self._put(memoryview(dst).cast("B") if hasattr(dst, "dtype") else array("i", dst).tobytes(), classes)

    def mark(self, k: int) -> int:
        """The bits edge ``k`` is marked with (0: none)."""
        j = bisect_left(self.marked, k)
        return self.mark_bits[j] if j < len(self.marked) and self.marked[j] == k else 0

    def source(self, k: int) -> int:
        """The source state of edge ``k``: the ends up to it counted, ``_LOAD`` at a
        time in the spill file."""
        before = 0
        for lo in range(0, self._flushed, _LOAD):
            n = min(_LOAD, self._flushed - lo)
            chunk = _pread(self._spilled[2], lo, n)
            up_to = int(np.searchsorted(chunk, k, "right"))
            before += up_to
            if up_to < n:
                return before
        return before + bisect_right(self.ends, k)

    def _end(self, j: int) -> int:
        """``ends[j]``, from the spill file if it is there."""
        if j >= self._flushed:
            return self.ends[j - self._flushed]
        return int(_pread(self._spilled[2], j, 1)[0])

    def sources(self, lo: int, hi: int) -> np.ndarray:
        """The source states of edges ``lo .. hi - 1`` (int32)."""
        if hi <= lo:
            return np.empty(0, np.int32)
        first, last = bisect_right(self.ends, lo), bisect_right(self.ends, hi - 1)
        bounds = np.clip(_np(self.ends, np.int32)[first:last + 1], lo, hi)  # where each state's edges end
        return np.repeat(np.arange(first, last + 1, dtype=np.int32), np.diff(bounds, prepend=lo))

    def tree_path(self, i: int) -> list:
        """The successor indices from state 0 to state ``i`` by the first edge into each
        state on the way: for a graph of a breadth-first exploration (every
        transition kept, each state's in the order generated, states numbered in
        the order first reached) the path by which each was first reached, so that
        the exploration keeps no parent links of its own (explore.py). Raises
        ValueError if no edge leads into a state on the way, or the first one comes
        from a state numbered after it (not a breadth-first graph)."""
        chain = []
        while i > 0:
            k = self._into(i)
            src = self.source(k)
            if k < 0 or src >= i:
                raise ValueError(f"Graph: state {i} is not reached first from a state before it")
            chain.append(k - (self._end(src - 1) if src else 0))
            i = src
        return chain[::-1]

    def offsets(self, n: int) -> np.ndarray:
        """``n + 1`` int32 CSR offsets over states ``0 .. n - 1``: state ``i``'s edges are
        ``offsets[i] .. offsets[i + 1] - 1``."""
        out = np.full(n + 1, len(self.dst), np.int32)
        out[0] = 0
        ends = _np(self.ends, np.int32)[:n]
        out[1:len(ends) + 1] = ends
        return out


def _pread(f, lo: int, n: int) -> np.ndarray:
    """Entries ``lo .. lo + n - 1`` of a spill file of int32s (unbuffered, so what was
    written is there to read)."""
    return np.frombuffer(os.pread(f.fileno(), 4 * n, 4 * lo), np.int32)


def _np(x, dtype) -> np.ndarray:
    """A compact array (array.array) seen as numpy, without a copy."""
    return np.frombuffer(x, dtype) if len(x) else np.empty(0, dtype)


def _adjacency(n: int, g: Graph, keep, usable) -> tuple:
    """CSR adjacency over states where ``keep[i]``, through edges whose class is
    ``usable[class]``: ``(offsets, targets, edge_ids)``, int32 memoryviews, each
    state's edges in the order added, ``edge_ids[p]`` the edge id (``Graph`` index)
    of target position ``p``. The edges are read twice a chunk at a time
    (``_usable``), to count them and to fill arrays of their final size, so that
    no temporary is as large as the graph."""
    kept = np.frombuffer(bytes(keep), np.uint8).astype(bool) if n else np.zeros(0, bool)
    usable = np.array(usable, bool)
    total = sum(int(np.count_nonzero(use)) for *_, use in _usable(g, kept, usable))
    targets, edge_ids = np.empty(total, np.int32), np.empty(total, np.int32)
    counts = np.zeros(n, np.int32)
    at = 0
    for k, src, dst, use in _usable(g, kept, usable):  # a chunk's sources are a range: counted within it
        here = np.flatnonzero(use)
        targets[at:at + len(here)], edge_ids[at:at + len(here)] = dst[here], here + k
        at += len(here)
        if len(here):
            src = src[here]
            lo = int(src[0])
            counts[lo:int(src[-1]) + 1] += np.bincount(src - lo).astype(np.int32)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    # memoryviews of the numpy arrays: indexed as fast as array.array, without a copy
    return memoryview(offsets), memoryview(targets), memoryview(edge_ids)


def _usable(g: Graph, alive: np.ndarray, usable: np.ndarray, lo: int = 0, hi: int | None = None,
            backwards: bool = False):
    """The graph's edges ``lo .. hi - 1`` (all by default) ``_CHUNK`` at a time from
    ``lo`` (the last chunk first if ``backwards``): ``(first edge id, sources,
    targets, use)``, int arrays and the mask of the edges between states ``alive``
    (bool per state, read as each chunk is made) whose class is ``usable`` (bool
    per class id)."""
    dst, cls = _np(g.dst, np.int32), _np(g.cls, _CLS[g.cls.typecode])
    hi = len(dst) if hi is None else hi
    starts = range(lo, hi, _CHUNK)
    for k in (reversed(starts) if backwards else starts):
        end = min(k + _CHUNK, hi)
        src, to = g.sources(k, end), dst[k:end]
        yield k, src, to, alive[src] & alive[to] & usable[cls[k:end]]


_LOAD = 1 << 18  # destinations per read of a spilled graph (1 MB)
_CHUNK = 1 << 14  # edges per chunk of the liveness graph's whole-graph numpy passes
_CLS = {"B": np.uint8, "H": np.uint16}
_PARALLEL = 1 << 22  # edges from which a trimming pass runs in ``Graph.workers`` processes


def _acyclic(n: int, g: Graph, keep, usable, rounds: int = 200, copy_out: float = 0.1) -> bool:
    """Whether the states where ``keep[i]`` lie on no cycle through the edges whose
    class is ``usable[class]`` (no non-trivial strongly connected component, no
    self-loop), found in numpy by trimming: a state with no incoming or no outgoing
    edge among the remaining ones is on no cycle and goes, round after round. False
    when something remains, or after ``rounds`` rounds: then ``_sccs`` decides, in
    its own order, so the components searched and the lasso found are the same
    either way. It reads the graph's own arrays (no adjacency is built for it: a
    search builds one, ``_adjacency``, only when a cycle may remain), ``_CHUNK``
    edges at a time, the last chunk first: a state with no edge to a remaining one
    goes as soon as all its edges are read, so that its predecessors, read later,
    see it gone (trimming in any order ends in the same states). Once the edges
    between remaining states are a fraction ``copy_out`` of all, they are copied
    out and each round keeps only its survivors' edges, so the rounds cost what
    remains, and no temporary is as large as the graph. (The main job's graph, once
    faults stop, trims to nothing: 16 passes over the graph, 25 when each round
    read the states of the round before, 0.65 CPU-s instead of 1.17.) The answer
    is kept on the graph, by question, until it grows: the main job's two ◇□
    properties ask the same one."""
    key = (hashlib.blake2b(bytes(keep), digest_size=16).digest(), bytes(bytearray(map(bool, usable))), rounds)
    hit = g.acyclic.get(key)
    if hit is None:
        hit = g.acyclic[key] = _trimmed(n, g, keep, usable, rounds, copy_out)
    return hit


def _trimmed(n: int, g: Graph, keep, usable, rounds: int, copy_out: float, workers: int = 0) -> bool:
    """``_acyclic``'s answer, computed. Its passes over the whole graph run in
    ``workers`` processes (0: ``g.workers`` if the graph has ``_PARALLEL`` edges
    or more, else one), each over its share of the edges (``_Passes``)."""
    if not workers:
        workers = g.workers if len(g.dst) >= _PARALLEL else 1
    passes = _Passes(n, g, keep, usable, workers)
    try:
        return _trimming(n, g, passes, rounds, copy_out)
    finally:
        passes.close()


def _trimming(n: int, g: Graph, passes: _Passes, rounds: int, copy_out: float) -> bool:
    """The rounds of ``_trimmed`` on ``passes``' states and edges."""
    alive, has_out, has_in, usable = passes.alive, passes.has_out, passes.has_in, passes.usable

    def chunks():  # the usable edges between states still alive: (sources, targets), a chunk at a time
        for _, s, t, e in _usable(g, alive, usable):
            yield s[e], t[e]

    edges = None  # once copied out: (sources, targets) of the usable edges between remaining states
    for _ in range(rounds):
        has_out.fill(False)
        has_in.fill(False)
        count = int(np.count_nonzero(alive))
        if edges is None:
            between = passes.run()
            if between <= len(g.dst) * copy_out:  # filled in place: no second copy of them while copying
                edges = np.empty(between, np.int32), np.empty(between, np.int32)
                at = 0
                for s, t in chunks():
                    edges[0][at:at + len(s)], edges[1][at:at + len(s)] = s, t
                    at += len(s)
                edges = edges[0][:at], edges[1][:at]
        else:
            s, t = edges
            e = alive[s] & alive[t]
            edges = s, t = s[e], t[e]
            has_out[s] = True
            has_in[t] = True
        alive &= has_out
        alive &= has_in
        left = int(np.count_nonzero(alive))
        if not left:
            return True
        if left == count:
            return False
    return False


def _trim_pass(g: Graph, alive, usable, has_out, has_in, lo: int, hi: int, done: int) -> int:
    """One trimming pass over edges ``lo .. hi - 1``, the last chunk first: marks
    ``has_out`` and ``has_in`` of the usable edges between states ``alive``, and a
    state below ``done`` with no edge to a remaining one goes as soon as all its
    edges are read, so that its predecessors, read later, see it gone (states are
    numbered breadth-first, most edges lead to a later state: a chain of them goes
    in one pass); the states below the last ``done`` are left to the round's end.
    Returns the number of those edges."""
    between = 0
    for _, s, t, e in _usable(g, alive, usable, lo, hi, backwards=True):
        has_out[s[e]] = True
        has_in[t[e]] = True
        between += int(np.count_nonzero(e))
        first = int(s[0]) + 1  # the chunk's first source may have edges in the chunk before
        alive[first:done] &= has_out[first:done]
        done = first
    return between


def _shares(n: int, g: Graph, workers: int) -> list:
    """``workers`` shares of the graph's edges for ``_trim_pass``, cut at chunks:
    ``(lo, hi, done)``, where a share leaves its states from ``done`` up to the
    round's end (the last source of a share but the last may have edges in the
    next); fewer if the graph has fewer chunks."""
    edges = len(g.dst)
    workers = max(1, min(workers, -(-edges // _CHUNK)))
    cuts = [edges * i // workers // _CHUNK * _CHUNK for i in range(workers)] + [edges]
    return [(lo, hi, n if hi == edges else int(g.sources(hi - 1, hi)[0])) for lo, hi in zip(cuts, cuts[1:])]


class _Passes:
    """``_trimmed``'s state, ``alive``, ``has_out`` and ``has_in`` (bool per state),
    and its whole-graph passes (``run``), in ``workers`` processes: with more than
    one, the arrays are shared memory and ``workers - 1`` forked helpers each pass
    over a share of the edges (cut at chunks) while this process passes over the
    first; each marks ``has_out`` and ``has_in`` and removes only the states whose
    edges all lie in its share, so the shares write no state's ``alive`` in common,
    and a state read alive while another removes it only keeps it one round more
    (trimming in any order ends in the same states). ``close`` stops the helpers."""

    def __init__(self, n: int, g: Graph, keep, usable, workers: int):
        self.g, self.usable = g, np.array(usable, bool)
        self._shares = _shares(n, g, workers)
        self._maps = [mmap.mmap(-1, max(n, 1)) for _ in range(3)] if len(self._shares) > 1 else []
        self.alive, self.has_out, self.has_in = (
            (np.frombuffer(m, bool)[:n] for m in self._maps) if self._maps else (np.empty(n, bool) for _ in range(3)))
        self.alive[:] = np.frombuffer(bytes(keep), np.uint8).astype(bool) if n else np.zeros(0, bool)
        self._helpers = []
        ctx = multiprocessing.get_context("fork")
        for share in self._shares[1:]:
            mine, theirs = ctx.Pipe()
            helper = ctx.Process(target=self._serve, args=(theirs, share), daemon=True)
            helper.start()
            theirs.close()
            self._helpers.append((helper, mine))

    def _serve(self, conn, share: tuple) -> None:
        """A helper: a pass over ``share`` each time it is asked, its count sent back."""
        while conn.recv():
            conn.send(_trim_pass(self.g, self.alive, self.usable, self.has_out, self.has_in, *share))
        os._exit(0)

    def run(self) -> int:
        """A pass over every edge (``_trim_pass``, each share in its process):
        the usable edges between states alive."""
        for _, conn in self._helpers:
            conn.send(True)
        between = _trim_pass(self.g, self.alive, self.usable, self.has_out, self.has_in, *self._shares[0])
        return between + sum(conn.recv() for _, conn in self._helpers)

    def close(self) -> None:
        for helper, conn in self._helpers:
            conn.send(False)
            helper.join()
            conn.close()
        self._helpers = []


def _sccs(n: int, offsets, targets, keep):
    """Non-trivial strongly connected components (iterative Tarjan), yielded as
    arrays of states; every work list an int32 array, so a component as large as
    the graph costs a few bytes a state."""
    index = array("i", [-1]) * n
    low = array("i", [0]) * n
    on_stack = bytearray(n)
    stack = array("i")
    work_v, work_pos = array("i"), array("i")  # the DFS path: states and the next edge position of each
    counter = 0
    for root in range(n):
        if not keep[root] or index[root] != -1:
            continue
        work_v.append(root)
        work_pos.append(offsets[root])
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        while work_v:
            v, pos = work_v[-1], work_pos[-1]
            if pos < offsets[v + 1]:
                work_pos[-1] = pos + 1
                w = targets[pos]
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = 1
                    work_v.append(w)
                    work_pos.append(offsets[w])
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work_v.pop()
            work_pos.pop()
            if work_v and low[v] < low[work_v[-1]]:
                low[work_v[-1]] = low[v]
            if low[v] == index[v]:
                comp = array("i")
                while True:
                    w = stack.pop()
                    on_stack[w] = 0
                    comp.append(w)
                    if w == v:
                        break
                self_loop = any(targets[p] == v for p in range(offsets[v], offsets[v + 1]))
                if len(comp) > 1 or self_loop:
                    yield comp


class _Members:
    """The states of one component, as a membership mask over all states."""

    def __init__(self, n: int, comp):
        self.mask = bytearray(n)
        for v in comp:
            self.mask[v] = 1

    def __contains__(self, v: int) -> bool:
        return self.mask[v] == 1


def _path_within(start: int, goal_edge_src: int, offsets, targets, members: _Members) -> list:
    """Shortest path of states start .. goal_edge_src inside ``members`` (BFS)."""
    if start == goal_edge_src:
        return [start]
    prev = {start: None}
    q = deque([start])
    while q:
        v = q.popleft()
        for p in range(offsets[v], offsets[v + 1]):
            w = targets[p]
            if w in members and w not in prev:
                prev[w] = v
                if w == goal_edge_src:
                    path = [w]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1]
                q.append(w)
    raise AssertionError("state not reachable inside its component")


def _fair_edges(g: Graph, fair_class: list):
    """The edges of the fair classes (``fair_class[class]``), ``_CHUNK`` at a time:
    (sources, class ids as int64) int arrays."""
    cls_all = _np(g.cls, _CLS[g.cls.typecode])
    fair_of = np.array(fair_class, bool)
    for k in range(0, len(cls_all), _CHUNK):
        cls = cls_all[k:k + _CHUNK]
        fair = np.flatnonzero(fair_of[cls]) if len(fair_of) else np.empty(0, np.int64)
        yield g.sources(k, k + len(cls))[fair], cls[fair].astype(np.int64)


def _enabled(n: int, g: Graph, fair_class: list) -> np.ndarray:
    """State -> the fair classes enabled there, as a bitmask: row ``i`` holds
    uint64 words, class ``c`` is bit ``c % 64`` of word ``c // 64``. The edges are
    read a chunk at a time (``_fair_edges``): the temporaries stay a few MB."""
    words = max(1, -(-len(fair_class) // 64))
    enabled = np.zeros(n * words, np.uint64)
    for src, c in _fair_edges(g, fair_class):
        np.bitwise_or.at(enabled, src * words + (c >> 6), np.left_shift(np.uint64(1), (c & 63).astype(np.uint64)))
    return enabled.reshape(n, words)


def _any_enabled(n: int, g: Graph, fair_class: list) -> np.ndarray:
    """State -> whether some fair class is enabled there (a bool array: ``_enabled``
    without the classes, a byte a state)."""
    out = np.zeros(n, bool)
    for src, _ in _fair_edges(g, fair_class):
        out[src] = True
    return out


def _classes(words) -> set:
    """The class ids set in a bitmask row (``_enabled``)."""
    out = set()
    for w, x in enumerate(int(v) for v in words):
        while x:
            low = x & -x
            out.add(w * 64 + low.bit_length() - 1)
            x ^= low
    return out


def _common(enabled: np.ndarray, states) -> set:
    """The fair classes enabled in every one of ``states``."""
    return _classes(np.bitwise_and.reduce(enabled[np.asarray(states, np.int64)], axis=0))


def _search(n: int, g: Graph, fair, excluded, stuck, keep, wanted, why: str = "") -> tuple | None:
    """The lasso machinery both searches share. ``stuck``: states where stuttering
    violates the property; ``keep``: states a cycle may visit; ``wanted(comp,
    members, offsets, targets, edges)``: the edge positions a cycle in the fair
    component must take, or None if the component cannot violate; ``why``: what
    a fair cycle's reason adds."""
    usable = [not (excluded and excluded(key)) for key in g.names]
    fair_class = [usable[c] and fair(key) for c, key in enumerate(g.names)]
    stuck_here = np.flatnonzero(np.frombuffer(bytes(stuck), np.uint8).astype(bool)
                                & ~_any_enabled(n, g, fair_class)) if n else ()
    if len(stuck_here):
        return int(stuck_here[0]), [], "no fair action is enabled here, so the system may stay forever"
    if _acyclic(n, g, keep, usable):
        return None
    # a cycle may remain: the adjacency of the usable edges, their edge ids and the classes enabled per
    # state, built only now (none of them is held while the graph is trimmed)
    offsets, targets, edges = _adjacency(n, g, keep, usable)
    enabled = _enabled(n, g, fair_class)
    for comp in _sccs(n, offsets, targets, keep):
        members = _Members(n, comp)
        always = _common(enabled, comp)
        taken: dict = {}
        for v in comp:
            for p in range(offsets[v], offsets[v + 1]):
                if targets[p] in members:
                    taken.setdefault(g.cls[edges[p]], p)
        if not always.issubset(taken):
            continue  # an action always enabled here is never taken: no fair cycle
        need = wanted(comp, members, offsets, targets, edges)
        if need is None:
            continue
        cycle = _fair_cycle(comp, members, need, taken, enabled, offsets, targets, edges, g)
        return min(comp), cycle, f"a fair cycle of {len(cycle)} steps{why}"
    return None


def _fair_cycle(comp, members, need, taken, enabled, offsets, targets, edges, g) -> list:
    """A cycle from ``min(comp)`` taking the positions ``need`` that is weakly fair:
    while some class is enabled in every state it visits and not taken on it, it
    takes that class too (taken somewhere in the component) or visits a state of
    the component where the class is not enabled (one exists: the component is fair)."""
    start = min(comp)
    need = list(need)
    while True:
        cycle = _through(start, need, comp, members, offsets, targets, edges)
        visited = [g.source(k) for k in cycle] or [start]
        on = _common(enabled, visited)
        missing = sorted(on - {g.cls[k] for k in cycle})
        if not missing:
            return cycle
        c = missing[0]
        if c in taken:
            need.append(taken[c])
        else:
            v = next(v for v in sorted(comp) if not int(enabled[v, c >> 6]) >> (c & 63) & 1)
            need.append(next(p for p in range(offsets[v], offsets[v + 1]) if targets[p] in members))


def _through(start: int, need, comp, members, offsets, targets, edges) -> list:
    """Edge ids of a cycle from ``start`` through the edge positions ``need`` in order."""
    cycle: list = []
    at = start
    for p in need:
        src = next(v for v in comp if offsets[v] <= p < offsets[v + 1])
        hop = _path_within(at, src, offsets, targets, members)
        cycle.extend(_edge_between(a, b, offsets, targets, edges) for a, b in zip(hop, hop[1:]))
        cycle.append(edges[p])
        at = targets[p]
    hop = _path_within(at, start, offsets, targets, members) if at != start else [start]
    cycle.extend(_edge_between(a, b, offsets, targets, edges) for a, b in zip(hop, hop[1:]))
    return cycle


def find_lasso(n: int, g: Graph, goal, fair, required=None, excluded=None) -> tuple | None:
    """Look for a fair path that never reaches the goal (◇ goal fails).

    ``goal``: bytearray, 1 where the state is a goal state. ``fair(key)``: whether a
    class is under weak fairness. ``required(key)``, if given: a fair cycle must
    also take an edge of such a class (checker/engines/churn.py: a tick, so time passes).
    ``excluded(key)``, if given: edges of such classes are in no run considered
    and their enabledness is no progress (eventual properties: the environment's,
    as faults have stopped). Returns None, or ``(stem_end, cycle_edges, reason)``
    where ``cycle_edges`` is a list of edge ids (empty for a stuttering lasso at
    ``stem_end``)."""
    def wanted(comp, members, offsets, targets, edges):
        need = []
        if required is not None:
            ticks = sorted(p for v in comp for p in range(offsets[v], offsets[v + 1])
                           if targets[p] in members and required(g.names[g.cls[edges[p]]]))
            if not ticks:
                return None
            need.append(ticks[0])
        return need or [next(p for p in range(offsets[min(comp)], offsets[min(comp) + 1])
                             if targets[p] in members)]

    not_goal = _negated(goal)
    return _search(n, g, fair, excluded, not_goal, not_goal, wanted, " never reaches the goal")


def find_recurrence(n: int, g: Graph, goal, fair, mark: int = 0, excluded=None) -> tuple | None:
    """Look for a fair path that is outside the goal, or takes a step marked
    ``mark`` (a bit of ``Graph.mark``), infinitely often: ◇□(goal, and no marked
    step) fails. Arguments and answer as ``find_lasso``'s; a stuttering lasso
    stops in a non-goal state."""
    def wanted(comp, members, offsets, targets, edges):
        for v in sorted(comp):
            for p in range(offsets[v], offsets[v + 1]):
                if targets[p] in members and (not goal[v] or g.mark(edges[p]) & mark):
                    return [p]
        return None

    not_goal = _negated(goal)
    return _search(n, g, fair, excluded, not_goal, bytearray(b"\x01") * n, wanted)


def _negated(flags) -> bytearray:
    """A bytearray of 0/1 flags (or any bytes-like of them), each flipped."""
    return bytearray(bytes(flags).translate(_NOT))


_NOT = bytes([1]) + bytes(255)  # byte 0 -> 1, any other -> 0


def _edge_between(a: int, b: int, offsets, targets, edges) -> int:
    for p in range(offsets[a], offsets[a + 1]):
        if targets[p] == b:
            return edges[p]
    raise AssertionError("no edge")
