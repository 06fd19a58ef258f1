"""The Spark engine on a Spark standalone cluster, not local mode (issue 44 item 3):
a master and two workers on loopback (checker/spark_standalone.py, Spark's own
Master and Worker started by pyspark's spark-class), the exploration and a walk
campaign run on it with the local engine's counts, verdicts and counterexamples."""
import json
import os

import pytest

from test_walks import untimed

from rebalance.checker.spark_standalone import LoopbackCluster

pytestmark = pytest.mark.slow

SAME = ("verdict", "distinct_states", "transitions", "max_depth", "properties", "actions_fired", "covers",
        "counterexamples")


@pytest.fixture(scope="module")
def cluster():
    """Two workers with, together, a core for each of the engine's owners (one per core here)."""
    with LoopbackCluster(workers=2, cores=-(-(os.cpu_count() or 2) // 2)) as c:
        yield c


def _traces(out) -> dict:
    """The counterexamples written under ``out`` (JSON and ITF), without the header
    that names the engine."""
    traces = {}
    for path in out.glob("*.json"):
        trace = json.loads(path.read_text())
        trace.pop("configuration", None), trace.pop("#meta", None)
        traces[path.name] = trace
    return traces


@pytest.mark.parametrize("args", [
    (),  # the main job
    ("--members", "2", "--partitions", "2", "--mutation", "assign-before-revoke"),  # a counterexample
], ids=["main-job", "violation"])
def test_the_standalone_cluster_explores_as_the_local_engine(rebalance_check, tmp_path, cluster, args):
    local = rebalance_check(*args)
    traces = _traces(tmp_path / "out")
    apps = len(cluster.status()["completedapps"])
    spark = rebalance_check(*args, "--engine", "spark", "--spark-master", cluster.master)
    assert len(cluster.status()["completedapps"]) == apps + 1  # it ran on the cluster
    assert spark[0] == local[0] and {k: spark[1][k] for k in SAME} == {k: local[1][k] for k in SAME}
    assert traces and _traces(tmp_path / "out") == traces  # each counterexample, step for step
    if not args:
        assert local[1]["distinct_states"] == 522_958 and local[0] == 0


def test_a_walk_campaign_on_the_standalone_cluster_gives_the_local_walks(rebalance_check, cluster):
    args = ("--members", "4", "--partitions", "8", "--max-faults", "10", "--walks", "100", "--depth", "200",
            "--mutation", "assign-before-revoke")
    local = untimed(rebalance_check(*args)[1])
    spark = untimed(rebalance_check(*args, "--engine", "spark", "--spark-master", cluster.master)[1])
    assert spark.pop("configuration")["engine"] == "spark" and local.pop("configuration")["engine"] == "local"
    assert spark == local and local["verdict"] == "violated"
