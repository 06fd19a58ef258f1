"""Your own assignor (issue 20 item 2): ``--assignor module:function`` checked under
the full protocol by ``check`` and against its obligations by ``prove``; the flawed
example caught by both with a counterexample, the correct one passing, bad
plug-ins refused with exit 2."""
import json

import pytest

from conftest import EXAMPLES, ROOT, run_cli
from rebalance.checker import prove
from rebalance.checker.settings import resolve

JOINS = EXAMPLES / "design1_member_joins.toml"
FLAWED, STICKY = "rebalance.examples.assignors.flawed_sticky:assign", "rebalance.examples.assignors.sticky:assign"
SMALL = ("--max-members", "3", "--max-partitions", "3", "--examples", "100")


def check(*args, out):
    code, stdout, err = run_cli("check", *args, "--json", "--out", out, cwd=ROOT)
    assert stdout, err
    return code, json.loads(stdout)


@pytest.mark.spec("R16", "R23")
def test_check_catches_the_flawed_assignor_with_a_counterexample(tmp_path):
    # D joins A(T-0,T-3) B(T-1) C(T-2): T-3 moves from A to D, not D's neighbour C, so it is not withheld
    code, summary = check(JOINS, "--assignor", FLAWED, out=tmp_path)
    assert code == 1 and summary["configuration"]["assignor"] == FLAWED
    violated = {p["name"] for p in summary["properties"] if p["status"] == "violated"}
    assert "revoke_before_assign" in violated
    ce = next(c for c in summary["counterexamples"] if c["property"] == "revoke_before_assign")
    trace = json.loads(open(ce["files"]["json"]).read())
    assert ce["length"] > 0 and trace


def test_check_passes_the_correct_assignor(tmp_path):
    code, summary = check(JOINS, "--assignor", STICKY, out=tmp_path)
    assert code == 0 and summary["verdict"] == "holds" and summary["distinct_states"] > 10_000


@pytest.mark.spec("R16", "R22", "R23")
def test_prove_catches_the_flawed_assignor_with_a_counterexample():
    code, out, err = run_cli("prove", "--assignor", FLAWED, *SMALL, "--json", cwd=ROOT)
    assert code == 1, err
    obligations = json.loads(out)["obligations"]
    bad = [o for o in obligations if o["status"] == "counterexample"]
    assert bad and all(o["method"].startswith(("exhaustive", "hypothesis")) for o in obligations)
    ce = bad[0]["counterexample"]
    assert len(ce["input"]) == 3 and "while" in ce["violates"] and ce["assignment"]


def test_prove_passes_the_correct_assignor():
    code, out, err = run_cli("prove", "--assignor", STICKY, *SMALL, "--json", cwd=ROOT)
    assert code == 0, out + err
    statuses = [o["status"] for o in json.loads(out)["obligations"]]
    assert statuses == ["proved"] * 3 + ["not violated"]


def test_the_flaw_hides_from_two_members(monkeypatch):
    # subtle: every input with one or two members is fine; the search beyond the bound finds three
    monkeypatch.chdir(ROOT)
    base = resolve({}, assignor=FLAWED).group
    *exhaustive, search = prove.plugin_obligations(base, max_members=2, max_partitions=4, examples=200)
    assert [o.status for o in exhaustive] == ["proved"] * 3
    assert search.status == "counterexample" and len(search.counterexample["input"]) >= 3


PLUGINS = {
    "shape.py": "def assign(partitions, subscriptions):\n    return list(partitions)\n",
    "unknown.py": "def assign(partitions, subscriptions):\n    return {'Z9': list(partitions)}\n",
    "raises.py": "def assign(partitions, subscriptions):\n    raise KeyError('boom')\n",
    "value.py": "assign = 42\n",
}
BAD = [
    ("nosuchmodule:assign", "module 'nosuchmodule' cannot be imported"),
    ("shape:missing", "module 'shape' has no 'missing'"),
    ("value:assign", "'assign' is a int, not callable"),
    ("shape:assign", "returned list, not a dict of member id -> partitions"),
    ("unknown:assign", "assigned to 'Z9', not a member (A1)"),
    ("raises:assign", "raised KeyError: 'boom'"),
    ("justaname", "unknown assignor 'justaname' (expected one of range, roundrobin, sticky, cooperative-sticky, streams, "
                  "high-availability, uniform, or your own as module:function)"),
]


@pytest.mark.parametrize("command", ["check", "prove"])
@pytest.mark.parametrize("spec,message", BAD)
def test_bad_plugins_exit_2_naming_the_problem(tmp_path, command, spec, message):
    for name, text in PLUGINS.items():
        (tmp_path / name).write_text(text)
    args = ("check", "--assignor", spec, "--out", tmp_path) if command == "check" else ("prove", "--assignor", spec)
    code, _, err = run_cli(*args, cwd=tmp_path)
    assert code == 2 and message in err.replace("\n", " ") and "Traceback" not in err, err


def test_an_eager_plugin_giving_everything_to_everyone_is_caught(tmp_path):
    (tmp_path / "greedy.py").write_text("def assign(partitions, subscriptions):\n"
                                        "    return {m: list(partitions) for m in subscriptions}\n")
    code, out, err = run_cli("prove", "--assignor", "greedy:assign", "--protocol", "eager", "--json", cwd=tmp_path)
    assert code == 1, err
    first = json.loads(out)["obligations"][0]
    assert first["status"] == "counterexample" and "t-0 to A and B" in first["counterexample"]["violates"]
    code, out, err = run_cli("check", "--assignor", "greedy:assign", "--protocol", "eager", "--members", "2",
                             "--partitions", "2", "--faults", "leave", "--max-faults", "1", "--json",
                             "--out", tmp_path / "out", cwd=tmp_path)
    summary = json.loads(out)
    assert code == 1 and "exclusive_processing" in {p["name"] for p in summary["properties"]
                                                    if p["status"] == "violated"}, summary


def test_replay_holds_the_seed_to_a_plugin_assignor():
    # the seed's expectations are the correct assignor's rounds; the flawed one gives D T-3 in round 1
    code, out, _ = run_cli("replay", JOINS, "--assignor", STICKY, cwd=ROOT)
    assert code == 0 and "verdict: holds" in out
    code, out, _ = run_cli("replay", JOINS, "--assignor", FLAWED, cwd=ROOT)
    assert code == 1 and "mismatch: round 1 (generation 2), member D, assigned: expected [], got [T-3]" in out
    assert "violated: revoke_before_assign" in out
