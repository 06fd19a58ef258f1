"""The local engine's interned representation (issue 17 items 1-3): the visited set
holds fingerprints and each state only its parent's index and the successor index
that led to it, so a counterexample is rebuilt by replaying those indices from the
initial state; it must be the very shortest trace a plain breadth-first search
with the states themselves finds."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalance.checker.engines.explore import explore
from rebalance.checker.engines.interning import FingerprintSet, collision_probability
from rebalance.checker.properties import applicable, applicable_covers
from rebalance.checker.settings import resolve
from rebalance.checker.system import System


def _run(**kw):
    s = resolve({}, **kw)
    system = System(s.group, s.members, s.joiners, s.faults, s.budget)
    props = applicable(system)
    return explore(system, props, covers=applicable_covers(system), stop_on=frozenset(p.name for p in props))


def test_counterexample_replayed_from_parent_indices_is_the_same_shortest_trace():
    # recorded with the engine that kept every state and its parent (commit 29e3935)
    r = _run(members=2, partitions=3, faults=["join", "leave", "crash"], mutations=("assign-before-revoke",))
    assert (r.distinct_states, r.transitions, r.max_depth) == (600, 1351, 12)
    v = next(v for v in r.violations if v.property == "revoke_before_assign")
    assert [(a and a.kind, a and a.slot) for a, _ in v.path] == [
        (None, None), ("join", 2), ("deliver", 2), ("heartbeat", 0), ("deliver", 0), ("reply", 0), ("deliver", 0),
        ("heartbeat", 1), ("deliver", 1), ("reply", 1), ("deliver", 1), ("reply", 0), ("deliver", 0)]
    assert [p for p, status in r.statuses.items() if status == "violated"] == ["revoke_before_assign", "refinement"]


def test_zombie_counterexample_and_counts_unchanged():
    # exclusive_processing under pause: the figures and trace length the old engine gave (two states more since
    # issue 38: an initial delay a member joined during runs once more, R30)
    s = resolve({}, members=2, partitions=2, faults=["pause", "crash", "join"])
    system = System(s.group, s.members, s.joiners, s.faults, s.budget)
    r = explore(system, applicable(system), covers=applicable_covers(system))
    assert (r.distinct_states, r.transitions, r.max_depth) == (15716, 37580, 53)
    v = next(v for v in r.violations if v.property == "exclusive_processing")
    assert len(v.path) == 10
    for (_, s0), (a, n) in zip(v.path, v.path[1:]):
        assert (a, n) in system.successors(s0)
    assert 0 < r.collision_probability < 1e-9


def test_fingerprint_set_resolves_a_level_in_first_generated_order():
    fps = FingerprintSet()
    dst, fresh = fps.resolve(np.array([7], np.int64), 0)
    assert dst.tolist() == [0] and fresh.tolist() == [0]
    dst, fresh = fps.resolve(np.array([5, 7, 3, 5, 9], np.int64), 1)
    assert dst.tolist() == [1, 0, 2, 1, 3] and fresh.tolist() == [0, 2, 4]
    assert collision_probability(10, 10) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(st.integers(-2**63, 2**63 - 1), st.sampled_from([-2**63, -1, 0, 2**63 - 1,
                                                                                   -2**60, 2**60, 7 << 59])),
                         max_size=40), max_size=10))
def test_fingerprint_set_is_a_dict_from_fingerprint_to_first_index(levels):
    # the set is split into runs by a fingerprint's top bits, each a main and a recent part merged
    # now and then: every level must resolve as a plain dict that numbers new fingerprints in the
    # order first generated, wherever they fall
    fps, oracle = FingerprintSet(), {}
    for level in levels:
        base = len(oracle)
        dst, fresh = fps.resolve(np.array(level, np.int64), base)
        expected_fresh = [k for k, x in enumerate(level) if x not in oracle and x not in level[:k]]
        for k in expected_fresh:
            oracle[level[k]] = len(oracle)
        assert fresh.tolist() == expected_fresh
        assert dst.tolist() == [oracle[x] for x in level]
        assert len(fps) == len(oracle)


def test_fingerprint_set_finds_fingerprints_in_both_parts_of_a_run():
    # after a large level, a small one goes to the recent parts; a level that repeats both must find
    # each in its part, and the recent parts are merged into the main ones once they grow
    rng = np.random.default_rng(1)
    big, small = rng.integers(-2**63, 2**63 - 1, 20000), rng.integers(-2**63, 2**63 - 1, 100)
    fps = FingerprintSet()
    fps.resolve(big, 0)
    fps.resolve(small, len(big))
    assert sum(len(k) for k, _ in fps.recent) == len(small)
    dst, fresh = fps.resolve(np.concatenate([small, big[:50]]), len(big) + len(small))
    assert dst.tolist() == list(range(len(big), len(big) + len(small))) + list(range(50)) and not len(fresh)
    fps.resolve(rng.integers(-2**63, 2**63 - 1, 5000), len(big) + len(small))
    assert sum(len(k) for k, _ in fps.recent) == 0 and len(fps) == 25100


def test_store_columns_widen_when_an_id_passes_65535_or_faults_left_255():
    from rebalance.checker.engines.explore import _Store
    store = _Store((1, 2, 3, 2))
    store.extend(np.array([(4, 9, 5, 1)]), [0], [3])
    store.extend(np.array([(4, 70_000, 5, 1), (6, 7, 8, 0)]), [1, 2], [0, 3])  # 70,000 does not fit 16 bits
    assert [c.typecode for c in store.columns] == ["i", "i", "i"] and store.faults.typecode == "B"
    store.extend(np.array([(1, 1, 1, 300)]), [3], [0])  # 300 faults left do not fit 8 bits
    rows = [(1, 2, 3, 2), (4, 9, 5, 1), (4, 70_000, 5, 1), (6, 7, 8, 0), (1, 1, 1, 300)]
    assert [store.row(i) for i in range(5)] == rows
    assert store.matrix(1, 5).tolist() == [list(r) for r in rows[1:]]
    assert list(store.parents) == [-1, 0, 1, 2, 3] and list(store.steps) == [0, 3, 0, 3, 0]


def test_projected_goal_is_the_goal_on_every_state(monkeypatch):
    # a goal with a projection (eventual_balance's) is decided once per distinct projection, a chunk of
    # states at a time: chunks of 97 states, so that projections recur across chunks, must give the goal
    # evaluated on every explored state
    from rebalance.checker.engines import explore as engine
    monkeypatch.setattr(engine, "_GOAL_CHUNK", 97)
    s = resolve({}, members=2, partitions=2, faults=["join", "leave", "crash"])
    system = System(s.group, s.members, s.joiners, s.faults, s.budget)
    props = applicable(system)
    seen = {}

    def decide(system, live_props, graph, goal_of, summaries_of, state_at, *rest, **kw):
        p = next(p for p in live_props if hasattr(p.goal, "projection"))
        seen["goal"] = goal_of(p)
        seen["every"] = bytearray(0 if p.goal(system, state_at(i)) else 1 for i in range(len(seen["goal"])))
        return []
    monkeypatch.setattr(engine, "decide_liveness", decide)
    r = explore(system, props)
    assert len(seen["goal"]) == r.distinct_states > 97 * 10
    assert 0 < sum(seen["goal"]) < len(seen["goal"])  # both verdicts occur
    assert seen["goal"] == seen["every"]


def test_paths_read_off_the_liveness_graph_are_the_parent_links_paths():
    # a full check keeps no parent links: its counterexamples' paths come off the liveness graph
    # (Graph.tree_path); they must be the very paths a safety-only run's parent links give
    s = resolve({}, members=2, partitions=3, faults=["join", "leave", "crash"], mutations=("assign-before-revoke",))
    system = System(s.group, s.members, s.joiners, s.faults, s.budget)
    props = applicable(system)
    runs = [explore(system, ps, covers=applicable_covers(system))
            for ps in (props, [p for p in props if p.kind != "liveness"])]
    paths = [{v.property: v.path for v in r.violations if v.loop_start is None} for r in runs]
    assert paths[0] and paths[0] == paths[1]


def _explored(system, limit: int = 3000) -> list:
    """Up to ``limit`` canonical states of ``system``, breadth first."""
    from rebalance.checker.engines.renaming import Renamer
    canonical = Renamer().canonical
    init = canonical(system.initial())
    seen, queue = {init}, [init]
    for s in queue:
        if len(seen) >= limit:
            break
        for _, n in system.successors(s):
            c = canonical(n)
            if c not in seen:
                seen.add(c)
                queue.append(c)
    return list(seen)


PROJECTED = ("exclusive_ownership", "exclusive_processing", "single_leader", "revoke_before_assign",
             "commit_accepted", "commit_progress", "heartbeat_answered")


@pytest.mark.parametrize("mutation, key_bits", [(None, 63), ("assign-before-revoke", 63), (None, 4)])
def test_projected_invariants_decide_as_on_every_state(mutation, key_bits, monkeypatch):
    # an invariant with a projection is decided once per distinct projection of the states reached
    # (Projection): its verdict must be the invariant's own on every state, violations included; with
    # 4 key bits the projections do not fit a packed key and are keyed by their tuples (RowMemo)
    from rebalance.checker.engines.interning import RowMemo
    monkeypatch.setattr(RowMemo, "key_bits", key_bits)
    _check_projections(mutation)


def _check_projections(mutation):
    from rebalance.checker.engines.interning import Interner, LazyStates
    from rebalance.checker.engines.steps import Projected, Projection
    s = resolve({}, members=2, partitions=2, faults=["join", "leave", "crash", "pause"],
                mutations=(mutation,) if mutation else ())
    system = System(s.group, s.members, s.joiners, s.faults, s.budget)
    checks = {p.name: p.check for p in applicable(system) if p.name in PROJECTED}
    assert set(checks) == set(PROJECTED) and all(hasattr(c, "projection") for c in checks.values())
    states = _explored(system, 8000)
    interner = Interner()
    rows = np.array([interner.ids(st) for st in states], np.int64)
    broken = set()
    shared: dict = {}  # the checks projected alike share their projection's numbering (Projected), as in Steps
    projections = {name: Projection(system, check, shared.setdefault(check.projection, Projected(interner, *check.projection)))
                   for name, check in checks.items()}
    assert len(shared) < len(checks)  # the progress properties share one projection
    for lo in range(0, len(rows), 500):  # in batches, as the engines ask: projections recur across them
        batch = rows[lo:lo + 500]
        lazy = LazyStates(interner, batch)
        for name, check in checks.items():
            verdicts, of_row = projections[name].decide(batch, lazy.__getitem__)
            for i, k in enumerate(of_row.tolist()):
                assert verdicts[k] == check(system, states[lo + i])
                if verdicts[k]:
                    broken.add(name)
    assert "exclusive_processing" in broken  # pause makes zombies
    assert ("revoke_before_assign" in broken) == (mutation is not None)


def test_a_projection_that_hides_what_its_check_reads_is_caught(monkeypatch):
    # the comparison above must fail for a projection that leaves out a field the check reads:
    # exclusive_processing without what each member owns
    from rebalance.checker import properties
    monkeypatch.setattr(properties.exclusive_processing, "projection", (
        lambda g: None, lambda p: p.consumer.member_id if p.consumer else None))
    with pytest.raises(AssertionError):
        _check_projections(None)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-3, 2 ** 40), min_size=3, max_size=3), min_size=1, max_size=40))
def test_row_keys_are_equal_exactly_when_rows_are(rows):
    # packed when the columns' ranges fit 63 bits, ranks of distinct rows when they do not (2**40 * 3)
    from rebalance.checker.engines.interning import row_keys
    matrix = np.array(rows, np.int64)
    keys = row_keys(matrix).tolist()
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (keys[i] == keys[j]) == (rows[i] == rows[j])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 300), max_size=60), min_size=1, max_size=12))
def test_int_map_computes_each_key_once_and_returns_it(batches):
    # across batches, with the small run merged into the main one as it grows
    from rebalance.checker.engines.interning import IntMap
    memo, computed = IntMap(), []

    def compute(keys, firsts):
        computed.extend(keys)
        return [k * 7 + 1 for k in keys]
    for batch in batches:
        keys = np.array(batch, np.int64)
        assert memo.resolve(keys, compute).tolist() == [k * 7 + 1 for k in batch]
    assert sorted(computed) == sorted({k for b in batches for k in b}) and len(memo) == len(computed)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.lists(st.lists(st.integers(0, 40), max_size=60), min_size=1, max_size=8),
       st.sampled_from([63, 4]))
def test_row_memo_computes_each_row_once_and_returns_it(width, batches, key_bits):
    # packed, or (4 key bits) numbered by its chain of prefixes: each distinct row computed once, across batches
    from rebalance.checker.engines.interning import RowMemo
    memo, computed, seen = RowMemo(), [], set()
    memo.key_bits = key_bits
    for batch in batches:
        rows = np.array([[x * (c + 3) % 41 for c in range(width)] for x in batch], np.int64).reshape(-1, width)
        tuples = list(map(tuple, rows.tolist()))
        seen.update(tuples)

        def compute(firsts):
            computed.extend(tuples[i] for i in firsts)
            return [hash(tuples[i]) % 1000 for i in firsts]
        assert memo.resolve(rows, 41, compute).tolist() == [hash(t) % 1000 for t in tuples]
    assert sorted(computed) == sorted(seen)
