"""`rebalance prove`: the z3 obligations, their counterexamples, the transcription
of the sticky assignors and the inductive invariant."""
import json
import random

import pytest

from conftest import run_cli
from rebalance.checker import prove
from rebalance.spec.actions import PYTHON

SMALL = ("--max-members", "3", "--max-partitions", "5", "--max-counting-partitions", "4")
TINY = ("--max-members", "2", "--max-partitions", "3", "--max-counting-partitions", "3")


def prove_json(tmp_path, *args, bound=SMALL):
    code, out, err = run_cli("prove", *bound, *args, "--json", cwd=tmp_path)
    assert out, err
    return code, json.loads(out)["obligations"]


def only_counterexample(tmp_path, mutation: str, obligation: str, also=()) -> dict:
    """`prove --mutation MUTATION` at the tiny bound exits 1 with one obligation,
    named ``obligation`` (and those named ``also``), failing: its counterexample."""
    code, obligations = prove_json(tmp_path, "--mutation", mutation, bound=TINY)
    assert code == 1
    bad = [o for o in obligations if o["status"] == "counterexample"]
    assert [o["name"] for o in bad] == [obligation, *also]
    return bad[0]["counterexample"]


@pytest.mark.slow  # 15 s on an idle 2-core machine: in CI by its subset (.ci/slow); the tiny bound in the default suite
@pytest.mark.spec("R22", "R23")
def test_every_obligation_proved_on_a_small_bound(tmp_path):
    code, obligations = prove_json(tmp_path)
    assert code == 0
    assert {o["status"] for o in obligations} == {"proved"}
    names = [o["name"] for o in obligations]
    for needed in ("range", "roundrobin", "sticky: exactly once", "cooperative-sticky: loads within one",
                   "never assigned while claimed elsewhere", "moves no more than the balanced minimum",
                   "init ⇒ inv", "inv ∧ next ⇒ inv′", "inv ⇒ exclusive_ownership",
                   "Design III: moves within the allowance", "Design II: lost partitions held once"):
        assert any(needed in n for n in names), needed
    assert all(o["seconds"] >= 0 and o["bound"] and o["counterexample"] is None for o in obligations)
    assert len(obligations) == 14
    # the z3 obligations speak of the transcription; the tie to the model says how far it reaches
    assert obligations[2]["bound"].startswith("the transcription: members 1..3, partitions 1..5, any claims, "
                                              "any generations (0..7)")
    tie = next(o for o in obligations if o["name"] == "transcription agrees with model/assignors.py")
    assert "claim resolution (R22): members 1..3, every generation vector in 0..7" in tie["bound"]


@pytest.mark.spec("R23")
def test_weakened_assignor_gives_a_concrete_counterexample(tmp_path):
    cx = only_counterexample(tmp_path, "assign-before-revoke",
                             "cooperative-sticky: exactly once, never assigned while claimed elsewhere",
                             also=("differing subscriptions: subscribers only, exactly once, balanced (R61, R65)",))
    # replay the input on the model's own assignor: a partition claimed by one member goes to another, or
    # a partition claimed by several at one generation goes to someone (the adjustment skipped altogether)
    claims = [[f"t-{p}" in m["claims"] for p in range(cx["partitions"])] for m in cx["input"]]
    gens = [m["generation"] or 0 for m in cx["input"]]
    owners = prove.resolve(PYTHON, claims, gens)
    given = prove.model_assignment("cooperative-sticky", cx["partitions"], claims, gens,
                                   frozenset({"assign-before-revoke"}))
    assert any(g >= 0 and (o == prove.CONTESTED or 0 <= o != g) for o, g in zip(owners, given))


@pytest.mark.spec("R22", "R23")
def test_contested_partition_given_out_at_once_fails_prove(tmp_path):
    # issue 15: the model before it gave a partition claimed twice in one generation to a third member
    # in the same round; CooperativeStickyAssignor.adjustAssignment withholds it
    cx = only_counterexample(tmp_path, "contested-claims-unowned",
                             "cooperative-sticky: exactly once, never assigned while claimed elsewhere")
    assert [v for v in cx["violates"] if "several members at its newest generation" in v]
    claims = [[f"t-{p}" in m["claims"] for p in range(cx["partitions"])] for m in cx["input"]]
    gens = [m["generation"] or 0 for m in cx["input"]]
    owners = prove.resolve(PYTHON, claims, gens)
    given = prove.model_assignment("cooperative-sticky", cx["partitions"], claims, gens,
                                   frozenset({"contested-claims-unowned"}))
    assert any(o == prove.CONTESTED and g >= 0 for o, g in zip(owners, given))
    assert all(g == -1 for o, g in zip(owners, prove.model_assignment("cooperative-sticky", cx["partitions"], claims,
                                                                        gens)) if o == prove.CONTESTED)


@pytest.mark.spec("R18")
def test_wrong_spec_action_breaks_the_induction(tmp_path):
    # a member that keeps what its grant revokes: settled in the current generation, it owns what another
    # member holds of it (the planted spec mutation of issue 43)
    code, obligations = prove_json(tmp_path, "--spec-mutation", "granted-keeps-revoked", bound=TINY)
    assert code == 1
    step = next(o for o in obligations if o["name"] == "inductive invariant: inv ∧ next ⇒ inv′")
    assert step["status"] == "counterexample" and step["counterexample"]["action"] == "SyncGroupResponse"
    assert step["counterexample"]["broken"] == "disjoint holdings"
    # the correct spec proves it (test_text_output_lists_each_obligation_with_its_time), and the model meets the
    # weaker action: refinement alone cannot tell the two specs apart
    code, out, _ = run_cli("check", "--members", "2", "--partitions", "3", "--faults", "join,crash", "--max-faults",
                           "1", "--spec-mutation", "granted-keeps-revoked", "--json", cwd=tmp_path)
    assert code == 0 and {p["name"]: p["status"] for p in json.loads(out)["properties"]}["refinement"] == "holds"


@pytest.mark.parametrize("args", [("--max-members", "0"), ("--max-partitions", "99")])
def test_bad_bounds_are_bad_input(tmp_path, args):
    code, _, err = run_cli("prove", *args, cwd=tmp_path)
    assert code == 2 and args[0] in err


def test_text_output_lists_each_obligation_with_its_time(tmp_path):
    code, out, _ = run_cli("prove", *TINY, cwd=tmp_path)
    assert code == 0 and "14 obligations" in out and "all proved" in out
    assert sum(line.split()[0] == "proved" for line in out.splitlines() if line.strip()) == 14 and " s  " in out


@pytest.mark.spec("R22")
def test_generations_compared_modulo_4_fail_prove(tmp_path):
    # issue 14: a model that weighs claims by generation modulo 4 must not get "all proved"
    cx = only_counterexample(tmp_path, "generation-mod-4", "transcription agrees with model/assignors.py")
    gens = [m["generation"] for m in cx["input"] if m["claims"]]
    assert max(gens) >= 4 and cx["model_owners"] != cx["transcription_owners"]
    # the model itself: a partition claimed by A at generation 0 and B at 4 ties, so B, its owner, loses it
    claims = [[True], [True]]
    assert prove.model_assignment("cooperative-sticky", 1, claims, [0, 4]) == [1]
    assert prove.model_assignment("cooperative-sticky", 1, claims, [0, 4], {"generation-mod-4"}) == [-1]


@pytest.mark.slow  # 12 s on CI's 2 cores: in CI by its subset (.ci/slow)
def test_the_tie_check_covers_generations_beyond_3():
    # the claim-resolution part alone catches the mutation, at 2 members, whatever the sample draws
    count = [0]
    cx = prove._resolution_mismatch(2, 3, frozenset({"generation-mod-4"}), count)
    assert cx["members"] == 2 and {m["generation"] for m in cx["input"]} == {0, 4}
    assert prove._resolution_mismatch(5, 10, frozenset(), [0]) is None


def test_unknown_prove_mutation_is_bad_input(tmp_path):
    code, _, err = run_cli("prove", *TINY, "--mutation", "nope", cwd=tmp_path)
    assert code == 2 and "nope" in err


@pytest.mark.spec("R22")
@pytest.mark.parametrize("mutations", [frozenset(), frozenset({"ignore-owned-generation"})])
def test_transcription_matches_the_model_on_random_inputs(mutations):
    rng = random.Random(11)
    for _ in range(300):
        m, n, claims, gens = prove._random_input(rng, 5, 10)
        x = prove.transcribe_sticky(PYTHON, m, prove.resolve(PYTHON, claims, gens, mutations), True, mutations)
        assert prove.model_assignment("sticky", n, claims, gens, mutations) == x.target
        assert prove.model_assignment("cooperative-sticky", n, claims, gens, mutations) == x.final
        assert x.fill  # the greedy fill is one of the abstraction's legal fills


def test_minimum_moves():
    # A owns all 4 partitions, B nothing: a balanced assignment must move 2
    assert prove.minimum_moves(2, [0, 0, 0, 0]) == 2
    assert prove.minimum_moves(3, [0, 1, 2, -1]) == 0


@pytest.mark.slow
def test_default_bound_all_proved(tmp_path):
    # the bound: members <= 5, partitions <= 10 (balance and minimal moves up to 6)
    code, out, err = run_cli("prove", "--json", cwd=tmp_path)
    obligations = json.loads(out)["obligations"]
    assert code == 0 and {o["status"] for o in obligations} == {"proved"}, err
    assert len(obligations) == 14
    assert obligations[2]["bound"].startswith("the transcription: members 1..5, partitions 1..10")
    tie = next(o for o in obligations if o["name"] == "transcription agrees with model/assignors.py")
    assert tie["bound"].endswith("claim resolution (R22): members 1..5, every generation vector in 0..7, every set "
                                 "of claimants (139,848 inputs)")


@pytest.mark.spec("R61", "R65")
def test_an_assignor_ignoring_subscriptions_gives_a_concrete_counterexample(tmp_path):
    cx = only_counterexample(tmp_path, "assign-unsubscribed",
                             "differing subscriptions: subscribers only, exactly once, balanced (R61, R65)")
    # the smallest input: A subscribes to t0 only and is given t1's partition
    assert cx["subscriptions"] == {"A": ["t0"]} and cx["model_assignment"] == {"A": ["t0-0", "t1-0"]}
    assert "not subscribed" in cx["violates"]


@pytest.mark.spec("R34", "R67")
@pytest.mark.parametrize("mutation,violates", [
    ("max-moves-off-by-one", "moves 2 partitions, more than the 1 max_moves 1 pays for"),
    ("moves-ignore-cost", "moves 2 connectors, more than the 1 max_moves 2 pays for")])
def test_the_move_allowance_obligation_catches_a_round_moving_too_much(mutation, violates):
    """Design III's allowance (checker/round_obligations.py), judged by R67's formula
    written there, not the model's ``_move_allowance``: each mutation gives a round
    that moves one resource too many, and the concrete input replays it."""
    from rebalance.checker import round_obligations
    why, cx, _ = round_obligations.allowance_obligation(3, 5, frozenset({mutation}))
    assert why == violates
    assert round_obligations.allowance_obligation(3, 5)[0] is None
    moved = [p for member in cx["input"] for p in member["claims"] if p not in cx["output"][member["member"]]["assigned"]]
    assert len(moved) == 2


@pytest.mark.spec("R31", "R33")
def test_the_deferral_obligation_catches_a_leader_that_forgets_the_delay():
    """The seed's Design II as written (the delay in the leader's memory): a new
    leader holds lost partitions back although a member with nothing could take them
    (R33), and the obligation says so with the round (judged by
    checker/round_obligations.py's own reading of R32, R33, R40; the correct model
    holds it, and `prove` lists it, in test_every_obligation_proved_on_a_small_bound)."""
    from rebalance.checker import round_obligations
    why, cx, _ = round_obligations.deferral_obligation(*round_obligations.DEFERRAL, frozenset({"leader-forgets-delay"}))
    assert why == "lost partitions held back while a member that owns nothing is there"
    assert any(not m["claims"] for m in cx["input"])
    assert any(a["scheduled"] for a in cx["output"].values())
    assert round_obligations.deferral_obligation(*round_obligations.DEFERRAL)[0] is None
