"""Bad input under --json, for every command (the design brief's command-line
contract): exit 2, one JSON object ``{"error": {"message", "exit_code", "command"}}``
on stdout and the message on stderr, whether the command's own validation
(ConfigError) or click's option parsing refused it; an incomplete run (exit 3)
keeps its own JSON."""
import json
import subprocess
import sys

import pytest

from conftest import run_cli


@pytest.mark.parametrize("args, command, names", [
    (("check", "--members", "0"), "check", "members"),
    (("check", "--protocol", "bogus"), "check", "--protocol"),
    (("replay", "/nonexistent/scenario.toml"), "replay", "not found"),
    (("prove", "--max-members", "99"), "prove", "--max-members"),
    (("simulate", "--out", "unused", "--runs", "0"), "simulate", "--runs"),
    (("simulate", "--runs", "5"), "simulate", "--out"),
    (("vectors", "--out", "/dev/null"), "vectors", "is a file"),
])
def test_bad_input_under_json_is_one_json_error_object(tmp_path, args, command, names):
    code, stdout, stderr = run_cli(*args, "--json", cwd=tmp_path)
    assert code == 2
    doc = json.loads(stdout)
    assert set(doc) == {"error"} and doc["error"]["exit_code"] == 2 and doc["error"]["command"] == command
    assert names in doc["error"]["message"]
    assert doc["error"]["message"] in stderr and "Traceback" not in stderr


def test_without_json_nothing_goes_to_stdout(tmp_path):
    code, stdout, stderr = run_cli("check", "--members", "0", cwd=tmp_path)
    assert code == 2 and stdout == "" and "members must be at least 1" in stderr


def test_an_incomplete_run_keeps_its_json(rebalance_check):
    code, summary = rebalance_check("--max-states", "50")
    assert code == 3 and summary["verdict"] == "incomplete" and "error" not in summary


def test_check_leaves_nothing_in_the_working_directory_but_its_outputs(tmp_path):
    # check loads neither the wire library (kio, serve's and ctl's) nor hypothesis, whose Unicode tables
    # (200 MB at their peak) would go into ./.hypothesis
    code, out, err = run_cli("check", "--members", "2", "--partitions", "2", "--faults", "join", "--max-faults", "1",
                             "--out", "o", cwd=tmp_path)
    assert code == 0, err
    assert {p.name for p in tmp_path.iterdir()} <= {"o"}  # the counterexamples, if any
    probe = "import sys; import rebalance.cli; print(sorted({'kio', 'hypothesis'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


def test_serve_and_member_load_the_wire_library_without_hypothesis(tmp_path):
    # impl/__init__.py: kio registers hypothesis strategies whenever hypothesis is importable, and hypothesis
    # then builds its Unicode tables (200 MB at their peak, a second) into ./.hypothesis; a coordinator's or a
    # member's process loads kio as if hypothesis were absent, and hypothesis still imports afterwards
    probe = ("import sys; import rebalance.impl.coordinator, rebalance.impl.member, rebalance.impl.proxy; "
             "loaded = 'hypothesis' in sys.modules; import hypothesis.strategies; print(loaded)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"
    assert not (tmp_path / ".hypothesis").exists()
