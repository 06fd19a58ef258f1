"""Every numbered rule of spec/SPEC.md is implemented somewhere (model/ or checker/
names its tag) and exercised by a named test: a test function marked
``@pytest.mark.spec("R..")``, found by importing the test modules, so a rule is
covered by a test that runs, not by a comment."""
import importlib
import re

from conftest import ROOT

RULE = re.compile(r"^\*\*(R\d+) —", re.M)
TAG = re.compile(r"\bR\d+\b")


def tags_in(folder: str, pattern: re.Pattern = TAG) -> set:
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        found |= set(pattern.findall(path.read_text()))
    return found


def marked_rules() -> dict:
    """``{rule: [module::test, ...]}`` from the ``spec`` marks on test functions."""
    out: dict = {}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        module = importlib.import_module(path.stem)
        for name, fn in vars(module).items():
            if name.startswith("test_") and callable(fn):
                for mark in getattr(fn, "pytestmark", []):
                    if mark.name == "spec":
                        for rule in mark.args:
                            out.setdefault(rule, []).append(f"{path.name}::{name}")
    return out


def by_number(rules) -> list:
    return sorted(rules, key=lambda r: int(r[1:]))


def test_every_rule_is_implemented_and_exercised_by_a_named_test():
    rules = set(RULE.findall((ROOT / "spec" / "SPEC.md").read_text()))
    assert len(rules) == 77
    implemented = tags_in("model") | tags_in("checker")
    tested = {r: t for r, t in marked_rules().items() if r.startswith("R")}  # K..: tests/test_kip848_spec.py
    assert by_number(rules - implemented) == [], "rules implemented nowhere"
    assert by_number(rules - set(tested)) == [], "rules no test is marked for"
    assert by_number(set(tested) - rules) == [], "tests marked for no rule"
    assert by_number(implemented - rules) == [], "tags citing no rule"


def test_no_rule_is_claimed_by_a_comment_alone():
    for path in (ROOT / "tests").glob("test_*.py"):
        assert not re.search(r"^# spec: ", path.read_text(), re.M), f"{path.name}: mark the test instead"
