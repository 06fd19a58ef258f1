"""``bounded_deferral`` under unbounded leader churn: can a lost partition stay
unowned forever while time passes, whatever leader changes the environment makes?

Every explored path is finite (the fault budget), but a path from a state ``s``
to a state of the same shape (checker/renaming.py: equal up to renaming of
generations, member ids and epochs) is the loop of an infinite execution. So the
search runs on the explored graph *quotiented by renaming*, with the
environment's actions (join, leave, crash, restart, pause, resume) allowed in
cycles but not fair. For each partition ``p``, a counterexample is a lasso that
never reaches a state where ``p`` is owned and whose cycle

* lets time pass: it takes a ``tick`` (a cycle without one is a Zeno run: endless
  leader changes in no time, which no deadline can bound); and
* is weakly fair (checker/liveness.py) for the system's own actions; timer
  classes are per client slot here, as member ids are renamed.

Under the seed's Design II (``--mutation leader-forgets-delay``) each new leader
starts the delay again, and the lasso shows the churn; with the deadline carried
in the assignment (R31, R32) every tick brings it nearer and no such cycle exists.
"""
from __future__ import annotations

from rebalance.model.protocol import member_name, slot_of, union

from .explore import Violation, environmental, fairness_class
from .liveness import Graph, find_lasso
from .renaming import shape
from .system import State, processing


def class_up_to_renaming(key: tuple) -> tuple:
    """A fairness class with its member id (a timer's) replaced by the client slot."""
    if key[0] == "timer" and key[2]:
        return key[:2] + (slot_of(key[2]),)
    return key


def summary(system, state: State) -> tuple:
    """What the search needs of each explored state: ``(shape key, partitions
    processed)``; the key is the shape itself (the Spark engine sends a fingerprint
    of it instead), or None where every partition is processed: such a state is a
    goal for every partition, never on a lasso, and needs no renaming."""
    owned = union(c.owned for c in processing(state))
    return (None if owned == (1 << system.cfg.num_partitions) - 1 else shape(state)), owned


def search(system, name: str, graph: Graph, summaries, state_at, stem_of, fair):
    """Look for the lasso described in the module docstring. ``graph``: every explored
    transition, environment ones included; ``summaries``: ``summary`` of each state,
    by graph index; ``state_at(i)``: state ``i``; ``stem_of(i)``: the path
    ``[(Action | None, State), ...]`` from the initial state to state ``i``;
    ``fair(class key)``: weak fairness of a class of the system's own actions.
    Returns a Violation (explore.Violation) or None."""
    ids: dict = {}
    shape_of = [ids.setdefault(("every partition owned", i) if key is None else key, len(ids))
                for i, (key, _) in enumerate(summaries)]
    rep = [-1] * len(ids)
    for i in range(len(shape_of) - 1, -1, -1):
        rep[shape_of[i]] = i  # the first state of each shape
    q = Graph()
    seen: set = set()
    witness = []  # quotient edge -> a concrete edge
    for k in range(len(graph.src)):
        key = graph.names[graph.cls[k]]
        edge = (shape_of[graph.src[k]], shape_of[graph.dst[k]], class_up_to_renaming(key))
        if edge not in seen:
            seen.add(edge)
            q.add(*edge)
            witness.append(k)
    owned = [summaries[i][1] for i in rep]

    def fair_q(key):
        return not environmental(key) and fair(key)

    for p in range(system.cfg.num_partitions):
        goal = bytearray(1 if owned[x] >> p & 1 else 0 for x in range(len(ids)))
        lasso = find_lasso(len(ids), q, goal, fair_q, required=lambda key: key[0] == "tick")
        if lasso is None:
            continue
        start, cycle, why = lasso
        path = list(stem_of(rep[start]))
        loop_start = len(path) - 1
        x = path[-1][1]
        for e in cycle:
            want = shape(state_at(graph.dst[witness[e]]))
            key = q.names[q.cls[e]]
            action, x = next((a, m) for a, m in system.successors(x._replace(faults_left=1))
                             if class_up_to_renaming(fairness_class(a)) == key and shape(m) == want)
            path.append((action, x))
        loop = path[loop_start:]
        leaders = []
        for _, s in loop:
            if s.group.leader and (not leaders or leaders[-1] != s.group.leader):
                leaders.append(s.group.leader)
        ticks = sum(1 for a, _ in loop[1:] if a.kind == "tick")
        churn = " -> ".join(member_name(m) for m in leaders)
        if not cycle:  # a stuttering lasso
            return Violation(name, f"{system.cfg.partition_name(p)} is never owned again: {why}", path, loop_start)
        reason = (f"{system.cfg.partition_name(p)} is never owned again: {why}; its {ticks} tick(s) pass "
                  f"with leaders {churn}, and it ends in its first state up to renaming of generations and "
                  f"member ids, so it repeats forever and the delay never ends")
        return Violation(name, reason, path, loop_start)
    return None
