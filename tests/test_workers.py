"""``check --workers N`` against one process (real forked processes, pipes between
them): the same counts, verdicts and shortest counterexamples."""
import json

import pytest
from hypothesis import given, settings, strategies as st

from conftest import EXAMPLES, run_cli

SMALL = ("--faults", "join,leave,crash", "--max-faults", "1")
KEYS = ("verdict", "distinct_states", "transitions", "max_depth", "actions_fired", "covers", "counterexamples")


def _without_paths(summary: dict) -> dict:
    for c in summary["counterexamples"]:
        c.pop("files")
    return {k: summary[k] for k in KEYS} | {"statuses": [p["status"] for p in summary["properties"]]}


def test_two_workers_count_what_one_process_counts(rebalance_check):
    (c1, one), (c3, three) = (rebalance_check(*SMALL, "--workers", w) for w in ("1", "3"))
    assert c1 == c3 == 0 and one["distinct_states"] > 1000
    assert three["configuration"]["workers"] == 3
    assert _without_paths(one) == _without_paths(three)


@pytest.mark.parametrize("args", [
    ("--faults", "crash,join", "--max-faults", "1", "--no-timer-fairness"),  # a stuttering lasso
    # bounded_deferral's churn lasso: its shapes keyed by the owners' stable fingerprints (workers.Components)
    pytest.param(("--protocol", "deferred", "--members", "2", "--partitions", "2",
                  "--faults", "join,leave,crash,restart", "--mutation", "leader-forgets-delay"),
                 marks=pytest.mark.slow),  # 10 s on an idle 2-core machine
], ids=["stutter", "churn"])
def test_workers_find_the_local_lassos(rebalance_check, args):
    """Seen to fail: a stuttering lasso once timers are not fair, and leader-forgets-delay's churn lasso,
    the same under one process and three owners."""
    (c1, one), (c3, three) = (rebalance_check(*args, "--workers", w) for w in ("1", "3"))
    assert c1 == c3 == 1 and one["counterexample"]["loop_start"] is not None
    assert _without_paths(one) == _without_paths(three)
    assert {k: one["counterexample"][k] for k in ("property", "length", "loop_start", "reason")} == {
        k: three["counterexample"][k] for k in ("property", "length", "loop_start", "reason")}


def test_workers_catch_assign_before_revoke_with_the_local_counterexample(rebalance_check, tmp_path):
    """Seen to fail: the mutation's shortest counterexample, step for step, under both."""
    args = ("--faults", "join,leave,crash", "--mutation", "assign-before-revoke")
    runs = []
    for w in ("1", "2"):
        code, summary = rebalance_check(*args, "--workers", w)
        trace = json.loads((tmp_path / "out" / "revoke_before_assign.json").read_text())
        runs.append((code, _without_paths(summary), summary["counterexample"]["length"], trace["steps"]))
    assert runs[0][0] == 1 and runs[0][2] > 5
    assert runs[0] == runs[1]


@pytest.mark.parametrize("args", [
    ("--protocol", "consumer", "--members", "2", "--partitions", "1", "--faults", "pause", "--max-faults", "1",
     "--mutation", "no-commit-fencing", "--continue"),
    (str(EXAMPLES / "kip848" / "migration_offline.toml"), "--mutation", "downgrade-restarts-generation",
     "--continue"),
], ids=["kip848", "migration"])
def test_workers_explore_kip848_and_its_migration(rebalance_check, args):
    """KIP-848's states and properties (checker/consumer_system.py, migration_system.py) under
    three owners: the local engine's counts, verdicts and counterexamples. Seen to fail: the
    owners could not encode a ConsumerGroup, and checked the classic properties."""
    (c1, one), (c3, three) = (rebalance_check(*args, "--workers", w) for w in ("1", "3"))
    assert c1 == c3 == 1 and one["counterexamples"]
    assert _without_paths(one) == _without_paths(three)


def test_workers_refused_where_they_do_not_apply(tmp_path):
    for args, words in [(("--workers", "0"), "--workers must be at least 1"),
                        (("--workers", "2", "--engine", "spark"), "--spark-master"),
                        (("--workers", "2", "--walks", "3"), "--walks runs on one process")]:
        code, out, err = run_cli("check", *SMALL, *args, "--json", "--out", tmp_path, cwd=tmp_path)
        assert code == 2 and words in json.loads(out)["error"]["message"], (args, out, err)


def _refinement_memos(system) -> tuple:
    """How much the refinement check computed: Inv's evaluations (one per view reached) and its
    step verdicts (a member's own steps', the others')."""
    r = system.refinement
    return int((r._invariant_marks > 0).sum()), len(r._local_verdicts), len(r._view_verdicts)


def test_owners_compute_each_refinement_verdict_once():
    """Placed by the refinement's view of their Group (``Refinement.owner_part``), three owners
    evaluate Inv and decide the step verdicts exactly as often, summed, as one owner alone
    (which expands as the local engine does): no two owners compute the same one. Seen to
    fail placed by the Group (``partition`` None): the owners then recompute the views of
    Groups abstracted alike."""
    import threading
    from multiprocessing import Pipe

    from rebalance.checker.engines import workers
    from rebalance.checker.properties import applicable
    from rebalance.checker.settings import load_toml, resolve

    system = resolve(load_toml(EXAMPLES / "default.toml"), faults=["join", "leave", "crash"], budget=1).system()
    job = workers.job_for(system, list(applicable(system)), (), frozenset(), None, None, None)

    def owners(k: int, partitioned: bool = True) -> tuple:
        conns = [[None] * k for _ in range(k)]
        for i in range(k):
            for j in range(i + 1, k):
                conns[i][j], conns[j][i] = Pipe()
        kept = [[] for _ in range(k)]
        original = workers.Components.__init__

        def unpartitioned(self, interner, k, me=0, partition=None):
            original(self, interner, k, me, partition if partitioned else None)
        workers.Components.__init__ = unpartitioned
        try:
            threads = [threading.Thread(target=workers.run_owner, args=(job, workers.Mesh(me, conns[me])),
                                        kwargs={"keep": kept[me]}) for me in range(k)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            workers.Components.__init__ = original
        return tuple(map(sum, zip(*(_refinement_memos(k[0][0]) for k in kept))))

    alone = owners(1)
    assert alone[0] > 100 and alone[2] > 100
    assert owners(3) == alone
    placed_by_group = owners(3, partitioned=False)
    assert placed_by_group[0] > alone[0] and placed_by_group[2] > alone[2]


def test_the_driver_builds_the_liveness_graph_while_the_owners_explore_and_loads_it_once_they_exited(monkeypatch):
    """The owners write their edges to files and tell the driver of each level
    (``gathered.Levels``); the driver adds each level to the liveness graph while they
    explore (``gathered.Gathering``), so that building it is not left to the serial end
    of the run, and loads the graph only once they exited, so that neither every edge
    at once nor the loaded graph shares the peak with the owners' memos. Seen to fail
    with the levels read once every owner exited (the engine before this test)."""
    import multiprocessing

    from rebalance.checker.engines import workers
    from rebalance.checker.engines.liveness import Graph
    from rebalance.checker.properties import applicable
    from rebalance.checker.settings import load_toml, resolve

    system = resolve(load_toml(EXAMPLES / "default.toml"), faults=["join", "leave", "crash"], budget=1).system()
    added, loaded, extend, load = [], [], Graph.extend_runs, Graph.load

    def extended(self, lo, degrees, dst, classes, marks):
        added.append((len(dst), len(multiprocessing.active_children())))
        extend(self, lo, degrees, dst, classes, marks)

    def loading(self):
        loaded.append(len(multiprocessing.active_children()))
        load(self)
    monkeypatch.setattr(Graph, "extend_runs", extended)
    monkeypatch.setattr(Graph, "load", loading)
    result = workers.explore_workers(system, list(applicable(system)), 3)
    assert result.transitions == sum(n for n, _ in added) and len(added) > 10
    assert max(n for n, _ in added) < result.transitions / 4
    assert sum(alive == 3 for _, alive in added) > len(added) / 2 and loaded == [0]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.lists(st.integers(0, 8), min_size=1, max_size=40),
       st.randoms(use_true_random=False))
def test_gathered_levels_make_the_local_engines_graph(k, degrees, rnd):
    """``Gathering`` puts k owners' levels of edges (each state's edges on one owner,
    in successor order; a level's sources one range of ranks) in the graph the local
    engine builds: each state's edges in order, the classes and marks with them. Seen
    to fail with each edge placed by its state's first place alone."""
    import numpy as np

    from rebalance.checker.engines.gathered import Gathering
    from rebalance.checker.engines.liveness import Graph

    states = len(degrees)
    owner = [rnd.randrange(k) for _ in range(states)]
    edges = [(s, rnd.randrange(states), ("class", rnd.randrange(5)), rnd.randrange(2))
             for s, d in enumerate(degrees) for _ in range(d)]
    cuts = sorted({0, states, *(rnd.randrange(states) for _ in range(3))})
    gathering, codes = Gathering(k), [{} for _ in range(k)]
    for lo, hi in zip(cuts, cuts[1:]):
        for j in range(k):
            mine = [e for e in edges if lo <= e[0] < hi and owner[e[0]] == j]
            new = [key for key in dict.fromkeys(e[2] for e in mine) if key not in codes[j]]
            codes[j].update({key: len(codes[j]) + i for i, key in enumerate(new)})
            columns = list(zip(*mine)) or [(), (), (), ()]
            gathering.add(j, (np.array(columns[0], np.int32), np.array(columns[1], np.int32),
                              np.array([codes[j][c] for c in columns[2]], np.uint16), np.array(columns[3], np.uint8)),
                          new)
    got, local = gathering.graph(), Graph.of(edges)
    assert list(got.ends) == list(local.ends) and list(got.dst) == list(local.dst)
    assert [got.names[c] for c in got.cls] == [local.names[c] for c in local.cls]
    assert [got.mark(e) for e in range(got.edges)] == [local.mark(e) for e in range(local.edges)]
