"""Known findings declared expected per configuration (issue 43, item 4;
checker/findings.py, spec/SPEC.md section 11): a configuration that reaches F1, F2
or F4 excuses the states of the finding's shape only, reports the finding reached
as a cover, and still fails on any other violation of the same property."""
import pytest

from conftest import run_cli

F1 = ("--members", "1", "--partitions", "2", "--static", "--faults", "join,crash,restart", "--max-faults", "3")
F4 = ("--static", "--members", "2", "--partitions", "2", "--max-faults", "2", "--faults", "remove,failover")


def _status(out) -> dict:
    return {p["name"]: p["status"] for p in out["properties"]}


@pytest.mark.parametrize("args, finding", [(F1, "F1"), (F4, "F4")], ids=["F1", "F4"])
def test_a_configuration_reaching_a_finding_holds_with_the_finding_reported(rebalance_check, args, finding):
    code, out = rebalance_check(*args, "--continue")
    assert code == 0 and {s for s in _status(out).values()} <= {"holds", "violated"}
    assert {n for n, s in _status(out).items() if s == "violated"} <= {"exclusive_processing"}  # expected with remove
    assert {c["name"]: c["reached"] for c in out["covers"]}[f"finding {finding}"]
    code, out = rebalance_check(*args, "--continue", "--expect-finding", "none")  # the finding itself
    assert code == 1 and _status(out)["quiescent_balance"] == "violated"


def test_a_new_bug_breaking_the_findings_property_still_changes_the_verdict(rebalance_check):
    """keep-revoked breaks eventual_balance in another shape (a member keeps what it
    was told to revoke): F1's excuse does not cover it."""
    code, out = rebalance_check(*F1, "--continue", "--mutation", "keep-revoked")
    assert code == 1 and _status(out)["eventual_balance"] == "violated"
    assert out["counterexample"]["property"] in ("refinement", "eventual_balance")


@pytest.mark.parametrize("value, problem", [("F9", "unknown name 'F9'"),
                                            ("none,F1", "none cannot be given with findings")])
def test_a_finding_misnamed_is_a_usage_error(value, problem):
    args = [x for v in value.split(",") for x in ("--expect-finding", v)]
    code, _, err = run_cli("check", *args)
    assert code == 2 and problem in err and "Traceback" not in err


def test_a_bug_ending_in_the_findings_state_is_not_excused(rebalance_check):
    """KAFKA-9801 (static-rejoin-completing-no-rebalance) strands a partition in F1's
    final state, but no static restart was answered from the stored assignment in a
    Stable group on its path: F1 is pinned by that history, so the bug is violated
    (F1 itself is still reached elsewhere in the same exploration)."""
    code, out = rebalance_check(*F1, "--continue", "--mutation", "static-rejoin-completing-no-rebalance")
    assert code == 1 and _status(out)["quiescent_balance"] == "violated"
    assert out["counterexample"]["property"] in ("refinement", "quiescent_balance", "eventual_balance")
