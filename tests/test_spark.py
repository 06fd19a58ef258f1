"""The Spark engine against the local engine: same counts and verdicts (real Spark, local mode)."""
import pytest

pytestmark = pytest.mark.slow

CONFIGS = [
    ("--protocol", "eager", "--faults", "join,leave,crash", "--max-faults", "1"),
    ("--static", "--faults", "restart,crash,leave"),
    ("--faults", "join,leave,crash,restart,pause", "--mutation", "no-commit-fencing"),  # a violation
    ("--faults", "crash,join", "--max-faults", "1", "--no-timer-fairness"),  # a liveness lasso
]


@pytest.mark.parametrize("args", CONFIGS, ids=["eager", "static", "mutation", "lasso"])
def test_spark_and_local_engines_agree(check_json, args):
    (lc, local), (sc, spark) = (check_json(*args, "--engine", e) for e in ("local", "spark"))
    keys = ("verdict", "distinct_states", "transitions", "max_depth")
    assert lc == sc and {k: local[k] for k in keys} == {k: spark[k] for k in keys}
    assert [p["status"] for p in local["properties"]] == [p["status"] for p in spark["properties"]]
    if local["counterexample"]:
        assert spark["counterexample"]["property"] == local["counterexample"]["property"]
        assert spark["counterexample"]["length"] == local["counterexample"]["length"]  # both shortest
