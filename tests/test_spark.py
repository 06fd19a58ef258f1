"""The Spark engine against the local engine: same counts, verdicts and
counterexamples, lassos included (real Spark, local mode)."""
import pytest

pytestmark = pytest.mark.slow

CONFIGS = [
    ("--protocol", "eager", "--faults", "join,leave,crash", "--max-faults", "1"),
    ("--static", "--faults", "restart,crash,leave"),
    ("--faults", "join,leave,crash,restart,pause", "--mutation", "no-commit-fencing"),  # a violation
    ("--faults", "crash,join", "--max-faults", "1", "--no-timer-fairness"),  # a stuttering lasso
    ("--faults", "join,crash", "--max-faults", "1", "--mutation", "keep-revoked", "--continue"),  # a storm
    # bounded_deferral's churn lasso (the bounces are expanded on the driver from the executors' summaries)
    ("--protocol", "deferred", "--members", "2", "--partitions", "2", "--faults", "join,leave,crash,restart",
     "--mutation", "leader-forgets-delay"),
]


@pytest.mark.parametrize("args", CONFIGS, ids=["eager", "static", "mutation", "stutter", "storm", "churn"])
def test_spark_and_local_engines_agree(rebalance_check, args):
    (lc, local), (sc, spark) = (rebalance_check(*args, "--engine", e) for e in ("local", "spark"))
    keys = ("verdict", "distinct_states", "transitions", "max_depth")
    assert lc == sc and {k: local[k] for k in keys} == {k: spark[k] for k in keys}
    assert [p["status"] for p in local["properties"]] == [p["status"] for p in spark["properties"]]
    assert local["counterexamples"] == spark["counterexamples"]
    if local["counterexample"]:
        for k in ("property", "length", "loop_start", "reason"):
            assert spark["counterexample"][k] == local["counterexample"][k]
