"""``rebalance conform``'s member side on Kafka Streams (issue 40): a scale-up of Kafka
Streams 4.4.0 from one instance to two on the real Kafka 4.4.0 broker, recorded through
``rebalance proxy`` by tests/catalogue/streams.py and kept in tests/kafka_traces/ (where
tests/test_conform_kafka_traces.py holds its coordinator side). Its members conform as
cooperative consumers (Streams' assignor ``stream`` is cooperative only) whose followup
rebalances the AssignmentInfo asks for (the probing rebalance, and "rejoin at once" for
withheld tasks); read without them, the leader's probing JoinGroup is one no state of the
model's member could send."""
from pathlib import Path

from rebalance.checker.conform import members
from rebalance.checker.conform.trace import read

TRACE = Path(__file__).parent / "kafka_traces" / "streams_scale_up.jsonl"


def check():
    return members.check(read(TRACE))


def test_the_streams_scale_up_conforms_on_the_member_side():
    verdict = check()
    assert verdict.status == "conforms", verdict.divergence


def test_without_the_followup_rebalances_the_probing_rejoin_diverges(monkeypatch):
    monkeypatch.setattr(members, "_followup", lambda assignment: 0)
    verdict = check()
    assert verdict.status == "divergent"
    assert verdict.divergence.rule == "R18" and verdict.divergence.record["api"] == "JoinGroup"


def test_read_as_eager_the_first_rejoin_diverges(monkeypatch):
    """Streams' members keep their tasks when they rejoin (cooperative); judged by the
    eager rules (R14: revoke everything first) they diverge."""
    monkeypatch.setattr(members, "COOPERATIVE_PROTOCOLS", frozenset({"cooperative-sticky"}))
    verdict = check()
    assert verdict.status == "divergent" and verdict.divergence.rule == "R14"
