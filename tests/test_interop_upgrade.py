"""The upgrade from eager to cooperative rebalancing by rolling bounce on the wire
(issue 21 item 5; spec R77-R80): librdkafka consumers (confluent-kafka) against
``rebalance serve``, partition.assignment.strategy changed between restarts.

librdkafka cannot take the documented middle step: it refuses
[cooperative-sticky, range] at creation ("All partition.assignment.strategy
assignors must have the same protocol type, online migration between assignors
with different protocol types is not supported", rdkafka_assignor.c), as does
kafka-python (its CooperativeStickyAssignor supports COOPERATIVE only), while the
Java consumer's CooperativeStickyAssignor supports both protocols. So the only
bounce a librdkafka group can make is the one Kafka warns against, range ->
cooperative-sticky: the model's ``one-bounce-upgrade`` mutation. The model predicts
what the coordinator does with it (R80): each bounced member is refused with
INCONSISTENT_GROUP_PROTOCOL while any range member remains, and consumes nothing
meanwhile; ownership never breaks. Run with ``pytest -m interop``."""
import json

import pytest
from confluent_kafka import Consumer, KafkaException

from interop.harness import Group, Server, conform, wait_for
from test_interop import PARTITIONS, TOPIC, server  # noqa: F401 - the server fixture

pytestmark = pytest.mark.interop


def _join_responses(server: Server) -> list:
    """``(error, protocol_name)`` of every JoinGroup response in the trace, in order."""
    records = [json.loads(line) for line in server.trace.read_text().splitlines()]
    return [(r["body"]["error"], r["body"]["protocol_name"]) for r in records
            if r["type"] == "response" and r["api"] == "JoinGroup"]


def _refusals(server: Server) -> int:
    return sum(error == "INCONSISTENT_GROUP_PROTOCOL" for error, _ in _join_responses(server))


def test_librdkafka_refuses_the_middle_step_of_the_two_bounce_upgrade():
    with pytest.raises(KafkaException, match="online migration between assignors"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                  "partition.assignment.strategy": "cooperative-sticky,range"})


def test_rolling_bounce_from_range_to_cooperative_sticky(server):
    group = Group(server, "g", TOPIC, PARTITIONS)
    try:
        for name in "ABC":
            group.start("confluent", name, strategy="range", session_ms=1000)
        group.wait_balanced()
        assert {protocol for error, protocol in _join_responses(server) if error == "NONE"} == {"range"}
        refused = _refusals(server)
        for i, name in enumerate("ABC"):
            group.close(name)  # graceful: LeaveGroup
            group.start("confluent", name, strategy="cooperative-sticky", session_ms=1000)
            rest = "ABC"[i + 1:]
            if rest:  # range members remain: the bounced member is refused and the rest own everything
                wait_for(lambda: _refusals(server) > refused, 30, f"{name}'s JoinGroup to be refused")
                refused = _refusals(server)
                wait_for(lambda: group.balanced_among(list(rest)), 30, f"{rest} to own every partition")
                assert not group.owned().get(name)
        owned = group.wait_balanced(timeout=90)
        assert sorted(len(owned[m]) for m in "ABC") == [2, 2, 2]
        # no partition owned by two consumers at any observed moment, and the group ends cooperative
        assert group.double_ownership() == []
        last = [protocol for error, protocol in _join_responses(server) if error == "NONE"][-1]
        assert last == "cooperative-sticky"
        assert _refusals(server) >= 2  # A and B, each while a range member remained
    finally:
        group.stop_all()
    assert server.alive()
    code, verdict = conform("clients", group.observed)  # the observed log, held to the model
    assert (code, verdict["verdict"]) == (0, "conforms"), verdict
