"""A designer's own situation (issue 20 item 1): ``[initial]`` and ``[[prefix]]``
explored by ``check`` under every interleaving, and ``replay`` checking every
property at every step against ``[[expect]]`` blocks; each verdict seen to fail."""
import json

import pytest

from conftest import EXAMPLES, run_cli

JOINS = EXAMPLES / "design1_member_joins.toml"
BASE = JOINS.read_text()


@pytest.mark.spec("R23")
def test_seed_example_checked_under_every_interleaving(rebalance_check):
    # seed 000, Design I, member joins: from A(T-0,T-3) B(T-1) C(T-2), D's join under every interleaving
    # and any one leave or crash: every property holds and every cover is reached
    code, summary = rebalance_check(JOINS, "--require-covers")
    assert code == 0 and summary["verdict"] == "holds", summary
    c = summary["configuration"]
    assert c["members"] == 3 and c["joiners"] == 1 and c["prefix"] == ["D join"]
    assert c["initial"] == {"generation": 1, "leader": "A", "owned": {"A": ["T-0", "T-3"], "B": ["T-1"], "C": ["T-2"]}}
    assert all(p["status"] == "holds" for p in summary["properties"])
    assert summary["distinct_states"] > 10_000  # explored, not the one schedule replay takes
    assert {"leave", "crash", "timer"} <= set(summary["actions_fired"])


def test_seed_example_check_catches_a_wrong_model(rebalance_check):
    code, summary = rebalance_check(JOINS, "--mutation", "assign-before-revoke")
    assert code == 1 and summary["counterexample"]["property"] in {"revoke_before_assign", "exclusive_processing",
                                                                   "refinement"}
    assert summary["counterexample"]["length"] >= 1


def test_seed_example_replay_meets_its_expectations():
    code, out, err = run_cli("replay", JOINS, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["verdict"] == "holds" and report["violations"] == [] and report["mismatches"] == []
    assert [r["generation"] for r in report["rounds"]] == [2, 3]


def test_a_wrong_expectation_exits_1_naming_round_member_field(tmp_path):
    wrong = tmp_path / "wrong.toml"
    # the seed says D gets T4 (T-3) in the second round; expect it in the first instead
    wrong.write_text(BASE.replace('D = { assigned = [] }', 'D = { assigned = ["T-3"] }'))
    code, out, _ = run_cli("replay", wrong)
    assert code == 1
    assert "mismatch: round 1 (generation 2), member D, assigned: expected [T-3], got []" in out
    assert "verdict: violated" in out


def test_a_missing_round_is_a_mismatch(tmp_path):
    more = tmp_path / "more.toml"
    more.write_text(BASE + '\n[[expect]]\nmembers = { A = { revoked = [] } }\n')
    code, out, _ = run_cli("replay", more, "--json")
    assert code == 1
    assert json.loads(out)["mismatches"] == ["round 3: expected, but the replay completed 2 round(s)"]


def test_replay_checks_every_property_at_every_step():
    # the cooperative adjustment switched off: D gets T-3 while A still owns it, seen at the step it happens
    code, out, _ = run_cli("replay", JOINS, "--mutation", "assign-before-revoke", "--json")
    report = json.loads(out)
    assert code == 1
    found = {v["property"]: v for v in report["violations"]}
    first = found["revoke_before_assign"]
    assert "T-3 assigned to D1 while A1 still owns it" in first["reason"]
    # seen at the step it happens (refinement, the spec's R23, at the same step), not at the end
    assert first["step"] > 1 and first["step"] == min(v["step"] for v in report["violations"])


def test_replay_accepts_time():
    # Connect's scheduled.rebalance.max.delay.ms = 0 in [time] (R38): the lost partitions go out at once
    path = EXAMPLES / "connect/worker_leaves_no_delay.toml"
    assert "[time]" in path.read_text()
    code, out, err = run_cli("replay", path, "--mutation", "connect-leader-state", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "holds", (out, err)
    assert not any(r.get("scheduled") for r in report["rounds"])


BAD = [
    ('owned = { A = ["T-0", "T-9"], B = ["T-1"] }', "initial.owned.A: unknown partition 'T-9'"),
    ('owned = { A = ["T-0", "T-1"], B = ["T-1"] }', "partition T-1 is owned twice, by A and B"),
    ('owned = { A = ["T-0"], B = ["T-1"] }\nleader = "C"', "initial.leader C is not among the members (A, B)"),
    ('owned = { A = ["T-0"] }\ngeneration = 0', "initial.generation must be a whole number of at least 1"),
]


@pytest.mark.parametrize("command", ["check", "replay"])
@pytest.mark.parametrize("initial,message", BAD)
def test_bad_initial_exits_2_naming_the_problem(tmp_path, command, initial, message):
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[group]\ntopics = {{ T = 4 }}\n[initial]\n{initial}\n')
    code, out, err = run_cli(command, bad, "--out", tmp_path) if command == "check" else run_cli(command, bad)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_a_step_not_enabled_exits_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[group]\ntopics = { T = 2 }\n[initial]\nowned = { A = ["T-0", "T-1"] }\n'
                   '[[prefix]]\naction = "reply"\nmember = "A"\n')
    for args in (("check", bad, "--out", tmp_path), ("replay", bad)):
        code, _, err = run_cli(*args)
        assert code == 2 and "step reply A is not possible here (no response to it is in flight)" in err, err


def test_a_prefix_step_with_an_unknown_key_exits_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(BASE.replace('member = "D"\n', 'member = "D"\nsettle = true\n', 1))
    code, _, err = run_cli("replay", bad)
    assert code == 2 and "prefix[0]: unknown key(s) settle (expected action, member)" in err, err


def test_check_refuses_events_and_members_with_initial(tmp_path):
    for extra, message in (('[[events]]\naction = "join"\nmember = "B"\n', "is a scripted scenario"),
                           ('seed_title = "Scale-up"\n[[rounds]]\n', "`rebalance replay "),
                           ('[members]\ninitial = 2\n', "give neither --members, members.initial")):
        bad = tmp_path / "bad.toml"
        bad.write_text('[initial]\nowned = { A = ["t-0"] }\n' + extra)
        code, _, err = run_cli("check", bad, "--out", tmp_path)
        assert code == 2 and message in err, err


def test_a_scripted_prefix_of_deliveries(rebalance_check, tmp_path):
    # the prefix takes D's JoinGroup to the coordinator and back to A's heartbeat: the check starts mid-round
    scripted = tmp_path / "scripted.toml"
    scripted.write_text(BASE + '\n[[prefix]]\naction = "deliver"\nmember = "D"\n')
    code, summary = rebalance_check(scripted, "--faults", "leave", "--max-faults", "1")
    assert code == 0 and summary["verdict"] == "holds", summary


def test_the_start_travels_with_the_system_spec():
    # the Spark engines rebuild the System from System.spec on executors: the start must come along
    import pickle

    from rebalance.checker.settings import load_toml, resolve
    from rebalance.checker.system import System
    system = resolve(load_toml(JOINS)).system()
    rebuilt = System(*pickle.loads(pickle.dumps(system.spec)))
    spec = list(system.spec)
    spec[7] = None  # the start
    assert rebuilt.initial() == system.initial() != System(*spec).initial()
    assert system.initial().faults_left == 1 and system.initial().procs[3].requests  # D's JoinGroup in flight
