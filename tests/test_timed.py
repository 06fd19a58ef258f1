"""The timed exploration mode (checker/timed.py, docs/timed.md; issue 43 item 3):
each coordinator timer fires at the deadline model/timing.py gives it, so that a
timer firing too early, too late or never is a violation, not an interleaving."""
import json
from pathlib import Path

import pytest

from conftest import EXAMPLES
from rebalance.checker import timed
from rebalance.checker.settings import load_toml, resolve
from rebalance.checker.system import KEPT, RESTARTING, RUNNING, Action
from rebalance.model.coordinator import formed_group
from rebalance.model.protocol import NO_MEMBER_ID, Phase, RebalanceTimeout, SessionTimeout, connection, instance_id, member_id
from rebalance.model.timing import DEFAULT_TIMEOUTS, rearm

TIMED = EXAMPLES / "static_timed.toml"  # static members, a joiner, tick 10 s, session 30 s, rebalance 20 s
BUDGET_3 = (str(TIMED), "--max-faults", "3")


def timed_system(*, budget=3, mutations=()):
    data = load_toml(TIMED)
    return resolve(data, budget=budget, mutations=mutations).system()


def test_the_example_is_timed_with_the_window_the_properties_need():
    """RT < ST <= 2 RT (docs/timed.md): a member down since the group was Stable is
    expelled by neither timer before its session lapses, and one restarting after the
    rebalance timeout would have dropped it is still within its session."""
    t = resolve(load_toml(TIMED)).timing
    assert (t.tick_ms, t.session_ticks, t.rebalance_ticks) == (10_000, 3, 2)
    assert t.rebalance_ticks < t.session_ticks <= 2 * t.rebalance_ticks


@pytest.mark.spec("R11", "R27")
def test_a_completed_barrier_restarts_every_session_as_kafka_does():
    """GroupMetadataManager.completeClassicGroupJoin (GroupMetadataManager.java:7561,
    Kafka 4.4.0) reschedules every member's heartbeat expiration, a static member that
    did not rejoin included: model/timing.py ``rearm`` restarts its session (before
    issue 43 it kept running from the member's last request)."""
    a, b = member_id(0, 1), member_id(1, 1)
    stable = formed_group(((a, instance_id(0), connection(0, 1), 1), (b, instance_id(1), connection(1, 1), 2)), 1, a)
    preparing = stable._replace(phase=Phase.PREPARING_REBALANCE,
                                members=(stable.members[0]._replace(awaiting_join=True), stable.members[1]))
    completing = preparing._replace(phase=Phase.COMPLETING_REBALANCE, generation=2, members=tuple(
        m._replace(awaiting_join=False, pending_sync=True) for m in preparing.members))
    _, started = rearm(preparing, completing, (SessionTimeout(b), (RebalanceTimeout(), 1)), NO_MEMBER_ID)
    assert (SessionTimeout(b), SessionTimeout(b)) in started
    _, started = rearm(stable, stable._replace(pending=(member_id(2, 1),)), (SessionTimeout(a), SessionTimeout(b)),
                       NO_MEMBER_ID)
    assert not any(type(t) is SessionTimeout for _, t in started)  # nothing completed: the sessions run on


def test_timers_fire_at_their_deadline_and_time_waits_for_urgent_steps():
    """From the settled group every armed timer runs its full duration; a tick passes
    only with nothing in flight; a timer fires only once its ticks left are 0, and
    then time waits for it."""
    system = timed_system()
    s = system.initial()
    assert s.group.clock.left and all(x == system.timing.session_ticks for x in s.group.clock.left)
    kinds = [a.kind for a, _ in system.successors(s)]
    assert "tick" in kinds and "timer" not in kinds
    joined = next(n for a, n in system.successors(s) if a.kind == "join")
    assert "tick" not in [a.kind for a, _ in system.successors(joined)]  # its JoinGroup is in flight
    # a crashed member's session runs out tick by tick; at 0 it must fire before time passes on
    state = next(n for a, n in system.successors(s) if a.kind == "crash" and a.slot == 0)
    for _ in range(system.timing.session_ticks):
        state = _settled_tick(system, state)
    steps = system.successors(state)
    assert any(a.kind == "timer" and type(a.detail) is SessionTimeout for a, _ in steps)
    assert not any(a.kind == "tick" for a, _ in steps)


def _settled_tick(system, state):
    """``state`` after the live members' due heartbeats are answered and one tick passes."""
    for _ in range(20):
        steps = dict((a.kind, n) for a, n in system.successors(state) if a.kind in ("tick", "deliver", "reply", "heartbeat"))
        if "tick" in steps:
            return steps["tick"]
        state = next(iter(steps.values()))
    raise AssertionError("time never passes")


def test_a_live_member_heartbeats_only_when_its_session_would_lapse():
    system = timed_system()
    s = system.initial()
    assert not any(a.kind == "heartbeat" for a, _ in system.successors(s))  # its session was just restarted
    s = _settled_tick(system, _settled_tick(system, s))  # one tick left on every session
    beats = [a for a, _ in system.successors(s) if a.kind == "heartbeat"]
    assert {a.slot for a in beats} == {0, 1} and not any(a.kind == "tick" for a, _ in system.successors(s))


@pytest.mark.spec("R26", "R27", "R4", "R5", "R11")
def test_the_correct_model_holds_timed(rebalance_check):
    """The timed static configuration at budget 3: every property holds, with the
    timers and the static restart reached (must-show: the correct model holds)."""
    code, s = rebalance_check(*BUDGET_3)
    assert code == 0 and s["verdict"] == "holds", s["properties"]
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert status["bounded_rebalance"] == status["timers_in_window"] == status["static_restart_no_rebalance"] == "holds"
    covers = {c["name"]: c["reached"] for c in s["covers"]}
    assert covers["rebalance_timeout"] and covers["session_timeout"] and covers["sync_timeout"] and covers["static_rejoin"]
    assert s["actions_fired"]["tick"] > 0 and s["configuration"]["timed"]["session_timeout_ms"] == 30_000


def caught_only_timed(rebalance_check, mutation: str, prop: str, length: int) -> None:
    """``mutation`` violates ``prop`` timed, by a counterexample of ``length`` steps, and
    holds everything with --no-timed."""
    code, s = rebalance_check(*BUDGET_3, "--mutation", mutation)
    assert code == 1 and s["counterexample"]["property"] == prop
    assert s["counterexample"]["length"] == length
    code, s = rebalance_check(*BUDGET_3, "--mutation", mutation, "--no-timed")
    assert code == 0, [p for p in s["properties"] if p["status"] != "holds"]


@pytest.mark.slow  # the matrix (tests/test_mutations.py) catches it timed in the default suite
@pytest.mark.spec("R5", "R27")
def test_a_coordinator_keeping_a_silent_static_leader_is_caught_only_timed(rebalance_check):
    """Must-show: the barrier completes at the rebalance timeout without the crashed
    static leader but keeps it as the leader; the members that rejoined wait for an
    assignment it never sends until the pending-sync timeout, a whole rebalance
    timeout later (Kafka elects a member that joined, ClassicGroup.maybeElectNewJoinedLeader).
    Untimed the same configuration holds: the sync timeout may fire at once."""
    caught_only_timed(rebalance_check, "keep-silent-static-leader", "bounded_rebalance", 10)


@pytest.mark.slow  # the matrix (tests/test_mutations.py) catches it timed in the default suite
@pytest.mark.spec("R26", "R27")
def test_a_rebalance_timeout_removing_static_members_is_caught_only_timed(rebalance_check):
    """Must-show: a static member down since the group was Stable is dropped by the
    rebalance timeout a joiner's round runs; restarting within its session timeout it
    joins as a new member and the group rebalances (KIP-345 defeated). Untimed its
    session timeout may have fired anyway, so the restart is just another one."""
    caught_only_timed(rebalance_check, "rebalance-timeout-removes-static", "static_restart_no_rebalance", 14)


@pytest.mark.slow  # the matrix (tests/test_mutations.py) catches it timed in the default suite
@pytest.mark.spec("R26")
def test_a_restart_answered_with_a_stale_generation_rebalances_a_few_steps_later(rebalance_check):
    """static_restart_no_rebalance follows the restarted member until it is Stable:
    the stale generation fails its SyncGroup and its rejoin rebalances the group
    (the one-step property of before issue 43 held). Untimed too."""
    for timing in ((), ("--no-timed",)):
        code, s = rebalance_check(*BUDGET_3, *timing, "--mutation", "static-rejoin-stale-generation")
        assert code == 1 and s["counterexample"]["property"] == "static_restart_no_rebalance"
        assert s["counterexample"]["length"] > 2


def test_a_restart_is_followed_until_the_member_is_stable():
    """``Proc.restarting``: FRESH from the process's start, RESTARTING once its
    JoinGroup reached the Stable group within the session timeout, KEPT when it is
    Stable again at the generation it found (answered from the stored assignment)."""
    system = timed_system()
    s = system.initial()
    s = next(n for a, n in system.successors(s) if a.kind == "crash" and a.slot == 0)
    s = next(n for a, n in system.successors(s) if a.kind == "restart" and a.slot == 0)
    s = next(n for a, n in system.successors(s) if a == Action("deliver", 0, s.procs[0].requests[0]))
    assert s.procs[0].restarting == RESTARTING
    for _ in range(10):
        s = next(n for a, n in system.successors(s) if a.kind in ("deliver", "reply") and a.slot == 0)
        if s.procs[0].status == RUNNING and s.procs[0].consumer.phase.name == "STABLE":
            break
    assert s.procs[0].restarting == KEPT and s.group.generation == system.initial().group.generation


@pytest.mark.parametrize("args,message", [
    ((str(TIMED), "--faults", "crash,restart,failover"), "does not explore coordinator failover"),
    ((str(EXAMPLES / "kip848" / "migration.toml"), "--timed"), "an online migration's classic timers"),
    ((str(EXAMPLES / "kip848" / "regex.toml"), "--timed"), "a regular expression's resolution are not timed"),
])
def test_bad_timed_input_is_refused(rebalance_check, args, message):
    code, s = rebalance_check(*args)
    assert code == 2 and message in s["error"]["message"]


# --- KIP-848 timed (examples/kip848/timed.toml; the matrix rows in tests/test_kip848_check.py) ---------------

KIP848_TIMED = EXAMPLES / "kip848" / "timed.toml"  # a member, a joiner, pauses; tick 15 s, session 45 s


@pytest.mark.spec("K3")
def test_kafka_19233_keeps_a_rejoining_member_out_until_its_session_ends_caught_only_timed(rebalance_check):
    """Must-show (KAFKA-19233, ``epoch-zero-fenced``): a joiner whose join's response a pause lost rejoins at
    member epoch 0 while the coordinator holds it at a later epoch; refused FENCED_MEMBER_EPOCH, it is out of the
    group while its session runs down (Kafka 4.4.0 accepts every join at epoch 0:
    GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid, GroupMetadataManager.java:1664). Timed,
    ``joins_in_time`` fails with that story; the correct model holds it; untimed the mutation passes."""
    code, s = rebalance_check(str(KIP848_TIMED))
    assert code == 0 and {p["name"]: p["status"] for p in s["properties"]}["joins_in_time"] == "holds"
    assert s["actions_fired"]["tick"] > 0 and s["actions_fired"]["timer"] > 0
    code, s = rebalance_check(str(KIP848_TIMED), "--mutation", "epoch-zero-fenced")
    cex = s["counterexample"]
    assert code == 1 and cex["property"] == "joins_in_time" and cex["length"] == 17, cex
    assert "still out of the group (FENCED)" in cex["reason"] and "the coordinator still holds it" in cex["reason"]
    steps = json.loads(Path(cex["files"]["json"]).read_text())["steps"]
    details = [json.dumps(st.get("action")) for st in steps]
    assert any("FENCED_MEMBER_EPOCH" in d for d in details) and sum('"tick"' in d for d in details) >= 2
    code, s = rebalance_check(str(KIP848_TIMED), "--mutation", "epoch-zero-fenced", "--no-timed")
    assert code == 0 and "joins_in_time" not in {p["name"] for p in s["properties"]}


def test_a_consumer_group_times_its_sessions_and_joins():
    """The consumer group's clock: every member's session at its full duration at the start, a join one tick
    old while its member stays refused, and none at all while its response is in flight."""
    system = resolve(load_toml(KIP848_TIMED)).system()
    t = system.timing
    assert (t.session_ticks, t.heartbeat_ticks, t.rebalance_ticks) == (3, 1, 2)
    s = system.initial()
    assert s.group.clock.left == (3,) and s.procs[0].joining == 0
    joined = next(n for a, n in system.successors(s) if a.kind == "join")
    assert joined.procs[1].joining == 1 and "tick" not in [a.kind for a, _ in system.successors(joined)]


def test_a_session_timeout_the_broker_refuses_is_bad_input(tmp_path, rebalance_check):
    cfg = tmp_path / "short.toml"
    cfg.write_text(TIMED.read_text().replace("session_timeout_ms = 30000", "session_timeout_ms = 1000"))
    code, s = rebalance_check(str(cfg))
    assert code == 2 and "group.min.session.timeout.ms" in s["error"]["message"]


def test_ticks_round_up():
    t = timed.Timing(tick_ms=10_000, timeouts=DEFAULT_TIMEOUTS)
    assert (t.ticks(1), t.ticks(10_000), t.ticks(10_001), t.session_ticks, t.rebalance_ticks) == (1, 1, 2, 5, 30)
