"""Kafka's historical rebalance bugs (checker/history.py HISTORY): the docs' table is
the one ``table()`` renders, and every row is true: its command finds a
counterexample to the property named, of the length recorded, while the correct
model passes the same configuration (or, for a row that finds nothing, holds)."""
from pathlib import Path

import pytest

from rebalance.checker.history import HISTORY, SLOW, table

PAGE = Path(__file__).resolve().parent.parent / "docs" / "explanation" / "history.md"


def test_the_docs_table_is_generated_from_history():
    assert table() in PAGE.read_text()


def _row(bug):
    # tests/test_mutations.py runs the slow configurations too, in the default suite
    return pytest.param(bug, id=bug.jira, marks=[pytest.mark.slow] if bug.args in SLOW else [])


@pytest.mark.parametrize("bug", [_row(b) for b in HISTORY])
def test_each_historical_bug_is_found_and_the_correct_model_passes(rebalance_check, bug):
    code, s = rebalance_check(*bug.args, *[x for m in bug.mutations for x in ("--mutation", m)], "--continue")
    found = {c["property"]: c["length"] for c in s["counterexamples"]}
    if bug.property:
        assert code == 1 and found[bug.property] == bug.length
    else:
        assert code == 0 and s["verdict"] == "holds"
    code, s = rebalance_check(*bug.args)
    assert code == 0 and s["verdict"] == "holds"
