"""``bounded_deferral`` under unbounded leader churn: can a lost partition stay
unowned forever while time passes, whatever leader changes the environment makes?

Every explored path is finite (the fault budget), but a path from a state ``s``
to a state of the same shape (checker/engines/renaming.py: equal up to renaming of
generations, member ids and epochs) is the loop of an infinite execution. So the
search runs on the explored graph *quotiented by renaming*, with the
environment's actions (join, leave, crash, restart, pause, resume) allowed in
cycles but not fair.

Leader changes are not bounded by the budget (seed 000, Design II: "leader
changes within the scheduled rebalance timeout indefinitely"). The search adds a
*bounce* of the leader (``System.churn_successors``: between rounds, the leader's
process crashes and restarts at once) to every state with a partition not served,
and explores the shapes this reaches that the exploration did not, with bounces
free and the budget spent. A bounce at any point of a round is covered within the
budget; outside it, bounces come between rounds.

For each partition ``p``, a counterexample is a lasso that never reaches a state
where ``p`` is served (owned by a live member, or given out to one) and whose cycle

* lets time pass: it takes a ``tick`` (a cycle without one is a Zeno run: endless
  leader changes in no time, which no deadline can bound); and
* is weakly fair (checker/engines/liveness.py) for the system's own actions (timer
  classes are per client slot, explore.fairness_class, as member ids are renamed).

Under the seed's Design II (``--mutation leader-forgets-delay``) each new leader
starts the delay again, and the lasso shows the churn; with the deadline carried
in the assignment (R31, R32) every tick brings it nearer and no such cycle exists.
"""
from __future__ import annotations

from collections import deque

from rebalance.model.protocol import member_name, union

from .explore import Violation, environmental, fairness_class
from .liveness import Graph, find_lasso
from .renaming import shape
from ..system import RUNNING, State, processing

SERVED = ("every partition served",)  # the node of the states churn reaches with every partition served


def _served(system, state: State) -> int:
    """The partitions served in ``state``: processed by a live member, or given out
    (in the coordinator's stored assignment: given to a member that then goes, a
    partition is lost anew, and its delay rightly starts again); every one when no
    process runs (an empty group owes nobody anything, nor does one whose every
    process is paused: nobody could take a partition, as ``balanced`` has it); with subscriptions
    (R61), those of topics no live member subscribes to or that do not exist; a deleted
    connector's resources (R81), which nobody is owed."""
    if not any(p.status == RUNNING for p in state.procs):
        return system.cfg.all_partitions
    live = [c.owned for c in processing(state)]
    served = union(live) | union(m.assignment.partitions for m in state.group.members)
    if not system.cfg.uniform:  # R61, R62: no live member can take a partition nobody subscribes to
        cfg = system.cfg
        served |= cfg.all_partitions & ~union(cfg.partitions_of_topics(c.topics & c.metadata)
                                              for c in processing(state))
    if system.cfg.deletable_connectors:
        served |= system.cfg.deleted(state.procs[0].metadata)
    return served


def summary(system, state: State) -> tuple:
    """What the search needs of each explored state: ``(shape key, partitions
    served, bounces)``. The key is the shape itself (the Spark engine sends a
    fingerprint of it instead), or None where every partition is served: such a
    state is a goal for every partition, never on a lasso, and needs no renaming.
    ``bounces``: ``((fairness class, state), ...)``, the leader bounces from it
    (none where the key is None)."""
    served = _served(system, state)
    if served == system.cfg.all_partitions:
        return None, served, ()
    bounces = tuple((fairness_class(a), n) for a, n in system.churn_successors(state))
    return shape(state), served, bounces


class _Quotient:
    """The explored graph quotiented by renaming, grown by leader churn: nodes are
    shapes (keys given by ``identify``), ``forms[node]`` the shape of each node the
    churn added and ``parent[node]`` the edge that first reached it."""

    def __init__(self, system, identify):
        self.system = system
        self.identify = identify
        self.ids: dict = {}
        self.edges: list = []  # (source node, destination node, class key), in the order found
        self.seen: set = set()
        self.forms: dict = {}
        self.parent: dict = {}
        self.served: list = []
        self.frontier: deque = deque()

    def node(self, key, served: int) -> int:
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.served)
            self.served.append(served)
        return i

    def edge(self, src: int, dst: int, key: tuple) -> None:
        e = (src, dst, key)
        if e not in self.seen:
            self.seen.add(e)
            self.edges.append(e)

    def reach(self, src: int, key: tuple, state: State) -> None:
        """An edge from ``src`` to the shape of ``state`` (a state with every
        partition served goes to the SERVED node, unrenamed); a shape not seen yet
        is expanded later."""
        served = _served(self.system, state)
        if served == self.system.cfg.all_partitions:
            self.edge(src, self.node(SERVED, served), key)
            return
        form = shape(state)
        k = self.identify(form)
        fresh = k not in self.ids
        dst = self.node(k, served)
        if fresh:
            self.forms[dst] = form
            self.parent[dst] = (src, key)
            self.frontier.append(dst)
        self.edge(src, dst, key)

    def expand(self, limit: int) -> bool:
        """Breadth first over the shapes the churn reached, until ``limit`` nodes
        exist: the system's own steps and the environment's free ones (no budget is
        left in a shape), and bounces. Returns whether nothing is left to expand."""
        system = self.system
        while self.frontier and len(self.served) < limit:
            i = self.frontier.popleft()
            s = self.forms[i]
            for a, n in system.successors(s) + system.churn_successors(s):
                self.reach(i, fairness_class(a), n)
        return not self.frontier


def _step(system, x: State, key: tuple, want: State) -> tuple:
    """The step from concrete ``x`` of fairness class ``key`` (up to renaming) to a
    state of shape ``want``, the budget ignored (the environment of a lasso is
    unbounded): ``(Action, State)``."""
    steps = system.successors(x._replace(faults_left=1)) + system.churn_successors(x)
    return next((a, n) for a, n in steps
                if fairness_class(a) == key and shape(n) == want)


def search(system, name: str, graph: Graph, summaries, state_at, stem_of, fair, identify=lambda form: form):
    """Look for the lasso described in the module docstring. ``graph``: every explored
    transition, environment ones included; ``summaries``: ``summary`` of each state,
    by graph index; ``state_at(i)``: state ``i``; ``stem_of(i)``: the path
    ``[(Action | None, State), ...]`` from the initial state to state ``i``;
    ``fair(class key)``: weak fairness of a class of the system's own actions;
    ``identify(shape)``: the key a summary gives a shape (a fingerprint on Spark).
    Returns a Violation (explore.Violation) or None."""
    q = _Quotient(system, identify)
    node_of = [q.node(("explored", i) if key is None else key, served)
               for i, (key, served, _) in enumerate(summaries)]
    rep: dict = {}
    for i in range(len(node_of) - 1, -1, -1):
        rep[node_of[i]] = i  # the first state of each shape
    offsets = memoryview(graph.offsets(len(node_of)))
    for i in range(len(node_of)):
        for k in range(offsets[i], offsets[i + 1]):
            q.edge(node_of[i], node_of[graph.dst[k]], graph.names[graph.cls[k]])
    for i, (_, _, bounces) in enumerate(summaries):
        for key, n in bounces:
            q.reach(node_of[i], key, n)
    limit = 2 * len(q.served)
    while True:  # expand in doubling steps, looking for a lasso after each
        done = q.expand(limit)
        found = _lasso(system, q, fair)
        if found or done:
            break
        limit *= 2
    if not found:
        return None

    def form_of(node: int) -> State:
        return q.forms[node] if node in q.forms else shape(state_at(rep[node]))

    p, (start, cycle, why), g = found
    path = _stem(system, q, rep, start, stem_of, form_of)
    loop_start = len(path) - 1
    for e in cycle:
        path.append(_step(system, path[-1][1], g.names[g.cls[e]], form_of(g.dst[e])))
    return _violation(system, name, p, path, loop_start, bool(cycle), why)


def _lasso(system, q: _Quotient, fair) -> tuple | None:
    """``(partition, find_lasso's answer, the quotient's Graph it is about)`` for
    the first partition with a lasso in the quotient so far, or None. A node not
    expanded yet counts as a goal: its edges are not all known, so no cycle may
    pass through it."""
    def fair_q(key):
        return not environmental(key) and fair(key)

    n = len(q.served)
    pending = set(q.frontier)
    graph = Graph.of(q.edges)
    for p in range(system.cfg.num_partitions):
        goal = bytearray(1 if q.served[x] >> p & 1 or x in pending else 0 for x in range(n))
        lasso = find_lasso(n, graph, goal, fair_q, required=lambda key: key[0] == "tick")
        if lasso is not None:
            return p, lasso, graph
    return None


def _stem(system, q: _Quotient, rep: dict, start: int, stem_of, form_of) -> list:
    """The path from the initial state to a state of node ``start``: the stem of an
    explored state, then the churn's edges that first reached ``start``."""
    hops = []
    at = start
    while at not in rep:
        src, key = q.parent[at]
        hops.append((key, at))
        at = src
    path = list(stem_of(rep[at]))
    for key, node in reversed(hops):
        path.append(_step(system, path[-1][1], key, form_of(node)))
    return path


def _violation(system, name: str, p: int, path: list, loop_start: int, cycles: bool, why: str) -> Violation:
    partition = system.cfg.partition_name(p)
    if not cycles:  # a stuttering lasso
        return Violation(name, f"{partition} is never served again: {why}", path, loop_start)
    loop = path[loop_start:]
    leaders = []
    for _, s in loop:
        if s.group.leader and (not leaders or leaders[-1] != s.group.leader):
            leaders.append(s.group.leader)
    ticks = sum(1 for a, _ in loop[1:] if a.kind == "tick")
    bounces = sum(1 for a, _ in loop[1:] if a.kind == "bounce")
    churn = " -> ".join(member_name(m) for m in leaders)
    reason = (f"{partition} is never served again: {why}; its {ticks} tick(s) pass while the leader "
              f"bounces {bounces} time(s) (leaders {churn}), and it ends in its first state up to renaming "
              f"of generations and member ids, so it repeats forever and the delay never ends")
    return Violation(name, reason, path, loop_start)
