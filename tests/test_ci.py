"""Issue 20 item 4, CI: the shipped pytest plugin (``pytest --rebalance``, the
``rebalance_check`` fixture), ``check --junit``, the packaged examples (``--example``)
and the GitHub Actions workflow in docs/. Each run is the real command or a real
pytest process; the deliberately wrong model is the assign-before-revoke mutation."""
import subprocess
import sys
import xml.etree.ElementTree as ET

from conftest import ROOT, run_cli

SMALL = """
[group]
protocol = "cooperative"
topics = { t = 4 }
[members]
initial = 3
joiners = 1
[faults]
kinds = ["join", "crash"]
budget = 1
"""
WRONG = SMALL + '[check]\nmutations = ["assign-before-revoke"]\n'


def pytest_run(cwd, *args):
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def test_rebalance_option_lists_one_item_per_property(tmp_path):
    code, out = pytest_run(tmp_path, "--rebalance", str(ROOT / "examples" / "default.toml"), "--collect-only", "-q")
    items = [line.rsplit("::", 1)[1] for line in out.splitlines() if "::" in line]
    assert code == 0 and items == ["exclusive_ownership", "exclusive_commits", "exclusive_processing", "commit_accepted",
                                   "commit_progress", "heartbeat_answered", "single_leader",
                                   "revoke_before_assign", "refinement", "quiescent_balance", "eventual_balance",
                                   "no_rebalance_storm"], out
    code, out = pytest_run(tmp_path, "--rebalance", "default", "--rebalance-args=--static", "--collect-only", "-q")
    assert "::unique_instance" in out and "::static_restart_no_rebalance" in out  # options count


def test_a_violated_property_fails_its_item_with_the_counterexample(tmp_path):
    (tmp_path / "good.toml").write_text(SMALL)
    (tmp_path / "wrong.toml").write_text(WRONG)
    code, out = pytest_run(tmp_path, "--rebalance", "good.toml", "-q", "-rA")
    assert code == 0 and "12 passed" in out, out
    code, out = pytest_run(tmp_path, "--rebalance", "wrong.toml", "-q", "-rA")
    assert code == 1
    assert "FAILED wrong.toml::revoke_before_assign" in out and "PASSED wrong.toml::exclusive_ownership" in out
    assert "counterexample to revoke_before_assign" in out and "SyncGroup(A1, gen 2" in out
    assert (tmp_path / "out" / "wrong" / "revoke_before_assign.svg").exists()


def test_bad_configuration_is_a_usage_error(tmp_path):
    code, out = pytest_run(tmp_path, "--rebalance", "nope", "--collect-only")
    assert code == 4 and "no example named 'nope'" in out and "default" in out and "Traceback" not in out
    (tmp_path / "bad.toml").write_text("[group]\nprotocol = 'nope'\n")
    code, out = pytest_run(tmp_path, "--rebalance", "bad.toml", "--collect-only")
    assert code == 2 and "bad.toml: " in out and "protocol" in out and "Traceback" not in out


def test_junit_report_one_case_per_property(tmp_path):
    (tmp_path / "wrong.toml").write_text(WRONG)
    (tmp_path / "good.toml").write_text(SMALL)
    for name, expected_code, failed in (("good", 0, []), ("wrong", 1, ["revoke_before_assign", "refinement", "exclusive_processing"])):
        code, _, err = run_cli("check", f"{name}.toml", "--continue", "--junit", f"{name}.xml", cwd=tmp_path)
        assert code == expected_code, err
        suite = ET.parse(tmp_path / f"{name}.xml").getroot().find("testsuite")
        cases = {c.get("name"): c for c in suite.iter("testcase")}
        assert len(cases) == 12 and suite.get("failures") == str(len(failed))
        assert sorted(n for n, c in cases.items() if c.find("failure") is not None) == sorted(failed)
    text = cases["revoke_before_assign"].find("failure").text
    assert "SyncGroup(A1, gen 2" in text and "revoke_before_assign.svg" in text


def test_junit_under_walks_and_a_stop_skips(tmp_path):
    code, _, _ = run_cli("check", "--walks", "3", "--depth", "20", "--junit", "reports/w.xml", cwd=tmp_path)
    cases = ET.parse(tmp_path / "reports" / "w.xml").getroot().find("testsuite")  # its folder made
    assert code == 0 and cases.get("failures") == "0"
    code, _, _ = run_cli("check", "--max-states", "10", "--junit", "s.xml", cwd=tmp_path)
    suite = ET.parse(tmp_path / "s.xml").getroot().find("testsuite")
    assert code == 3 and suite.get("skipped") == suite.get("tests") != "0"


def test_examples_ship_with_the_package(tmp_path):
    from rebalance import examples
    assert {"default", "connect/worker_joins", "design1_member_joins"} <= set(examples.names())
    code, out, err = run_cli("check", "--example", "default", "--faults", "join", "--max-faults", "1", cwd=tmp_path)
    assert code == 0 and "verdict: holds" in out, err
    code, _, err = run_cli("check", "--example", "nope", cwd=tmp_path)
    assert code == 2 and "no example named 'nope'" in err and "Traceback" not in err
    code, _, err = run_cli("check", "x.toml", "--example", "default", cwd=tmp_path)
    assert code == 2 and "not both" in err


def test_rebalance_check_fixture(rebalance_check):
    code, summary = rebalance_check("--protocol", "eager", "--faults", "join", "--max-faults", "1")
    assert code == 0 and summary["verdict"] == "holds"


def test_workflow_runs_check_and_uploads_svgs():
    flow = (ROOT / "docs" / "ci" / "rebalance.yml").read_text()
    assert "rebalance check examples/default.toml --require-covers --junit" in flow
    upload = flow[flow.index("actions/upload-artifact"):]
    assert "if: always()" in flow and "out/*.svg" in upload and "out/*.html" in upload


def test_conform_junit_one_case_per_trace(tmp_path):
    from test_conform import _emit
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _emit(corpus / "right.jsonl", "zombie")
    _emit(corpus / "fenceless.jsonl", "zombie", mutations=("no-commit-fencing",))  # the wrong coordinator
    code, _, err = run_cli("conform", corpus / "fenceless.jsonl", "--junit", "one.xml", "--out", "o", cwd=tmp_path)
    (case,) = ET.parse(tmp_path / "one.xml").getroot().iter("testcase")
    failure = case.find("failure")
    assert code == 1 and failure is not None and "(R9)" in failure.get("message") and failure.text, err
    code, _, err = run_cli("conform", corpus, "--junit", "all.xml", "--out", "o", cwd=tmp_path)
    suite = ET.parse(tmp_path / "all.xml").getroot().find("testsuite")
    assert code == 1 and suite.get("tests") == "2" and suite.get("failures") == "1", err
    code, out, err = run_cli("conform", "--side", "clients", corpus / "right.jsonl", "--junit", "x.xml", cwd=tmp_path)
    assert code == 2 and "--junit" in err
