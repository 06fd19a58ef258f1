"""The local engine's successors on interned ids (checker/engines/expansion.py) are
``System.successors``'s, successor for successor and in the same order (the
explored path replays successor indices through ``System.successors``), on
configurations that reach every slow path: OffsetCommits recorded per sharing
slot (R41: memoised, and past 62 partitions on the State), replies releasing
another slot's overlap, Streams' steps, the clock (deferred), a rolling
upgrade's bounces, subscription faults."""
import numpy as np
import pytest

from rebalance.checker.engines.expansion import Expander
from rebalance.checker.engines.explore import explore
from rebalance.checker.engines.interning import Interner
from rebalance.checker.engines.renaming import Renamer
from rebalance.checker.properties import applicable
from rebalance.checker.settings import load_toml, resolve
from rebalance.model import mutations

ALL = ["join", "leave", "crash", "restart", "pause"]


def _compare(system, limit: int) -> set:
    """Breadth-first over ``limit`` states, a level's states expanded as one batch
    (so that a batch mixes states of every kind), comparing both successor lists;
    the action kinds met."""
    interner, renamer = Interner(), Renamer()
    expander = Expander(system, interner)
    init = renamer.canonical(system.initial())
    seen, level, kinds = {interner.ids(init)}, [init], set()
    while level and len(seen) < limit:
        batch = expander.rows(np.array([interner.ids(s) for s in level], np.int64), level)
        got = [(expander.actions[a], tuple(row)) for a, row in zip(batch.aid.tolist(), batch.raw.tolist())]
        plain = [(a, interner.ids(n)) for s in level for a, n in system.successors(s)]
        assert got == plain
        assert batch.src.tolist() == [i for i, s in enumerate(level) for _ in system.successors(s)]
        nxt = []
        for a, ids in plain:
            kinds.add(a.kind)
            c = renamer.canonical(interner.state(ids))
            if interner.ids(c) not in seen:
                seen.add(interner.ids(c))
                nxt.append(c)
        level = nxt
    return kinds


@pytest.mark.parametrize("settings, kinds", [
    (lambda: resolve({}, members=2, partitions=3, faults=ALL), {"commit", "deliver", "reply", "timer", "pause"}),
    (lambda: resolve({}, protocol="deferred", members=2, partitions=3, faults=ALL), {"tick", "scheduled"}),
    # owned bitmasks past 62 partitions: a commit's overlap is then decided on the State
    (lambda: resolve({}, members=2, partitions=70, faults=ALL), {"commit", "pause"}),
    (lambda: resolve({"streams": {"tasks": 3}}, protocol="streams", members=2, faults=["join", "leave", "crash"]),
     {"ready", "shutdown"}),
    (lambda: resolve(load_toml("examples/upgrade.toml")), {"upgrade"}),
    (lambda: resolve(load_toml("examples/subscriptions.toml")), {"subscribe", "create-topic"}),
])
def test_successors_on_ids_are_the_systems(settings, kinds):
    assert kinds <= _compare(settings().system(), 4000)


def test_a_mutation_is_still_caught_through_the_id_successors():
    # the engine now expands through Expander: a deliberately wrong model must still be seen to fail
    assert "assign-before-revoke" in mutations.REGISTRY
    s = resolve({}, members=2, partitions=3, faults=["join", "leave", "crash"], mutations=("assign-before-revoke",))
    system = s.system()
    props = applicable(system)
    r = explore(system, props, stop_on=frozenset(p.name for p in props))
    assert r.statuses["revoke_before_assign"] == "violated"
    assert (r.distinct_states, r.transitions, r.max_depth) == (600, 1351, 12)  # test_explore_engine's figures


def test_the_comparison_sees_a_wrong_expander(monkeypatch):
    # an Expander that forgot that a heartbeat the coordinator answers NONE changing nothing is a stutter
    from rebalance.checker.engines import expansion
    monkeypatch.setattr(expansion.Expander, "_stutters", lambda self, keys, _: [0] * len(keys))
    with pytest.raises(AssertionError):
        _compare(resolve({}, members=2, partitions=3, faults=ALL).system(), 4000)
