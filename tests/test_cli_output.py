"""Issue 41 items 3 and 7: shipped examples run by name under the command they belong to;
logs fit CI (progress lines off a terminal, warnings on stderr, no hard wrapping, one JSON
error shape, exit codes that survive a closed pipe)."""
import io
import json
import os
import subprocess
import time

import pytest
from rich.console import Console

from conftest import REBALANCE, run_cli
from rebalance import examples
from rebalance.progress import Reporter


def test_each_example_is_listed_under_the_commands_that_take_it():
    check, replay = examples.names("check"), examples.names("replay")
    assert set(check) | set(replay) == set(examples.names())
    assert {"default", "connect/two_kinds_checked", "design1_member_joins"} <= set(check)
    assert {"connect/worker_joins", "design1_member_joins", "streams_scale_up"} <= set(replay)
    assert "connect/worker_joins" not in check and "default" not in replay
    _, help_text, _ = run_cli("replay", "--help")
    assert "connect/worker_joins" in help_text and "streams_scale_up" in help_text


@pytest.mark.parametrize("command, name", [("check", n) for n in examples.names("check")]
                         + [("replay", n) for n in examples.names("replay")])
def test_every_example_runs_by_name(tmp_path, command, name):
    """A check example within a few hundred states (exit 3 is a run stopped by that
    bound, not a refusal); a scenario replayed whole."""
    bound = ("--max-states", "300") if command == "check" else ()
    code, out, err = run_cli(command, "--example", name, *bound, "--json", cwd=tmp_path)
    assert code in ((0, 1, 3) if command == "check" else (0,)), err
    assert "error" not in json.loads(out)


def test_an_example_under_the_wrong_command_names_the_right_one(tmp_path):
    code, out, err = run_cli("check", "--example", "connect/worker_joins", cwd=tmp_path)
    assert code == 2 and "rebalance replay --example connect/worker_joins" in err
    code, out, err = run_cli("replay", "--example", "default", cwd=tmp_path)
    assert code == 2 and "rebalance check --example default" in err
    code, out, err = run_cli("replay", "x.toml", "--example", "design1_member_joins", cwd=tmp_path)
    assert code == 2 and "not both" in err


def test_the_example_assignors_are_importable_by_module_path(tmp_path):
    code, out, err = run_cli("check", "--example", "design1_member_joins", "--assignor",
                             "rebalance.examples.assignors.flawed_sticky:assign", "--json", cwd=tmp_path)
    assert code == 1 and json.loads(out)["counterexample"]["property"] == "revoke_before_assign", err


def test_progress_lines_off_a_terminal_name_the_figures_and_the_phase():
    text = io.StringIO()
    with Reporter(Console(file=text, width=60), interval_s=0.05) as reporter:
        reporter.update(1000, 2500, 300, 7)
        time.sleep(0.3)
        reporter.update(2000, 5200, 100, 8, phase="liveness")
        time.sleep(0.3)
    lines = text.getvalue().splitlines()
    assert len(lines) >= 4 and all(line.startswith("progress ") for line in lines)  # one line each, unwrapped
    assert "exploring, 1,000 states, 2,500 transitions, depth 7, queue 300" in lines[0] and "states/s" in lines[0]
    assert "liveness, 2,000 states, 5,200 transitions, depth 8, queue 100" in lines[-1]


def test_a_closed_pipe_keeps_the_exit_code(tmp_path):
    p = subprocess.Popen([str(REBALANCE), "check", "--max-states", "20000"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader goes away, as `| head` does
    err = p.stderr.read().decode()
    assert p.wait() == 3 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_errors_and_warnings_go_to_stderr_unwrapped(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    p = subprocess.run([str(REBALANCE), "check", "--example", "nope"], capture_output=True, text=True, cwd=tmp_path,
                       env=env)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and len(p.stderr) > 100  # a long message on one line
    p = subprocess.run([str(REBALANCE), "check", "--members", "12", "--partitions", "60", "--max-seconds", "1",
                        "--json"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert p.returncode == 3 and "warning:" in p.stderr and json.loads(p.stdout)["warnings"]


def test_every_command_errs_in_one_json_shape(tmp_path):
    shapes = []
    for args in (("check", "--members", "0"), ("conform", "missing.jsonl"), ("conform", "a.jsonl", "b.jsonl"),
                 ("replay",)):
        code, out, err = run_cli(*args, "--json", cwd=tmp_path)
        error = json.loads(out)["error"]
        assert code == 2 and error["exit_code"] == 2 and error["message"] in err, (args, out, err)
        shapes.append({"message", "exit_code", "command"} <= set(error) and error["command"] == args[0])
    assert all(shapes)
