"""No dead clause in the declarative spec (issue 14): for every spec action, every
pre- and post-condition clause (spec/actions.py, ``clauses``) has two spec
mutations that a test shows failing.

* ``negate:...``: on the model's own steps (a small exploration), the action with
  that clause negated refuses some step: the clause is reached, and true there.
* ``drop:...``: from a state the model reaches, the action without that clause
  admits a step (not a stutter) that the spec forbids: z3 finds it. The clause
  constrains something no other clause or case of the action does.

Actions the exploration never takes are listed in ``UNREACHED`` with the reason;
their clauses get the z3 test only.
"""
import pytest
import z3

from rebalance.checker import prove
from rebalance.checker.refinement import Refinement, action_name
from rebalance.checker.system import System
from rebalance.model.config import GroupConfig
from rebalance.spec import actions as spec

PARTITIONS = 3
# a member that leaves closes its connection, so the reply to its LeaveGroup is dropped (System.route); a rolling
# upgrade's bounce (R79) sends the old process's LeaveGroup on the new one's connection, which takes the reply
UNREACHED: dict = {}
ALL_FAULTS = ("join", "leave", "crash", "restart", "pause")


def _cfg(protocol="cooperative"):
    return GroupConfig(topics=(("t", PARTITIONS),), protocol=protocol,
                       assignor={"eager": "range", "streams": "streams"}.get(protocol, "cooperative-sticky"))


def quick_systems():
    """Small systems of 3 slots that together take every action but UNREACHED (about 1 s)."""
    return [System(_cfg(), 2, 1, ALL_FAULTS, 1),
            System(_cfg(), 1, 2, ("join", "crash", "restart"), 2),  # restarts, the timers, the initial delay
            System(_cfg(), 2, 1, ("crash", "restart", "pause"), 2, static=frozenset({0, 1, 2})),
            System(_cfg("deferred"), 2, 1, ("crash",), 1),  # ticks and ScheduledRebalanceTimeouts
            System(_cfg("streams"), 2, 1, ("join", "leave"), 1),  # learners ready, scale-down, shutdown
            System(_upgrade_cfg(), 2, 1, ("crash", "restart"), 1),  # a rolling upgrade's bounces (R79)
            System(_subscriptions_cfg(), 2, 1, ("subscribe", "create-topic", "join"), 2),  # R62, R63
            System(_cfg(), 2, 1, ("crash", "failover"), 2)]  # KIP-345's coordinator failover (R72)


def _upgrade_cfg():
    return GroupConfig(topics=(("t", PARTITIONS),), protocol="eager", assignor="range", upgrade=True)


def _subscriptions_cfg():
    """t of 2 partitions, v of 1 created mid-run; A subscribes to t, B and C to both (R61-R63)."""
    return GroupConfig(topics=(("t", PARTITIONS - 1), ("v", 1)), protocol="cooperative",
                       assignor="cooperative-sticky", subscriptions=(0b01, 0b11, 0b11), resubscriptions=(0b11, 0b01),
                       created_topics=0b10)


def full_systems():
    """Every protocol with every fault, budget 2 (the upgrade budget 1; about three minutes)."""
    return [System(_cfg(p), 2, 1, ALL_FAULTS, 2, static=frozenset(st))
            for p, st in (("eager", ()), ("cooperative", ()), ("cooperative", (0, 1, 2)), ("deferred", ()),
                          ("incremental", ()))] + [
        System(_cfg("streams"), 2, 1, ("join", "leave", "crash", "restart"), 2),  # learners, scale-down, shutdown
        System(_upgrade_cfg(), 2, 1, ALL_FAULTS, 1),  # a rolling upgrade (R79): budget 1, as examples/upgrade.toml
        System(_cfg(), 2, 1, ("crash", "failover"), 2),  # KIP-345's coordinator failover (R72)
        System(_subscriptions_cfg(), 2, 1, ("subscribe", "create-topic", "join", "crash"), 2)]  # R62, R63


def observe(systems) -> dict:
    """Every abstract step the systems take, explored exhaustively: ``{action name:
    {(slot, View, View'), ...}}``."""
    steps: dict = {}
    for system in systems:
        r = Refinement(system)
        init = system.initial()
        frontier, visited, seen = [init], {init}, set()
        while frontier:
            s = frontier.pop()
            before = r.parts(s)
            for action, n in system.successors(s):
                seen.add((action_name(action), action.slot, before, r.parts(n, s, before)))
                if n not in visited:
                    visited.add(n)
                    frontier.append(n)
        for name, slot, before, after in seen:
            steps.setdefault(name, set()).add((slot, r.assemble(before), r.assemble(after)))
    return steps


def _equal(symbolic: spec.View, v: spec.View):
    return z3.And(*(a == b for f, x in zip(symbolic, v) for a, b in (zip(f, x) if isinstance(f, tuple) else [(f, x)])))


class Reached:
    """The observed steps and a z3 solver whose state ``s`` is one the systems reach."""

    def __init__(self, systems):
        self.steps = observe(systems)
        slots = {len(v.live) for steps in self.steps.values() for _, v, _ in steps}
        assert len(slots) == 1
        self.slots = slots.pop()
        self.s = prove.symbolic_view("s", self.slots, PARTITIONS)
        self.t = prove.symbolic_view("t", self.slots, PARTITIONS)
        views = {v for steps in self.steps.values() for _, a, b in steps for v in (a, b)}
        self.solver = z3.Solver()
        self.solver.add(z3.Or(*(_equal(self.s, v) for v in views)))

    def refused_when_negated(self, clause: spec.Clause) -> bool:
        muts = frozenset({clause.mutation("negate")})
        return any(spec.evaluate(clause.action, v, w, slot, muts) for slot, v, w in self.steps[clause.action])

    def admitted_when_dropped(self, clause: spec.Clause):
        """A step (slot, s, t) the action admits without the clause and forbids with
        it, from a reached state, not a stutter; None if there is none."""
        L = spec.z3_logic()
        for i in range(self.slots):
            self.solver.push()
            self.solver.add(spec.encode(L, clause.action, self.s, self.t, i, frozenset({clause.mutation("drop")})),
                            z3.Not(spec.encode(L, clause.action, self.s, self.t, i)), z3.Not(_equal(self.t, self.s)))
            found = self.solver.check() == z3.sat
            model = self.solver.model() if found else None
            self.solver.pop()
            if found:
                return i, prove._concrete_view(model, self.s), prove._concrete_view(model, self.t)
        return None


# one xdist worker runs the module (make test: --dist loadgroup), so that ``reached``'s 18 s exploration runs
# once, not once a worker
pytestmark = pytest.mark.xdist_group("spec_clauses")


@pytest.fixture(scope="module")
def reached():
    return Reached(quick_systems())


CLAUSES = spec.clauses()
IDS = [f"{c.action}/{c.case}/{c.kind}/{c.clause}" for c in CLAUSES]


def test_clauses_are_enumerated_once_each():
    assert len(set(CLAUSES)) == len(CLAUSES) == 147
    assert set(c.action for c in CLAUSES) == set(spec.ACTIONS)


def test_the_exploration_takes_every_action_but_the_unreached(reached):
    assert set(spec.ACTIONS) - set(reached.steps) == set(UNREACHED)


@pytest.mark.parametrize("clause", CLAUSES, ids=IDS)
def test_negating_a_clause_fails_refinement(reached, clause):
    if clause.action in UNREACHED:
        assert clause.action not in reached.steps
        return
    assert reached.refused_when_negated(clause), f"{clause} is never reached true on the model's steps"


@pytest.mark.parametrize("clause", CLAUSES, ids=IDS)
def test_dropping_a_clause_admits_a_forbidden_step(reached, clause):
    found = reached.admitted_when_dropped(clause)
    assert found, f"{clause} forbids nothing, from any reached state, that the rest of its action allows"
    slot, s, t = found
    drop = frozenset({clause.mutation("drop")})
    assert spec.evaluate(clause.action, s, t, slot, drop) is None and spec.evaluate(clause.action, s, t, slot)


def test_unknown_clause_mutations_change_nothing():
    s = spec.View(spec.STABLE, 1, (True,), (True,), (1,), (0b1,), (0b1,), (False,), (0,), (True,), (-1,), (0b1,), (1,))
    t = s._replace(owned=(0b11,))
    assert spec.evaluate("SyncGroupResponse", s, t, 0) is not None
    assert spec.evaluate("SyncGroupResponse", s, t, 0, frozenset({"drop:Heartbeat:no such case:x"})) is not None


@pytest.mark.slow
def test_every_clause_is_live_on_every_protocol_with_budget_two():
    full = Reached(full_systems())
    assert set(spec.ACTIONS) - set(full.steps) == set(UNREACHED)
    for clause in CLAUSES:
        assert clause.action in UNREACHED or full.refused_when_negated(clause), clause
        assert full.admitted_when_dropped(clause), clause
