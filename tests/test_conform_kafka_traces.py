"""``rebalance conform`` on traces recorded from the real Apache Kafka 4.4.0 broker
through ``rebalance proxy`` by the scenario catalogue (tests/catalogue), kept in
tests/kafka_traces/ so that the coordinator side is held to Kafka in the default suite,
without Java."""
import json
from pathlib import Path

import pytest

from rebalance.checker.conform import coordinator
from rebalance.checker.conform.trace import read

TRACES = Path(__file__).parent / "kafka_traces"


def check(path: Path):
    return coordinator.check(read(path))


@pytest.mark.parametrize("path", sorted(TRACES.glob("*.jsonl")), ids=lambda p: p.stem)
def test_kafka_traces_conform(path):
    verdict = check(path)
    assert verdict.status == "conforms", verdict.divergence


def test_broker_answers_before_the_coordinator_are_not_judged(monkeypatch):
    """The first JoinGroups of a fresh broker are answered NOT_COORDINATOR and
    COORDINATOR_LOAD_IN_PROGRESS by CoordinatorRuntime (its __consumer_offsets partition
    not yet loaded), never by the group's handler: judged as the coordinator's, they
    diverge."""
    path = TRACES / "join_leave_while_the_coordinator_loads.jsonl"
    errors = {json.loads(line)["body"].get("error") for line in path.read_text().splitlines()[1:]
              if json.loads(line)["type"] == "response"}
    assert {"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"} <= errors
    monkeypatch.setattr(coordinator, "BROKER_ERRORS", frozenset())
    assert check(path).status == "divergent"
