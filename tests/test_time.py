"""Discrete time (R38), states up to renaming, and the lasso search that needs a tick."""
import random

import pytest

from rebalance.checker.engines.liveness import Graph, find_lasso
from rebalance.checker.engines.renaming import shape
from rebalance.checker.settings import resolve
from rebalance.checker.system import PAUSED, RUNNING, System, between_rounds, clock_runs
from rebalance.model import member
from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.assignors import assign
from rebalance.model.member import NEW_CONSUMER, MemberPhase
from rebalance.model.protocol import NOT_SCHEDULED, Phase, ScheduledRebalanceDue, Subscription, Tick

DEFERRED = GroupConfig(protocol="deferred", scheduled_delay_ticks=2)


def random_walks(system, seed: int, walks: int, steps: int):
    """Yields ``(state, successors)`` along ``walks`` random walks of up to ``steps`` steps."""
    rng = random.Random(seed)
    for _ in range(walks):
        s = system.initial()
        for _ in range(steps):
            succ = system.successors(s)
            if not succ:
                break
            yield s, succ
            s = rng.choice(succ)[1]


@pytest.mark.spec("R38")
def test_a_scheduled_rebalance_counts_down_in_ticks_and_is_due_only_at_zero():
    c = NEW_CONSUMER._replace(phase=MemberPhase.STABLE, member_id=1, generation=1, scheduled=2)
    assert member.handle(DEFERRED, c, ScheduledRebalanceDue())[0] == c  # not due yet
    c, _ = member.handle(DEFERRED, c, Tick())
    c, _ = member.handle(DEFERRED, c, Tick())
    assert c.scheduled == 0
    assert member.handle(DEFERRED, c, Tick())[0].scheduled == 0  # stays due
    rejoined, out = member.handle(DEFERRED, c, ScheduledRebalanceDue())
    assert rejoined.phase == MemberPhase.JOINING and out
    assert member.handle(DEFERRED, NEW_CONSUMER, Tick())[0].scheduled == NOT_SCHEDULED


@pytest.mark.spec("R38")
def test_ticks_pass_only_between_rounds_while_a_countdown_runs():
    system = System(DEFERRED, 3, 1, ("crash", "restart", "join", "leave"), 2)
    seen_tick = False
    for s, succ in random_walks(system, 7, 200, 40):
        for a, n in succ:
            if a.kind == "tick":
                seen_tick = True
                assert s.group.phase == Phase.STABLE
                assert not any(p.requests or p.responses for p in s.procs)
                assert any(p.consumer is not None and p.consumer.scheduled > 0 for p in s.procs)
                assert all(q.consumer is None or q.consumer.scheduled <= max(p.consumer.scheduled, 0)
                           for p, q in zip(s.procs, n.procs) if p.consumer is not None)
    assert seen_tick


@pytest.mark.spec("R38")
def test_a_paused_processs_unread_reply_does_not_stop_the_clock():
    """A paused member's reply in flight (its Heartbeat answered UNKNOWN_MEMBER_ID
    after it was expelled) waits for it to resume; the running members' clocks go on,
    so the deferred partitions' ScheduledRebalanceTimeout still runs out."""
    system = System(DEFERRED, 2, 1, ("join", "leave", "crash", "restart", "pause"), 2)
    held = 0
    seen, level = set(), [system.initial()]
    while level and not held:  # breadth first, to the 13-step counterexample main reported
        nxt = []
        for s in level:
            for a, n in system.successors(s):
                if n in seen:
                    continue
                seen.add(n)
                nxt.append(n)
                if clock_runs(n) and not between_rounds(n):
                    assert all(p.status == PAUSED for p in n.procs if p.responses)
                    if any(p.status == RUNNING and p.consumer.scheduled > 0 for p in n.procs):
                        held += 1
                        assert any(b.kind == "tick" for b, _ in system.successors(n))
        level = nxt
    assert held


PAUSED_DEFERRED = ("--protocol", "deferred", "--members", "2", "--partitions", "3",
                   "--faults", "join,leave,crash,restart,pause", "--max-faults", "2")


@pytest.mark.slow  # 13 CPU-s; the default suite's R38 sample: the other tests here
@pytest.mark.spec("R38")
def test_deferred_with_a_paused_member_is_balanced_when_quiet(rebalance_check):
    """The reported wrong verdict: a member expelled while paused resumes, heartbeats
    and pauses again before reading the reply; the ScheduledRebalanceTimeout of its
    deferred partitions must still pass. And a group whose only process is paused
    owes nobody a partition (bounded_deferral as balanced has it)."""
    code, s = rebalance_check(*PAUSED_DEFERRED)
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert code == 0 and {n for n, st in status.items() if st == "violated"} == {"exclusive_processing"}, status
    assert status["quiescent_balance"] == status["bounded_deferral"] == status["eventual_balance"] == "holds"


def test_quiescent_balance_still_sees_a_real_imbalance_with_a_paused_member(rebalance_check):
    """The same configuration with KAFKA-12495's skipped revocation: a worker left with nothing."""
    code, s = rebalance_check(*PAUSED_DEFERRED, "--mutation", "skip-consecutive-revocation")
    assert code == 1 and s["counterexample"]["property"] == "quiescent_balance"


def test_time_table_maps_ms_to_ticks_rounding_up():
    s = resolve({"time": {"tick_ms": 100_000, "scheduled_rebalance_max_delay_ms": 250_000}}, protocol="deferred")
    assert s.group.scheduled_delay_ticks == 3 and s.group.rejoin_ticks == 2
    # R40: Connect's backoff, 40 ms, 1.6 s, 64 s, then the 250 s maximum, in ticks of 100 s
    assert s.group.revoking_backoff_ticks == (1, 1, 1, 3)
    with pytest.raises(ConfigError, match="time.tick_ms must be at least 1"):
        resolve({"time": {"tick_ms": 0}})


def steps(system, state):
    return system.successors(state) + system.churn_successors(state)


def test_successors_commute_with_renaming():
    """The handlers see generations, member ids and epochs only through order and
    equality, so the shape of a state's successors is the successors of its shape:
    what makes a path back to the same shape the loop of an infinite execution."""
    system = System(GroupConfig(protocol="deferred"), 3, 1, ("join", "leave", "crash", "restart", "pause"), 4)
    checked = 0
    for s, _ in random_walks(system, 1, 40, 50):
        direct = sorted(repr(shape(n)) for _, n in steps(system, s._replace(faults_left=4)))
        renamed = sorted(repr(shape(n)) for _, n in steps(system, shape(s)._replace(faults_left=4)))
        assert direct == renamed
        checked += 1
    assert checked > 800


@pytest.mark.spec("R39")
def test_a_leader_bounce_comes_between_rounds_spends_nothing_and_brings_a_new_member():
    system = System(DEFERRED, 3, 1, ("crash", "restart", "join", "leave"), 2)
    bounced = 0
    for s, succ in random_walks(system, 3, 200, 40):
        for a, n in system.churn_successors(s):
            bounced += 1
            assert a.kind == "bounce" and n.faults_left == s.faults_left
            assert s.group.phase == Phase.STABLE and not any(p.requests or p.responses for p in s.procs)
            old, new = s.procs[a.slot], n.procs[a.slot]
            assert old.consumer.member_id == s.group.leader and new.epoch == old.epoch + 1
            assert new.consumer.member_id != s.group.leader and new.requests  # a new process joins
    assert bounced > 50
    assert System(DEFERRED, 3, 1, ("join", "leave"), 2).churn_successors(system.initial()) == []


def test_a_fair_cycle_without_a_required_tick_is_no_lasso():
    """0 -> 1 -> 0 never reaches the goal (state 2); with a tick on 1 -> 0 it is a
    lasso that lets time pass, without one it is not."""
    for tick, found in ((True, True), (False, False)):
        g = Graph()
        g.add(0, 1, ("deliver", 0))
        g.add(1, 0, ("tick", -1) if tick else ("deliver", 1))
        g.add(1, 2, ("crash", 0))
        lasso = find_lasso(3, g, bytearray([0, 0, 1]), lambda key: key[0] != "crash",
                           required=lambda key: key[0] == "tick")
        assert (lasso is not None) == found


@pytest.mark.spec("R33", "R38")
def test_a_zero_scheduled_delay_maps_to_zero_ticks_and_no_backoff():
    s = resolve({"time": {"scheduled_rebalance_max_delay_ms": 0}}, protocol="deferred")
    assert s.group.scheduled_delay_ticks == 0 and s.group.revoking_backoff_ticks == (0,)
    with pytest.raises(ConfigError, match="scheduled_rebalance_max_delay_ms must be at least 0"):
        resolve({"time": {"scheduled_rebalance_max_delay_ms": -1}})


NO_DELAY = GroupConfig(protocol="deferred", topics=(("t", 6),), scheduled_delay_ticks=0, revoking_backoff_ticks=(0,))


@pytest.mark.spec("R33")
def test_without_a_delay_a_lost_partition_is_reassigned_in_the_next_round():
    # IncrementalCooperativeAssignorTest.testLostAssignmentHandlingWhenScheduledDelayIsDisabled (and
    # testScheduledDelayIsDisabled): worker1 of three leaves; its work is reassigned at once, no delay
    echo = (1, 0b111111, 0, 0, 0)
    members = ((1, 0, Subscription(0b000011, 1, echo)), (257, 0, Subscription(0b001100, 1, echo)))
    out = dict(assign(NO_DELAY, members))
    assert out[1].scheduled == 0 and out[1].echo[1] == 0  # nothing deferred, no ScheduledRebalanceTimeout
    assert out[1].partitions | out[257].partitions == 0b111111  # t-4, t-5 given out in this very round
    # with the default delay the same round holds them back
    assert dict(assign(GroupConfig(protocol="deferred", topics=(("t", 6),)), members))[1].echo[1] == 0b110000


@pytest.mark.spec("R40")
def test_without_a_delay_successive_revoking_rounds_revoke_at_once():
    # IncrementalCooperativeAssignorTest.testImmediateRevocationsWhenMaxDelayIs0: right after a revoking round,
    # a round that must revoke for balance revokes at once (ExponentialBackoff(0, ...) gives 0)
    echo = (1, 0b111111, 0, 1, 0)  # the last round revoked
    members = ((1, 0, Subscription(0b111111, 1, echo)), (257, 0, Subscription(0, -1, echo)))
    out = dict(assign(NO_DELAY, members))
    assert out[1].partitions == 0b000111 and out[1].scheduled == 0 and out[1].echo[2:] == (1, 1)
    backing_off = GroupConfig(protocol="deferred", topics=(("t", 6),))
    assert dict(assign(backing_off, members))[1].partitions == 0b111111  # the default backs off instead


@pytest.mark.spec("R33", "R38")
def test_check_with_no_scheduled_delay_holds_and_defers_nothing(rebalance_check, tmp_path):
    (tmp_path / "nodelay.toml").write_text("[time]\nscheduled_rebalance_max_delay_ms = 0\n")
    code, s = rebalance_check(str(tmp_path / "nodelay.toml"), "--protocol", "deferred", "--members", "2",
                         "--partitions", "2", "--faults", "join,leave,crash,restart")
    covers = {c["name"]: c["reached"] for c in s["covers"]}
    assert code == 0 and covers["session_timeout"] and not covers["deferral_started"]
