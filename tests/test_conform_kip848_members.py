"""``rebalance conform --side members`` on KIP-848 traces: each client's ConsumerGroupHeartbeats
and OffsetCommits held to the model's client (model/consumer_group/membership.py), replayed
against the responses it received (checker/conform/consumer_members.py). Recorded traces of
the Java consumer 4.4.0 and librdkafka 2.16 on Kafka 4.4.0 (tests/kafka_traces/) conform; each
member-side rule (K11-K15) is seen to fail on a request edited in a trace, and K13 under the
model mutation ``same-assignment-not-acknowledged``."""
import json
from pathlib import Path

import pytest

from rebalance.checker.conform import members
from rebalance.checker.conform.trace import read

TRACES = Path(__file__).parent / "kafka_traces"
RACING = TRACES / "kip848_commit_racing_an_epoch_bump_java.jsonl"  # Java consumer, Kafka 4.4.0


@pytest.mark.parametrize("name", ["kip848_commit_racing_an_epoch_bump_java", "kip848_lifecycle_librdkafka",
                                  "kip848_describe_librdkafka", "kip848_migration_java",
                                  # a fresh broker answers the first heartbeats COORDINATOR_LOAD_IN_PROGRESS (its
                                  # __consumer_offsets partition loading, CoordinatorRuntime): the broker's answers,
                                  # not the coordinator's, passed over as the coordinator side does (it was
                                  # 'incomplete: error COORDINATOR_LOAD_IN_PROGRESS is outside the model')
                                  "kip848_coordinator_loading_java"])
def test_recorded_clients_conform(name):
    v = members.check(read(TRACES / f"{name}.jsonl"))
    assert v.status == "conforms", v.divergence
    assert {"K12", "K13", "K14"} <= v.rules and v.figures["kip848_clients"] >= 2
    if name == "kip848_migration_java":  # the online migration: its classic members held to model/member.py
        assert v.figures["clients"] == 4 and "R13" in v.rules


def test_java_commits_while_fenced_at_no_epoch():
    """Finding K-F4 (docs/client-findings-on-kafka.md): fenced after its pause, the Java consumer
    auto-commits the partitions it lost at epoch -1 before it rejoins; the model's client does
    not commit outside the group. The one departure of the Java consumer's lifecycle."""
    v = members.check(read(TRACES / "kip848_lifecycle_java.jsonl"))
    assert [(d.line, d.rule) for d in v.divergences] == [(237, "K11")]
    assert v.divergence.record["body"]["generation_id"] == -1


def _edited(tmp_path, line: int, edit) -> Path:
    """RACING with ``edit(body)`` applied to the record at ``line`` (None: the record dropped)."""
    out = []
    for n, text in enumerate(RACING.read_text().splitlines(), 1):
        if n == line:
            if edit is None:
                continue
            rec = json.loads(text)
            edit(rec["body"])
            text = json.dumps(rec)
        out.append(text)
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def _partitions(*ps):
    return [{"topic_id": "0d59fb88-b24b-4005-9359-3b907a11a6e7", "topic": "life-java", "partitions": list(ps)}]


EDITS = [
    # (what, line edited, edit, line of the divergence, rule)
    ("a heartbeat at an epoch it was never given", 19, lambda b: b.update(member_epoch=4), 19, "K12"),
    ("a heartbeat resending an unchanged subscription alone", 19,
     lambda b: b.update(subscribed_topic_names=["life-java"]), 19, "K12"),
    ("an acknowledgement still owning a partition it must revoke first", 17,
     lambda b: b.update(topic_partitions=_partitions(0, 1, 2, 3)), 17, "K13"),
    ("a dynamic member leaving as a static one (-2)", 396, lambda b: b.update(member_epoch=-2), 396, "K14"),
    ("a rejoin at epoch 0 without being fenced", 19, lambda b: b.update(member_epoch=0), 19, "K14"),
    ("a heartbeat after a lost response that is not full", 13, None, 16, "K15"),  # 17 before the drop
    ("a commit at an epoch ahead of the member's", 23, lambda b: b.update(generation_id=4), 23, "K11"),
    ("a commit of a partition another member owns", 23,
     lambda b: b["topics"][0]["partitions"].append({"partition": 4, "offset": 0, "metadata": ""}), 23, "K11"),
]


@pytest.mark.parametrize("what,line,edit,diverges,rule", EDITS, ids=[e[0] for e in EDITS])
def test_an_edited_request_diverges_at_its_rule(tmp_path, what, line, edit, diverges, rule):
    v = members.check(read(_edited(tmp_path, line, edit)))
    assert v.status == "divergent"
    assert (v.divergence.line, v.divergence.rule, v.divergence.side) == (diverges, rule, "members"), v.divergence


def test_a_client_mutation_is_caught():
    """K13: a client that does not reconcile an assignment equal to what it owns (KAFKA-16185,
    KAFKA-16312) never acknowledges its empty first assignment: the Java consumer did."""
    v = members.check(read(RACING), {"mutations": frozenset({"same-assignment-not-acknowledged"})})
    assert (v.divergence.line, v.divergence.rule) == (10, "K13")


@pytest.mark.parametrize("reported,javas", [([], 1), ([3, 4, 5], 0), ([3], None)])
def test_a_report_before_reconciling_is_judged_by_either_rule(tmp_path, reported, javas):
    """K12 and finding K-F1: B, given t-3..5 (line 20), sends a full heartbeat before it has
    reconciled them (inserted after line 20). Reporting its current assignment (nothing) is the
    Java consumer's rule, counted in ``reports_current_assignment``; reporting what it may still
    add (t-3..5) is the model's; anything else is neither."""
    lines = RACING.read_text().splitlines()
    request, response = json.loads(lines[20]), json.loads(lines[19])
    request["correlation_id"] = response["correlation_id"] = 1000
    request["t_ms"] = response["t_ms"] = response["t_ms"] + 1
    request["body"].update(rebalance_timeout_ms=300000, subscribed_topic_names=["life-java"],
                           topic_partitions=_partitions(*reported))
    response["body"]["assignment"] = None
    lines[20:20] = [json.dumps(request), json.dumps(response)]
    path = tmp_path / "inserted.jsonl"
    path.write_text("\n".join(lines) + "\n")
    v = members.check(read(path))
    if javas is None:
        assert (v.divergence.line, v.divergence.rule) == (21, "K13"), v.divergence
    else:
        assert v.status == "conforms" and v.figures["reports_current_assignment"] == javas, v.divergence
