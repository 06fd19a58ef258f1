"""The weak-fairness lasso search on small hand-made graphs."""
import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rebalance.checker.engines import liveness
from rebalance.checker.engines.liveness import Graph, _acyclic, _adjacency, find_lasso, find_recurrence


def graph(edges):
    return Graph.of(edges)


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


def env(key):
    return key == "crash"


def test_an_environment_action_enabled_is_no_progress():
    # only a fault can leave state 0 (not the goal): once faults stop, the system stays there
    g = graph([(0, 1, "crash")])
    stem, cycle, reason = find_lasso(2, g, bytearray([0, 1]), fair_all, excluded=env)
    assert stem == 0 and cycle == [] and "stay forever" in reason
    assert find_recurrence(2, g, bytearray([0, 1]), fair_all, excluded=env)[:2] == (0, [])


def test_reaching_the_goal_is_not_keeping_it():
    # 0 (not balanced) <-> 1 (balanced): ◇ goal holds, ◇□ goal fails on the fair cycle
    g = graph([(0, 1, "a"), (1, 0, "b")])
    goal = bytearray([0, 1])
    assert find_lasso(2, g, goal, fair_all) is None
    stem, cycle, _ = find_recurrence(2, g, goal, fair_all)
    assert sorted(g.cls[k] for k in cycle) == [0, 1]


def test_a_marked_step_on_a_fair_cycle_is_a_storm():
    g = Graph()
    g.add(0, 1, "a")
    g.add(1, 0, "b", mark=1)  # a generation completes
    goal = bytearray([1, 1])
    assert find_recurrence(2, g, goal, fair_all, mark=1)[1]
    assert find_recurrence(2, g, goal, fair_all, mark=0) is None
    # the storm needs its marked step: a cycle that can avoid it is not a storm
    g.add(1, 1, "c")
    found = find_recurrence(2, g, goal, lambda key: key != "b", mark=1)
    assert found is None or any(g.mark(k) for k in found[1])


def test_the_witness_cycle_is_itself_fair():
    # component {0,1,2}; "x" is enabled at 0 and 1 only and never taken, so a cycle 0-1-0 would starve it;
    # the witness must pass through 2, where x is not enabled
    g = graph([(0, 1, "a"), (1, 0, "b"), (1, 2, "c"), (2, 0, "d"), (0, 3, "x"), (1, 3, "x")])
    stem, cycle, _ = find_lasso(4, g, bytearray([0, 0, 0, 1]), fair_all)
    assert 2 in {g.source(k) for k in cycle}


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.sampled_from("ab")), max_size=4 * n),
    st.lists(st.booleans(), min_size=n, max_size=n))))
def test_the_trimming_pre_pass_finds_a_cycle_exactly_when_one_exists(case):
    # _acyclic trims states with no in- or out-edge round after round, its later rounds on the copied-out
    # edges between the remaining states (at once, copy_out=1, or never, 0); it answers "no cycle" exactly
    # when networkx finds none among the kept states through the usable edges (class "a"; "b" edges are
    # excluded), self-loops included
    n, edges, keep = case
    kept = nx.DiGraph()
    kept.add_edges_from((i, j) for i, j, key in edges if key == "a" and keep[i] and keep[j])
    expected = nx.is_directed_acyclic_graph(kept)
    # the engines add a state's edges together, in source order; Graph.of sorts any other order
    # edges read a few at a time (chunk boundaries inside a state's edges) and all at once
    for order, chunk in itertools.product((sorted(edges, key=lambda e: e[0]), edges), (3, liveness._CHUNK)):
        g = graph(order)
        usable = [key == "a" for key in g.names]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(liveness, "_CHUNK", chunk)
            assert [_acyclic(n, g, bytearray(keep), usable, copy_out=c) for c in (0, 0.25, 1)] == [expected] * 3
            # the adjacency a search builds when a cycle may remain: each kept state's usable edges to kept
            # states, in the order added
            offsets, targets, edge_ids = _adjacency(n, g, bytearray(keep), usable)
            by_source = sorted(edges, key=lambda e: e[0])
            assert [list(targets[offsets[i]:offsets[i + 1]]) for i in range(n)] == [
                [j for i2, j, key in by_source if i2 == i and key == "a" and keep[i] and keep[j]] for i in range(n)]
            assert [g.dst[k] for k in edge_ids] == list(targets)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.sampled_from("ab")), max_size=4 * n),
    st.lists(st.booleans(), min_size=n, max_size=n))))
# the cycle 0 -> 1 -> 0: state 1's usable edge is the next share's first, its others the end of the first
@example((4, [(0, 1, "a"), (1, 2, "b"), (1, 3, "b"), (1, 0, "a"), (2, 3, "b"), (3, 2, "b")], [True] * 4))
def test_trimming_passes_shared_among_processes_find_a_cycle_exactly_when_one_exists(case):
    # _trimmed's passes in 2 or 3 processes (_Passes: forked helpers, each over a share of the edges cut at
    # chunks of 3, a state's edges often split between two shares), every round a pass (copy_out=0) or the
    # later rounds on the copied-out edges (0.25): "no cycle" exactly when networkx finds none; and so
    # in every order of the shares' passes. Seen to fail with a share also removing the last source it
    # reads (its edges may go on in the next share)
    n, edges, keep = case
    kept = nx.DiGraph()
    kept.add_edges_from((i, j) for i, j, key in edges if key == "a" and keep[i] and keep[j])
    expected = nx.is_directed_acyclic_graph(kept)
    g = graph(edges)
    usable = [key == "a" for key in g.names]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(liveness, "_CHUNK", 3)
        assert [liveness._trimmed(n, g, bytearray(keep), usable, 200, c, workers) for c in (0, 0.25)
                for workers in (2, 3)] == [expected] * 4
        # the shares' passes one after another in every order, as the processes may happen to run them
        for order in itertools.permutations(liveness._shares(n, g, 3)):
            passes = InOrder(n, keep, usable, g, order)
            assert liveness._trimming(n, g, passes, 200, 0) == expected, order


class InOrder:
    """``liveness._Passes`` in one process: each pass runs the shares ``order`` one after another."""

    def __init__(self, n, keep, usable, g, order):
        self.alive, self.has_out, self.has_in = np.array(keep, bool), np.empty(n, bool), np.empty(n, bool)
        self.usable, self.g, self.order = np.array(usable, bool), g, order

    def run(self):
        return sum(liveness._trim_pass(self.g, self.alive, self.usable, self.has_out, self.has_in, *share)
                   for share in self.order)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30).flatmap(lambda n: st.lists(
    st.lists(st.integers(0, n - 1), max_size=5), min_size=n, max_size=n)))
def test_tree_path_is_the_breadth_first_searchs_parent_links(succ):
    # a breadth-first search over successor lists (states numbered in the order first reached, every
    # transition kept in the order generated, as explore.py adds them): the path tree_path reads off the
    # graph is the one the search's own parent links give, whether the graph keeps its destinations in
    # memory or spills them to a file (read in chunks of 3, so that a state's edges straddle them), and a
    # spilled graph loaded back is the in-memory one
    number, order, parent = {0: 0}, [0], {0: None}
    g, spilled = Graph(), Graph(spill=True)
    for v in order:  # grows as states are reached
        for idx, w in enumerate(succ[v]):
            if w not in number:
                number[w] = len(order)
                order.append(w)
                parent[number[w]] = (number[v], idx)
        out = [number[w] for w in succ[v]]
        g.extend([number[v]] * len(out), out, [g.class_id("a")] * len(out), [1] * len(out))
        spilled.extend([number[v]] * len(out), np.array(out, np.int32), [spilled.class_id("a")] * len(out),
                       [1] * len(out))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(liveness, "_LOAD", 3)
        for i in range(len(order)):
            chain, at = [], i
            while parent[at] is not None:
                at, idx = parent[at]
                chain.append(idx)
            assert g.tree_path(i) == spilled.tree_path(i) == chain[::-1]
        assert len(spilled.dst) == 0
        spilled.load()
    assert (spilled.dst, spilled.ends, spilled.cls, spilled.marked) == (g.dst, g.ends, g.cls, g.marked)
    assert [spilled.tree_path(i) for i in range(len(order))] == [g.tree_path(i) for i in range(len(order))]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 9), st.sampled_from([0, 0, 0, 1, 2, 3])), max_size=6), max_size=8))
def test_marks_kept_sparsely_are_each_edges_own(levels):
    # marks are kept for the marked edges only (their ids and bits): every edge's mark(k) must be the mark
    # it was added with, whether edges come one by one (add) or a level at a time (extend)
    one, bulk, given_marks = Graph(), Graph(), []
    for i, level in enumerate(levels):
        for j, m in level:
            one.add(i, j, "a", m)
            given_marks.append(m)
        bulk.extend([i] * len(level), [j for j, _ in level], [bulk.class_id("a")] * len(level), [m for _, m in level])
    assert [one.mark(k) for k in range(len(given_marks))] == given_marks
    assert [bulk.mark(k) for k in range(len(given_marks))] == given_marks
