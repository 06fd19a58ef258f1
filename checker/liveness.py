"""Liveness under weak fairness: ``eventual_balance`` (◇ goal once faults stop).

The exploration records every transition (including stutters, s -> s) with its
*fairness class* (the same action of the same actor: a delivery on one channel,
one member's heartbeat, one timer). Faults (join, leave, crash, restart, pause,
resume) are the environment's and carry no fairness; for eventual_balance they
have stopped (their edges are ``excluded``), and every fair path must reach a
goal state.

A counterexample is a lasso that never reaches the goal:

* a *stuttering* lasso: a non-goal state where no fair class is enabled (only
  unfair actions, or nothing at all): the system may stay there forever;
* a *fair cycle*: a strongly connected component of the non-goal subgraph in
  which every class enabled in all of its states is also taken inside it
  (weak fairness is then satisfied by a cycle visiting those edges).

States the exploration did not expand (a limit was hit) make the verdict
incomplete, never holds: the caller does not call this then.
"""
from __future__ import annotations

from array import array
from collections import deque


class Graph:
    """Non-fault transitions as parallel arrays: ``src[k] -> dst[k]`` of class ``cls[k]``."""

    def __init__(self):
        self.src = array("l")
        self.dst = array("l")
        self.cls = array("l")
        self.classes: dict = {}  # class key -> id
        self.names: list = []

    def add(self, i: int, j: int, key) -> None:
        c = self.classes.get(key)
        if c is None:
            c = self.classes[key] = len(self.names)
            self.names.append(key)
        self.src.append(i)
        self.dst.append(j)
        self.cls.append(c)


def _adjacency(n: int, g: Graph, keep, usable) -> tuple:
    """CSR adjacency over states where ``keep[i]``, through edges whose class is
    ``usable[class]``: (offsets, targets, edge ids)."""
    counts = array("l", [0]) * (n + 1)
    for k in range(len(g.src)):
        i, j = g.src[k], g.dst[k]
        if keep[i] and keep[j] and usable[g.cls[k]]:
            counts[i + 1] += 1
    for i in range(n):
        counts[i + 1] += counts[i]
    fill = array("l", counts)
    targets = array("l", [0]) * counts[n]
    edges = array("l", [0]) * counts[n]
    for k in range(len(g.src)):
        i, j = g.src[k], g.dst[k]
        if keep[i] and keep[j] and usable[g.cls[k]]:
            targets[fill[i]] = j
            edges[fill[i]] = k
            fill[i] += 1
    return counts, targets, edges


def _sccs(n: int, offsets, targets, keep) -> list:
    """Non-trivial strongly connected components (iterative Tarjan) as lists of states."""
    index = array("l", [-1]) * n
    low = array("l", [0]) * n
    on_stack = bytearray(n)
    stack: list = []
    out = []
    counter = 0
    for root in range(n):
        if not keep[root] or index[root] != -1:
            continue
        work = [(root, offsets[root])]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        while work:
            v, pos = work[-1]
            if pos < offsets[v + 1]:
                work[-1] = (v, pos + 1)
                w = targets[pos]
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = 1
                    work.append((w, offsets[w]))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work and low[v] < low[work[-1][0]]:
                low[work[-1][0]] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack[w] = 0
                    comp.append(w)
                    if w == v:
                        break
                self_loop = any(targets[p] == v for p in range(offsets[v], offsets[v + 1]))
                if len(comp) > 1 or self_loop:
                    out.append(comp)
    return out


def _path_within(start: int, goal_edge_src: int, offsets, targets, members: set) -> list:
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


def find_lasso(n: int, g: Graph, goal, fair, required=None, excluded=None) -> tuple | None:
    """Look for a fair path that never reaches the goal.

    ``goal``: bytearray, 1 where the state is a goal state. ``fair(key)``: whether a
    class is under weak fairness. ``required(key)``, if given: a fair cycle must
    also take an edge of such a class (checker/churn.py: a tick, so time passes).
    ``excluded(key)``, if given: edges of such classes are in no run considered
    (eventual_balance: the environment's, as faults have stopped). Returns None, or ``(stem_end, cycle_edges, reason)`` where ``cycle_edges`` is a
    list of edge ids (empty for a stuttering lasso at ``stem_end``).
    """
    fair_class = [fair(key) for key in g.names]
    enabled: list = [None] * n  # state -> set of fair classes enabled there
    for k in range(len(g.src)):
        c = g.cls[k]
        if fair_class[c]:
            i = g.src[k]
            if enabled[i] is None:
                enabled[i] = {c}
            else:
                enabled[i].add(c)
    for i in range(n):  # stuttering: nothing fair to do, and not there yet
        if not goal[i] and enabled[i] is None:
            return i, [], "no fair action is enabled here, so the system may stay forever"
    keep = bytearray(0 if goal[i] else 1 for i in range(n))
    usable = [not (excluded and excluded(key)) for key in g.names]
    offsets, targets, edges = _adjacency(n, g, keep, usable)
    for comp in _sccs(n, offsets, targets, keep):
        members = set(comp)
        always = set.intersection(*(enabled[i] for i in comp))
        taken: dict = {}
        for v in comp:
            for p in range(offsets[v], offsets[v + 1]):
                if targets[p] in members:
                    taken.setdefault(g.cls[edges[p]], p)
        if not always.issubset(taken):
            continue  # an action always enabled here is never taken: no fair cycle
        wanted = [taken[c] for c in sorted(always)] or [next(iter(taken.values()))]
        if required is not None:
            needed = sorted(c for c in taken if required(g.names[c]))
            if not needed:
                continue
            wanted.append(taken[needed[0]])
        start = min(comp)
        cycle: list = []
        at = start
        for p in wanted:
            src = next(v for v in comp if offsets[v] <= p < offsets[v + 1])
            hop = _path_within(at, src, offsets, targets, members)
            cycle.extend(_edge_between(a, b, offsets, targets, edges) for a, b in zip(hop, hop[1:]))
            cycle.append(edges[p])
            at = targets[p]
        hop = _path_within(at, start, offsets, targets, members) if at != start else [start]
        cycle.extend(_edge_between(a, b, offsets, targets, edges) for a, b in zip(hop, hop[1:]))
        return start, cycle, f"a fair cycle of {len(cycle)} steps never reaches the goal"
    return None


def _edge_between(a: int, b: int, offsets, targets, edges) -> int:
    for p in range(offsets[a], offsets[a + 1]):
        if targets[p] == b:
            return edges[p]
    raise AssertionError("no edge")
