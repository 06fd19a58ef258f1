"""Every rule of spec/KIP848.md (K..) is implemented (model/consumer_group/ or the
consumer protocol's checker modules name its tag) and exercised by a test marked
``@pytest.mark.spec("K..")``, as tests/test_spec_rules.py holds the R rules."""
import re

from conftest import ROOT
from test_spec_rules import marked_rules

RULE = re.compile(r"^\*\*(K\d+) —", re.M)
TAG = re.compile(r"\bK\d+\b")


def _tags() -> set:
    found = set()
    for path in [*(ROOT / "model" / "consumer_group").glob("*.py"), *(ROOT / "checker").glob("consumer_*.py")]:
        found |= set(TAG.findall(path.read_text()))
    return found


def test_every_kip848_rule_is_implemented_and_exercised_by_a_named_test():
    rules = set(RULE.findall((ROOT / "spec" / "KIP848.md").read_text()))
    assert len(rules) == 17
    tested = {r for r in marked_rules() if r.startswith("K")}
    assert sorted(rules - _tags()) == [], "rules implemented nowhere"
    assert sorted(rules - tested) == [], "rules no test is marked for"
    assert sorted(tested - rules) == [], "tests marked for no rule"
    assert sorted(_tags() - rules) == [], "tags citing no rule"


MIGRATION_RULE = re.compile(r"^\*\*(M\d+) —", re.M)
MIGRATION_TAG = re.compile(r"\bM\d+\b")


def test_every_migration_rule_is_implemented_and_exercised_by_a_named_test():
    """The online migration's rules (spec/KIP848.md, "Online migration", M..) likewise: named
    in model/consumer_group/ or checker/migration_*.py, each marked by a test."""
    rules = set(MIGRATION_RULE.findall((ROOT / "spec" / "KIP848.md").read_text()))
    assert len(rules) == 7
    tags = set()
    for path in [*(ROOT / "model" / "consumer_group").glob("*.py"), *(ROOT / "checker").glob("migration_*.py")]:
        tags |= set(MIGRATION_TAG.findall(path.read_text()))
    tested = {r for r in marked_rules() if r.startswith("M")}
    assert sorted(rules - tags) == [], "rules implemented nowhere"
    assert sorted(rules - tested) == [], "rules no test is marked for"
    assert sorted(tested - rules) == [], "tests marked for no rule"
    assert sorted(tags - rules) == [], "tags citing no rule"
