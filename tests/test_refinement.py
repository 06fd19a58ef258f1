"""Refinement: the model's steps are actions of the declarative spec (spec/actions.py)
and its states satisfy the spec's inductive invariant; a wrong spec action is caught."""
import json

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_cli
from rebalance.checker.engines.explore import explore
from rebalance.checker.engines.interning import Interner
from rebalance.checker.properties import applicable
from rebalance.checker.refinement import Refinement, _local_key, action_name
from rebalance.checker.system import System
from rebalance.model.config import GroupConfig
from rebalance.model.member import MemberPhase
from rebalance.model.protocol import Error, SyncGroupResponse
from rebalance.spec import actions as spec
from rebalance.spec.actions import PYTHON, View

SMALL = ("--members", "2", "--partitions", "3", "--faults", "join,leave,crash,restart", "--max-faults", "1")


def small_system(protocol="cooperative", **kw):
    assignor = "range" if protocol == "eager" else "cooperative-sticky"
    cfg = GroupConfig(topics=(("t", 3),), protocol=protocol, assignor=assignor)
    return System(cfg, 2, 1, ("join", "leave", "crash", "restart", "pause"), 1, **kw)


def view(**slots) -> View:
    """A two-slot view in Stable generation 1; keyword fields override slot tuples."""
    base = dict(phase=spec.STABLE, generation=1, live=(True, True), known=(True, True), member_generation=(1, 1),
                owned=(0b01, 0b10), assigned=(0b01, 0b10), granting=(False, False), grant=(0, 0), stable=(True, True),
                grant_generation=(-1, -1), claim=(0, 0), claim_generation=(-1, -1))
    base.update(slots)
    return View(**base)


@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
def test_check_reports_refinement_holding(rebalance_check, protocol):
    code, s = rebalance_check("--protocol", protocol, *SMALL)
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert code == 0 and status["refinement"] == "holds"


@pytest.mark.spec("R8")
def test_a_wrong_spec_action_fails_the_check_naming_it(rebalance_check, tmp_path):
    code, s = rebalance_check(*SMALL, "--spec-mutation", "late-sync-grants-nothing")
    assert code == 1 and s["verdict"] == "violated"
    cx = s["counterexample"]
    assert cx["property"] == "refinement" and "spec's action SyncGroup" in cx["reason"]
    doc = json.loads((tmp_path / "out" / "refinement.json").read_text())
    assert "SyncGroup" in doc["steps"][-1]["action"]["text"]  # the trace ends with the mismatched step


def test_unknown_spec_mutation_is_bad_input(tmp_path):
    code, _, err = run_cli("check", "--spec-mutation", "nope", cwd=tmp_path)
    assert code == 2 and "nope" in err


def test_every_transition_label_names_a_spec_action():
    system = small_system()
    seen = set()
    state = system.initial()
    frontier, visited = [state], {state}
    while frontier and len(visited) < 3000:
        s = frontier.pop()
        for action, n in system.successors(s):
            seen.add(action_name(action))
            if n not in visited:
                visited.add(n)
                frontier.append(n)
    assert seen <= set(spec.ACTIONS)
    assert {"JoinGroup", "SyncGroup", "SyncGroupResponse", "Crash"} <= seen


def explored_steps(system) -> list:
    """Every transition of ``system``'s exploration: ``[(State, Action, State)]``."""
    steps = []

    class Recorder:
        name, kind, applies, check, lasso, invariant, goal = "direct", "invariant", None, None, None, None, None

        @staticmethod
        def step(system_, s, a, n):
            steps.append((s, a, n))
            return None

    explore(system, [Recorder])
    return steps


def rows_of(interner, steps) -> tuple:
    """The engines' batch of ``steps``: id rows before and after, action indices, Actions."""
    before = np.array([interner.ids(s) for s, _, _ in steps], np.int64)
    after = np.array([interner.ids(n) for _, _, n in steps], np.int64)
    return before, after, np.arange(len(steps)), [a for _, a, _ in steps]


@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
def test_cached_verdicts_equal_direct_evaluation(protocol):
    # the cache key of a member's own step (its slot, the group, an unchanged frame) is sound
    system = small_system(protocol)
    r = Refinement(system)
    steps = explored_steps(system)
    assert len(steps) > 400
    interner = Interner()
    by_rows = r.on_rows(interner)
    before, after, aid, actions = rows_of(interner, steps)
    failing = dict(by_rows.step_rows(before, after, aid, actions))
    broken_inv = dict(by_rows.invariant_rows(after))
    for t, (s, a, n) in enumerate(steps):
        direct = spec.evaluate(action_name(a), r.view(s), r.view(n), a.slot)
        holds = spec.invariant_failure(r.view(n)) is None
        assert (r.step(s, a, n) is None) == (direct is None and holds)
        # the engines' parts on id rows: the step's spec action, and Inv once on the state it reaches
        assert (t not in failing) == (direct is None)
        assert (t not in broken_inv) == holds


@pytest.mark.parametrize("row_part_bits", [16, 1])
def test_verdicts_stay_right_when_the_cache_keys_widen(row_part_bits):
    # a step key packs part and view ids in fields of a few bits, widened (the cache emptied) when an id
    # outgrows them: from 1-bit fields, widened again and again, every verdict must still be the spec's,
    # on a wrong spec that fails some steps (a key that mixed two steps up would carry a verdict across);
    # on id rows, part ids past their packed field (1 bit: almost all) are keyed as on States
    system = small_system(spec_mutations={"late-sync-grants-nothing"})
    steps = explored_steps(system)
    r = Refinement(system)
    r._part_bits = r._view_bits = 1
    r.row_part_bits = row_part_bits
    interner = Interner()
    failing = dict(r.on_rows(interner).step_rows(*rows_of(interner, steps)))
    for t, (s, a, n) in enumerate(steps):
        direct = spec.evaluate(action_name(a), r.view(s), r.view(n), a.slot, system.spec_mutations)
        assert (t not in failing) == (direct is None)
        if direct:
            assert failing[t].endswith(direct)
    assert 0 < len(failing) < len(steps)  # the check passes some steps and fails others
    assert r._part_bits > 1
    assert r._view_bits > 1 or row_part_bits == 16  # the packed path numbers its views apart (``_view_rows``)


def test_a_widened_key_layout_starts_the_verdict_cache_afresh():
    # keys packed under the narrower fields could equal other steps' keys under the wider ones
    r = Refinement(small_system())
    r._passed.add(5)
    r._failed[6] = "why"
    assert r._room(4095, 12) == 12 and r._passed == {5} and r._failed == {6: "why"}
    assert r._room(4096, 12) == 20 and not r._passed and not r._failed


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 20).flatmap(lambda bits: st.tuples(st.just(bits), st.lists(st.tuples(
    st.integers(0, 127), st.integers(0, 300), *[st.integers(0, (1 << bits) - 1)] * 3), min_size=2, max_size=20))))
def test_a_local_step_key_tells_every_step_apart(case):
    # a member's own step is keyed by its label, slot and three part ids packed in one int: no two steps
    # may share a key, or one's verdict would be taken for the other's
    bits, steps = case
    assert len({_local_key(*step, bits) for step in steps}) == len(set(steps))


def test_the_initial_state_satisfies_init_and_the_invariant():
    for static in (frozenset(), frozenset({0, 1})):
        system = small_system(static=static)
        v = Refinement(system).view(system.initial())
        assert spec.initial(PYTHON, v) and spec.invariant(PYTHON, v)
        assert v.phase == spec.STABLE and v.known[:2] == (True, True) and v.owned[0] | v.owned[1] == 0b111


@pytest.mark.spec("R18")
def test_granted_case_owns_exactly_the_grant():
    s = view(granting=(True, False), grant=(0b11, 0), grant_generation=(1, -1), assigned=(0b11, 0b00),
             owned=(0b01, 0b00))
    good = s._replace(granting=(False, False), grant=(0, 0), grant_generation=(-1, -1), owned=(0b11, 0b00))
    assert spec.evaluate("SyncGroupResponse", s, good, 0) is None
    bad = good._replace(owned=(0b111, 0b00))
    assert "owns exactly the grant" in spec.evaluate("SyncGroupResponse", s, bad, 0)


def revoking_grant(system):
    """The first state (breadth first) in which a member is about to handle a grant
    that revokes some of what it owns, with that step: ``(state, action, next)``."""
    state = system.initial()
    frontier, visited = [state], {state}
    while frontier:
        s = frontier.pop(0)
        for action, n in system.successors(s):
            r = action.detail
            if (action.kind == "reply" and type(r) is SyncGroupResponse and r.error == Error.NONE
                    and s.procs[action.slot].consumer.owned & ~r.assignment.partitions):
                return s, action, n
            if n not in visited:
                visited.add(n)
                frontier.append(n)
    raise AssertionError("no revoking grant reachable")


@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
def test_a_grant_reaches_only_a_syncing_member(protocol):
    # why SyncGroupResponse's "granted" case has no "ignores it" alternative (spec/SPEC.md, section 8)
    system = small_system(protocol)
    state = system.initial()
    frontier, visited, grants = [state], {state}, 0
    while frontier:
        s = frontier.pop()
        for action, n in system.successors(s):
            r = action.detail
            if action.kind == "reply" and type(r) is SyncGroupResponse and r.error == Error.NONE:
                grants += 1
                assert s.procs[action.slot].consumer.phase == MemberPhase.SYNCING
            if n not in visited:
                visited.add(n)
                frontier.append(n)
    assert grants > 10


@pytest.mark.spec("R18")
def test_a_member_ignoring_its_revocation_is_refused():
    # issue 14: the member keeps what it was told to revoke (owned 0b011, grant 0b001, owned after 0b011)
    system = small_system()
    state, action, nxt = revoking_grant(system)
    r = Refinement(system)
    assert r.step(state, action, nxt) is None  # the model's own step: owns exactly the grant
    p = nxt.procs[action.slot]
    kept = p._replace(consumer=p.consumer._replace(owned=state.procs[action.slot].consumer.owned))
    ignoring = nxt._replace(procs=nxt.procs[:action.slot] + (kept,) + nxt.procs[action.slot + 1:])
    why = r.step(state, action, ignoring)
    assert why is not None and "SyncGroupResponse" in why and "owns exactly the grant (R18)" in why


@pytest.mark.spec("R22", "R23")
def test_install_refuses_an_assignment_of_what_another_member_claims_no_older():
    # the leader knows the recorded subscriptions (claims and their generation), not what members own now
    s = view(phase=spec.COMPLETING, assigned=(0, 0), stable=(False, False), claim=(0b01, 0b10), claim_generation=(1, 1))
    fine = s._replace(phase=spec.STABLE, assigned=(0b01, 0b10))
    assert spec.evaluate("SyncGroup", s, fine, 0) is None
    grabbing = s._replace(phase=spec.STABLE, assigned=(0b11, 0b00))  # slot 0 gets what slot 1 claims
    assert "R23" in spec.evaluate("SyncGroup", s, grabbing, 0)
    # a newer claim of the same partition wins it (R22): slot 0 claims t-1 at generation 2, slot 1 at 1
    newer = s._replace(claim=(0b11, 0b10), claim_generation=(2, 1))
    assert spec.evaluate("SyncGroup", newer, newer._replace(phase=spec.STABLE, assigned=(0b11, 0)), 0) is None
    # what slot 1 owns beyond its claim (F2: a paused static member granted more since) may go elsewhere
    stale = s._replace(owned=(0b01, 0b11), claim=(0b01, 0b10))
    assert spec.evaluate("SyncGroup", stale, stale._replace(phase=spec.STABLE, assigned=(0b01, 0b10)), 0) is None
    assert spec.evaluate("SyncGroup", stale, stale._replace(phase=spec.STABLE, assigned=(0b11, 0b00)), 0)


def test_invariant_names_the_broken_clause():
    assert spec.invariant_failure(view()) is None
    assert spec.invariant_failure(view(owned=(0b01, 0b01), assigned=(0, 0))) == "disjoint holdings"
    assert spec.invariant_failure(view(live=(False, True))) == "well-formed slots"
    assert spec.invariant_failure(view(phase=spec.COMPLETING, assigned=(0, 0))) == \
        "nothing of a completing generation held"
    # owners fenced off by their generation or phase hold nothing of the current generation (R9, R41)
    assert spec.invariant_failure(view(owned=(0b01, 0b01), assigned=(0, 0), member_generation=(0, 1))) is None
    assert spec.invariant_failure(view(owned=(0b01, 0b01), assigned=(0, 0), stable=(True, False))) is None


def test_a_dead_processs_member_id_beside_its_successors_refines(rebalance_check):
    """Found by random walks: a slot whose process crashed and restarted has two member
    ids in the group until the old one's session times out (R11), the leader assigns to
    both, and the new one's late SyncGroup is granted its own assignment. The
    abstraction took the union of the slot's assignments, so the grant looked short of
    it; a slot's stored assignment is its newest member's (the only one a request can
    speak for). Budget 4: two crash-restarts. (2,132 states since R3 keeps stored
    assignments through a rebalance started from Stable; 1,871 since issue 38's
    extension of the initial delay, R30; 1,869 before.)"""
    code, out = rebalance_check("--members", "2", "--partitions", "2", "--faults", "crash,restart", "--max-faults", "4")
    status = {p["name"]: p["status"] for p in out["properties"]}
    assert code == 0 and status["refinement"] == "holds" and out["distinct_states"] == 2132, out


@pytest.mark.spec("R22", "R23", "R27")
def test_a_paused_static_member_kept_by_the_rebalance_timeout_refines():
    """Once a strict xfail: findings F2 and F3 (spec/SPEC.md section 11) are Kafka's
    behaviour, and the spec now says what Kafka guarantees: the leader's assignment
    respects the recorded subscriptions (R23 over claims), and only members settled
    in the current generation hold anything (the inductive invariant). Every state
    up to F2's (the install that gives away what the paused member owns beyond its
    claim, 15 steps) refines; the whole space at budget 4 (F3 too)
    is tests/test_kafka_findings.py's slow test."""
    from rebalance.checker.settings import resolve
    system = resolve({}, members=2, partitions=2, faults=["crash", "restart", "pause"], budget=4, static=True).system()
    props = [p for p in applicable(system) if p.name in ("refinement", "revoke_before_assign", "exclusive_ownership")]
    r = explore(system, props, stop_on={"revoke_before_assign"})
    assert r.statuses["revoke_before_assign"] == "violated" and len(r.violations) == 1  # F2 reached
    assert r.statuses["refinement"] == r.statuses["exclusive_ownership"] == "incomplete"  # neither broken


def test_a_second_exploration_of_the_same_system_gets_fresh_id_caches():
    # the refinement check keys its caches by the engine's interned ids (checker/engines/steps.py); a
    # second exploration interns states in another order, so ids from the first must not be reused
    system = small_system()
    props = [p for p in applicable(system) if p.name == "refinement"]
    later = system.successors(system.successors(system.initial())[-1][1])[-1][1]  # ids handed out in another order
    explore(system, props, initial=later)
    again = explore(system, props)
    fresh = explore(small_system(), props)
    assert again.statuses == fresh.statuses == {"refinement": "holds"}
    assert (again.distinct_states, again.transitions) == (fresh.distinct_states, fresh.transitions)


@st.composite
def any_view(draw, slots: int = 3) -> View:
    """Any View of ``slots`` client slots over 3 partitions (not only reachable ones)."""
    def per_slot(values):
        return tuple(draw(st.lists(values, min_size=slots, max_size=slots)))
    masks = st.integers(0, 0b111)
    generations = st.integers(spec.NO_GENERATION, 3)
    return View(draw(st.sampled_from([spec.EMPTY, spec.PREPARING, spec.COMPLETING, spec.STABLE, spec.DEAD])),
                draw(st.integers(0, 3)), per_slot(st.booleans()), per_slot(st.booleans()),
                per_slot(generations), per_slot(masks), per_slot(masks), per_slot(st.booleans()),
                per_slot(masks), per_slot(st.booleans()), per_slot(generations), per_slot(masks),
                per_slot(generations))


@settings(max_examples=300, deadline=None)
@given(any_view(), st.integers(0, 2))
def test_an_action_that_admits_stutters_holds_on_every_stutter(s, slot):
    # step_rows passes a step that changes no part unevaluated when its action admits stutters
    # (spec.admits_stutters): the spec must agree on any View; the others are evaluated
    admitting = [name for name in spec.ACTIONS if spec.admits_stutters(name)]
    assert {"SyncGroup", "Heartbeat", "OffsetCommit"} <= set(admitting)
    for name in admitting:
        assert spec.evaluate(name, s, s, slot) is None, name


def test_a_stutter_is_checked_once_a_clause_mutation_could_refuse_it():
    # with the stutter case's clause negated, SyncGroup no longer admits stutters: the model's stutter
    # SyncGroups (a late one answered with what the member already has) are evaluated and refused
    negated = "negate:SyncGroup:no abstract change:nothing abstract changes"
    assert spec.admits_stutters("SyncGroup") and not spec.admits_stutters("SyncGroup", {negated})
    system = small_system(spec_mutations={negated})
    r = Refinement(system)
    steps = explored_steps(system)
    interner = Interner()
    failing = dict(r.on_rows(interner).step_rows(*rows_of(interner, steps)))
    stutters = [t for t, (s, a, n) in enumerate(steps)
                if action_name(a) == "SyncGroup" and r.view(s) == r.view(n)]
    assert stutters and all(t in failing for t in stutters)


def test_inv_on_arrival_fails_where_the_spec_says_on_a_wrong_model():
    # invariant_rows decides Inv once per view id (its marks): on a model that assigns a partition twice,
    # the states it reaches whose views break Inv must be exactly those spec.invariant_failure names,
    # each with the clause, asked in two batches so that the second finds views the first marked
    from rebalance.checker.settings import resolve
    system = resolve({}, members=2, partitions=3, faults=["join", "leave", "crash", "restart"],
                     mutations=("assign-twice",)).system()
    steps = explored_steps(system)
    r, interner = Refinement(system), Interner()
    after = rows_of(interner, steps)[1]
    half = len(after) // 2
    by_rows = r.on_rows(interner)
    broken = dict(by_rows.invariant_rows(after[:half]))
    broken.update((t + half, why) for t, why in by_rows.invariant_rows(after[half:]))
    direct = {t: why for t, (_, _, n) in enumerate(steps) for why in (spec.invariant_failure(r.view(n)),) if why}
    assert direct and broken == {t: f"the inductive invariant's clause '{why}' fails" for t, why in direct.items()}


@settings(max_examples=300, deadline=None)
@given(any_view(), any_view(), st.integers(0, 2))
def test_an_action_that_reads_no_claims_gives_one_verdict_whatever_the_claims(s, t, slot):
    # step_rows and invariant_rows key such actions, and Inv, by views without the recorded claims
    blank = dict(claim=(0,) * 3, claim_generation=(spec.NO_GENERATION,) * 3)
    free = [name for name in spec.ACTIONS if not spec.reads_claims(name)]
    assert {"JoinGroup", "LeaveGroup", "SessionTimeout", "Failover"} <= set(free) and "SyncGroup" not in free
    for name in free:
        assert spec.evaluate(name, s, t, slot) == spec.evaluate(name, s._replace(**blank), t._replace(**blank), slot)
    assert spec.invariant_failure(s) == spec.invariant_failure(s._replace(**blank))
