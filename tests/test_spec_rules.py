"""Every numbered rule of spec/SPEC.md is implemented somewhere (model/ or checker/
names its tag) and tested somewhere (a test is marked `# spec: R..`)."""
import re

from conftest import ROOT

RULE = re.compile(r"^\*\*(R\d+) —", re.M)
TAG = re.compile(r"\bR\d+\b")


def tags_in(folder: str, pattern: re.Pattern = TAG) -> set:
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        found |= set(pattern.findall(path.read_text()))
    return found


def test_every_rule_is_implemented_and_tested():
    rules = set(RULE.findall((ROOT / "spec" / "SPEC.md").read_text()))
    assert len(rules) >= 30
    implemented = tags_in("model") | tags_in("checker")
    tested = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        for line in re.findall(r"^# spec: (.*)$", path.read_text(), re.M):
            tested |= set(TAG.findall(line))
    assert sorted(rules - implemented, key=lambda r: int(r[1:])) == [], "rules implemented nowhere"
    assert sorted(rules - tested, key=lambda r: int(r[1:])) == [], "rules tested nowhere"
    assert sorted(implemented - rules, key=lambda r: int(r[1:])) == [], "tags citing no rule"
