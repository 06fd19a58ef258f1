"""Issue 20 item 3, property-based fuzzing with hypothesis (rebalance.strategies):
the wire coordinator (a real ``rebalance serve`` on real sockets) against the model's
coordinator handler, request sequence by request sequence (conform's matching up to
member-id renaming); the model itself fuzzed far past the exhaustive bound with every
safety property at each step; and each seen failing on a deliberately wrong side."""
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings, strategies as st
from hypothesis.stateful import run_state_machine_as_test

from interop.harness import Server
from rebalance.checker.counterexample import text_trace
from rebalance.checker.engines.explore import Violation
from rebalance.checker.properties import applicable
from rebalance.checker.system import FAULTS, System
from rebalance.model.assignors import assign
from rebalance.model.config import GroupConfig
from rebalance.model.protocol import partitions_of
from rebalance.strategies import coordinator_machine, group_configs, group_events, subscriptions, walks

FAST = settings(max_examples=10, stateful_step_count=15, deadline=None,
                suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve"), "t:4", initial_delay_ms=0)
    yield s
    s.stop()


def test_wire_coordinator_agrees_with_the_model(serve):
    run_state_machine_as_test(coordinator_machine(serve.port, serve.trace), settings=FAST)


def test_a_replaced_static_member_is_fenced_under_its_old_member_id(serve):
    """Found by the long profile: a static member's JoinGroup held at the barrier,
    its connection closed, the same group.instance.id joining again replaces it, and
    the held JoinGroup is answered FENCED_INSTANCE_ID. Kafka names the old member.id
    there (GroupMetadata.replaceStaticMember: JoinGroupResult(oldMemberId,
    FENCED_INSTANCE_ID)) and so does the model; serve answered member_id "", having
    forgotten the name in the step that removed the member (impl/coordinator.py
    GroupRuntime.name now keeps the last names gone)."""
    m = coordinator_machine(serve.port, serve.trace)()
    m.begin()
    m.join(0, fresh=False, static=False)
    m.join(1, fresh=False, static=True)
    m.close(1)
    m.join(1, fresh=False, static=True)
    m.settle()
    m.teardown()


def test_a_leaderless_barrier_keeps_the_frontier_small(serve):
    """Found by the long profile (seed 332209855165703730598734903948943829312): joins,
    closes and leaves of three clients, static and dynamic, whose barriers wait while
    their leader stays away. Conform searched R5's leader choice by forking a
    candidate per rejoined member in every PreparingRebalance state, so the frontier
    passed its bound (``conform: incomplete``); the choice is now forked only in the
    step that completes the barrier (checker/conform/coordinator.py ``_step``)."""
    m = coordinator_machine(serve.port, serve.trace)()
    m.begin()
    m.heartbeat(0, old=False)
    m.join(0, fresh=False, static=True)
    m.close(0)
    m.join(1, fresh=True, static=False)
    m.close(1)
    m.close(1)
    m.leave(2)
    m.leave(2)
    m.close(0)
    m.sync(1)
    m.join(2, fresh=False, static=True)
    m.heartbeat(2, old=False)
    m.heartbeat(2, old=True)
    m.join(1, fresh=True, static=False)
    m.leave(2)
    m.sync(1)
    m.sync(0)
    m.leave(0)
    m.close(2)
    m.sync(0)
    m.leave(1)
    m.leave(0)
    m.close(0)
    m.sync(0)
    m.leave(0)
    m.join(1, fresh=True, static=False)
    m.leave(1)
    m.close(2)
    m.join(2, fresh=False, static=True)
    m.teardown()


@pytest.mark.slow
def test_wire_coordinator_agrees_with_the_model_long(serve):
    run_state_machine_as_test(coordinator_machine(serve.port, serve.trace), settings=LONG)


def test_a_wire_coordinator_without_commit_fencing_is_caught(tmp_path):
    """The deliberately wrong implementation: serve runs the no-commit-fencing mutation,
    the model does not; the fuzzer finds a stale OffsetCommit the two answer apart."""
    s = Server(tmp_path, "t:4", initial_delay_ms=0, mutations=("no-commit-fencing",))
    try:
        with pytest.raises(AssertionError, match="OffsetCommit"):
            run_state_machine_as_test(coordinator_machine(s.port, s.trace, model_mutations=()),
                                      settings=settings(FAST, max_examples=60, phases=[Phase.generate]))
    finally:
        s.stop()


BEYOND = System(GroupConfig(topics=(("t", 12),)), 6, 2, FAULTS, 12)  # far past exhaustive reach (6 x 12, budget 12)
NAMES = [p.name for p in applicable(BEYOND) if p.name != "exclusive_processing"]  # zombies break it by design


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(walk=walks(BEYOND, NAMES, max_steps=300))
def test_the_model_past_the_exhaustive_bound_keeps_every_safety_property(walk):
    assert walk.violation is None, walk.violation


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(walk=walks(BEYOND, NAMES, max_steps=1000))
def test_the_model_past_the_exhaustive_bound_long(walk):
    assert walk.violation is None, walk.violation


def test_a_wrong_model_is_caught_and_shrinks():
    wrong = System(GroupConfig(topics=(("t", 6),), mutations=frozenset({"assign-before-revoke"})), 3, 1,
                   ("join", "crash"), 3)
    names = [p.name for p in applicable(wrong)]
    walk = find(walks(wrong, names, max_steps=80), lambda w: w.violation is not None,
                settings=settings(max_examples=500, deadline=None, database=None, derandomize=True))
    prop, reason = walk.violation
    assert prop in ("revoke_before_assign", "refinement", "exclusive_processing")
    assert len(walk.path) - 1 <= 20  # shrunk: the shortest is 16 steps
    print(text_trace(wrong.cfg, Violation(prop, reason, walk.path)))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_strategies_feed_an_assignor(data):
    cfg = data.draw(group_configs())
    members = data.draw(subscriptions(cfg))
    out = assign(cfg, members)
    given_out = [p for _, a in out for p in partitions_of(a.partitions)]
    assert len(given_out) == len(set(given_out)) and [m for m, _ in out] == [m for m, _, _ in members]


@given(events=group_events(slots=3))
def test_group_events_are_replay_events(events):
    assert all(e["member"] in "ABC" and e["action"] in FAULTS + ("resume",) for e in events)
