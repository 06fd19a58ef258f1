"""Simulation: the model's handlers on a virtual clock (checker/simulation.py), the
seeds' situations, and `rebalance simulate` end to end on real Spark local mode."""
import csv
import json
import random

import pytest

from conftest import run_cli
from rebalance.checker.campaign import ROW_FIELDS, run_one
from rebalance.checker.simulation import DEFAULT_HORIZON_MS, Simulation, Timing, simulate
from rebalance.checker.situations import script
from rebalance.model.config import GroupConfig

COOPERATIVE = GroupConfig(topics=(("t", 12),))
EAGER = GroupConfig(topics=(("t", 12),), protocol="eager", assignor="range")
S = 1_000


def test_static_restart_within_the_session_timeout_costs_no_rebalance():
    # KIP-345: the returning static member gets its 3 partitions back; they were
    # unavailable for the 15 s it was down (150 ticks), and nothing moved
    m = simulate(COOPERATIVE, 4, True, [(0, "crash", 1), (15 * S, "start", 1)])
    assert (m.rebalances, m.moved, m.censored) == (0, 0, False)
    assert 3 * 150 <= m.unavailable_ticks <= 3 * 150 + 3


def test_dynamic_process_death_waits_for_the_session_timeout():
    # no LeaveGroup: the coordinator learns of the death by session.timeout.ms (45 s);
    # the restarted process is a new member, so its partitions come back only then
    m = simulate(COOPERATIVE, 4, False, [(0, "crash", 1), (15 * S, "start", 1)])
    assert m.rebalances >= 1 and not m.censored
    assert m.unavailable_ticks >= 3 * 450 and m.ticks_to_balance >= 450


def test_eager_stops_the_world_cooperative_moves_only_what_moves():
    runs = {}
    for name, cfg in (("eager", EAGER), ("cooperative", COOPERATIVE)):
        runs[name] = simulate(cfg, 3, False, script("scale_up", random.Random(7), 3), rng=random.Random(7))
    assert runs["eager"].rebalances == 1 and runs["cooperative"].rebalances == 2  # Design I: two rounds
    assert runs["eager"].unavailable_ticks > runs["cooperative"].unavailable_ticks
    assert runs["cooperative"].moved == 3  # 12 partitions over 4 members: 3 move to the new one


@pytest.mark.spec("R33", "R38")
def test_without_a_scheduled_delay_lost_partitions_return_right_after_the_session_timeout():
    # Connect's scheduled.rebalance.max.delay.ms = 0 (testScheduledDelayIsDisabled): a dead member's 3
    # partitions are reassigned in the round its session timeout (45 s) starts, not 60 s later
    runs = {}
    for delay_ms in (0, 60 * S):
        timing = Timing(scheduled_delay_ms=delay_ms)
        cfg = GroupConfig(topics=(("t", 12),), protocol="deferred", **timing.group_ticks())
        runs[delay_ms] = simulate(cfg, 4, False, [(0, "crash", 1)], timing)
    assert 3 * 450 <= runs[0].unavailable_ticks < 3 * 500 and not runs[0].censored
    assert runs[60 * S].unavailable_ticks >= 3 * (450 + 600)


def test_a_run_is_a_function_of_its_spec():
    spec = (5, "rolling_bounce", "deferred", False, 4, 12, 3)
    assert run_one(spec) == run_one(spec)
    assert run_one(spec) != run_one((6, *spec[1:]))  # another run index draws other times


def test_a_run_goes_on_to_its_verdict():
    # issue 14: incremental (Design III) scale-up at 30x300 moves one partition a
    # round, so it balances only after 171.6 s, past the old fixed cut 127 s after
    # the last action, which reported it unbalanced with 42 rebalances
    spec = (0, "scale_up", "incremental", False, 30, 300, 1)
    row = dict(zip(ROW_FIELDS, run_one(spec)))
    assert (row["rebalances"], row["moved"], row["ticks_to_balance"], row["censored"]) == (57, 56, 1_716, False)
    cut = dict(zip(ROW_FIELDS, run_one(spec, horizon_ms=127_000)))
    assert cut["censored"] and cut["ticks_to_balance"] is None and cut["rebalances"] < 57


def test_a_tiny_horizon_censors_the_run_instead_of_calling_it_unbalanced():
    # a dynamic member's death is found by session.timeout.ms (45 s): not within 1 s
    m = simulate(COOPERATIVE, 4, False, [(0, "crash", 1)], horizon_ms=1_000)
    assert m.censored and m.ticks_to_balance is None
    assert 3 * 10 <= m.unavailable_ticks <= 3 * 10 + 3  # counted up to the cut: a lower bound


def test_a_quiet_run_ends_on_its_own_not_at_the_horizon():
    script_ = [(0, "crash", 1), (15 * S, "start", 1)]
    runs = [simulate(COOPERATIVE, 4, False, script_, horizon_ms=h)
            for h in (DEFAULT_HORIZON_MS, 10 * DEFAULT_HORIZON_MS)]
    assert runs[0] == runs[1] and not runs[0].censored  # same events: it stopped once quiet


def test_quiet_waits_for_scripted_actions_and_scheduled_rebalances():
    deferred = GroupConfig(topics=(("t", 12),), protocol="deferred")
    sim = Simulation(deferred, 4, False)
    sim.run_until(60 * S, stop=sim.quiet)
    assert sim.quiet() and sim.balanced
    slot, c = next(iter(sim.consumers.items()))
    sim.consumers[slot] = c._replace(scheduled=3)  # a ScheduledRebalanceTimeout counting down (R38)
    assert sim.balanced and not sim.quiet()
    sim.consumers[slot] = c
    sim.act_at(sim.now + S, "stop", 1)
    assert sim.balanced and not sim.quiet()  # an action is still to come
    # Design II defers the leaver's partitions until scheduled.rebalance.max.delay.ms
    sim.run_until(sim.now + 30 * S)
    assert not sim.quiet() and any(c.scheduled >= 0 for c in sim.consumers.values())
    sim.run_until(sim.now + 120 * S, stop=sim.quiet)
    assert sim.quiet() and all(c.scheduled < 0 for c in sim.consumers.values())


def test_a_started_process_unbalances_the_group_at_once():
    sim = Simulation(COOPERATIVE, 3, False)
    sim.run_until(60 * S, stop=sim.quiet)
    sim.act_at(sim.now, "start", 3)
    sim.run_until(sim.now)  # the start only: its JoinGroup is still on the wire
    assert not sim.balanced and not sim.quiet()  # loads 4, 4, 4, 0


def test_ticks_follow_the_configured_tick():
    coarse = simulate(COOPERATIVE, 4, True, [(0, "crash", 1), (15 * S, "start", 1)], Timing(tick_ms=1_000))
    assert 3 * 15 <= coarse.unavailable_ticks <= 3 * 15 + 1


@pytest.mark.slow  # Spark local mode end to end, about 60 s
def test_simulate_writes_parquet_table_and_plots(tmp_path):
    out = tmp_path / "results"
    code, stdout, stderr = run_cli("simulate", "--out", out, "--runs", "24", "--sizes", "3x12",
                                   "--situations", "rolling_bounce,process_death",
                                   "--protocols", "eager,cooperative,deferred", "--json", cwd=tmp_path)
    assert code == 0, stderr
    summary = json.loads(stdout)
    with open(out / "table.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 3 * 2 == len(summary["table"])  # situations x protocols x static
    assert sum(int(r["runs"]) for r in rows) == 24
    assert {r["censored"] for r in rows} == {"0"}  # every run reached its verdict within the default horizon
    static_bounce = [r for r in rows if r["situation"] == "rolling_bounce" and r["static"] == "True"]
    assert {float(r["rebalances"]) for r in static_bounce} == {0.0}  # KIP-345: restarts within the session
    assert (out / "runs.parquet").is_dir() and any((out / "runs.parquet").glob("*.parquet"))
    assert "## rolling bounce" in (out / "table.md").read_text()
    for metric in ("rebalances", "moved", "unavailable_ticks", "ticks_to_balance"):
        assert (out / f"{metric}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging left behind


@pytest.mark.slow  # Spark local mode end to end, about 55 s
def test_censored_runs_are_counted_not_averaged(tmp_path):
    # 1 ms after the last stop the LeaveGroup (dynamic) is still on the wire and a
    # static member waits for session.timeout.ms: no run can be quiet yet
    out = tmp_path / "results"
    code, stdout, stderr = run_cli("simulate", "--out", out, "--runs", "4", "--sizes", "3x12",
                                   "--situations", "scale_down", "--protocols", "eager", "--horizon-ms", "1",
                                   "--json", cwd=tmp_path)
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["horizon_ms"] == 1
    for row in summary["table"]:
        assert (row["runs"], row["censored"], row["censored_share"]) == (2, 2, 1.0)
        assert row["rebalances"] is row["moved"] is row["unavailable_ticks"] is row["ticks_to_balance"] is None
    assert "| — | — | — | — | 2 (100%) |" in (out / "table.md").read_text()


@pytest.mark.parametrize("args,message", [
    (("--sizes", "3y12"), "expected MEMBERSxPARTITIONS"),
    (("--sizes", "200x2000"), "members must be 2..100"),
    (("--runs", "0"), "--runs must be at least 1"),
    (("--horizon-ms", "0"), "--horizon-ms must be at least 1"),
    (("--situations", "meteor_strike"), "unknown situation 'meteor_strike'"),
    (("--protocols", "streams"), "unknown protocol 'streams'"),
    (("--scheduled-rebalance-max-delay-ms", "-1"), "--scheduled-rebalance-max-delay-ms must be at least 0"),
])
def test_bad_input_exits_2_naming_the_problem(tmp_path, args, message):
    code, _, err = run_cli("simulate", "--out", tmp_path / "r", *args, cwd=tmp_path)
    assert code == 2 and message in err
    assert not (tmp_path / "r").exists()
