"""``rebalance conform`` judges KIP-848's ConsumerGroupDescribe on the coordinator side: the
Admin API's describe of a consumer group (librdkafka's describe_consumer_groups, recorded by
the proxy in front of Kafka 4.4.0 in tests/test_interop_kip848.py's lifecycle, kept as
tests/kafka_traces/kip848_describe_librdkafka.jsonl) is held to the model's group: its state
and epochs, its members, each one's epoch, assignment and target. Each field edited in the
answer diverges at the rule deciding it."""
import json
from pathlib import Path

import pytest

from rebalance.checker.conform import coordinator
from rebalance.checker.conform.trace import parse

TRACE = Path(__file__).parent / "kafka_traces" / "kip848_describe_librdkafka.jsonl"
LINES = TRACE.read_text().splitlines()
FIRST = next(n for n, text in enumerate(LINES, 1)
             if '"api":"ConsumerGroupDescribe"' in text and '"type":"response"' in text)


def _judged(edit=None):
    """The trace (up to its first describe's answer, when edited) judged, ``edit`` applied to that answer."""
    lines = list(LINES)
    if edit is not None:
        lines = lines[:FIRST]
        rec = json.loads(lines[FIRST - 1])
        edit(rec["body"]["groups"][0])
        lines[FIRST - 1] = json.dumps(rec)
    return coordinator.check(parse([text + "\n" for text in lines]))


def test_kafkas_describes_are_the_models_group():
    v = _judged()
    assert v.status == "conforms" and v.figures["described"] == 2, v.divergence


def _swap(field: str):
    def edit(group):
        a, b = group["members"][:2]
        a[field], b[field] = b[field], a[field]
    return edit


def _bump(field: str, by: int = 1):
    def edit(group):
        group[field] += by
    return edit


EDITS = [
    ("state", lambda g: g.update(state="Reconciling"), "K1"),
    ("group_epoch", _bump("group_epoch"), "K1"),
    ("assignment_epoch", _bump("assignment_epoch", -1), "K4"),
    ("members", lambda g: g["members"].pop(), "K7"),
    ("member_epoch", lambda g: g["members"][0].update(member_epoch=g["members"][0]["member_epoch"] - 1), "K5"),
    ("assignment", _swap("assignment"), "K17"),
    ("target_assignment", _swap("target_assignment"), "K4"),
]


@pytest.mark.parametrize("field,edit,rule", EDITS, ids=[e[0] for e in EDITS])
def test_an_edited_describe_diverges_at_its_rule(field, edit, rule):
    v = _judged(edit)
    assert (v.divergence.line, v.divergence.rule) == (FIRST, rule), v.divergence
    assert f"differs in {field}" in v.divergence.reason
