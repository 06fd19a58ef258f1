"""The weak-fairness lasso search on small hand-made graphs."""
from rebalance.checker.liveness import Graph, find_lasso


def graph(edges):
    g = Graph()
    for i, j, key in edges:
        g.add(i, j, key)
    return g


def fair_all(key):
    return True


def test_fair_cycle_is_found_as_a_lasso():
    g = graph([(0, 1, "a"), (1, 0, "b"), (1, 2, "b")])  # 2 is the goal, but a-b may cycle forever
    stem, cycle, _ = find_lasso(3, g, bytearray([0, 0, 1]), fair_all)
    assert stem == 0 and sorted(g.cls[k] for k in cycle) == [0, 1]


def test_cycle_that_starves_an_always_enabled_action_is_not_fair():
    # c is enabled in both cycle states and leads to the goal: weak fairness forces it
    g = graph([(0, 1, "a"), (1, 0, "b"), (0, 2, "c"), (1, 2, "c")])
    assert find_lasso(3, g, bytearray([0, 0, 1]), fair_all) is None


def test_stuttering_where_only_unfair_actions_are_enabled():
    g = graph([(0, 1, "timer")])
    stem, cycle, reason = find_lasso(2, g, bytearray([0, 1]), lambda key: key != "timer")
    assert stem == 0 and cycle == [] and "stay forever" in reason
    assert find_lasso(2, g, bytearray([0, 1]), fair_all) is None


def test_self_loop_counts_as_a_cycle():
    g = graph([(0, 0, "a"), (0, 1, "b")])  # b is enabled at 0 and never taken on the loop
    assert find_lasso(2, g, bytearray([0, 1]), fair_all) is None
    g = graph([(0, 0, "a")])
    stem, cycle, _ = find_lasso(2, g, bytearray([0, 1]), fair_all)
    assert stem == 0 and len(cycle) == 1
