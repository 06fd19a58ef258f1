"""Where real clients depart from the model (docs/explanation/findings.md), kept as the traces
``rebalance serve --trace`` recorded in tests/test_interop_faults.py's pause run
(a member stopped with SIGSTOP past its session timeout, then resumed), cut after
the first divergent request: serve's responses conform, and conform's member side
names the client's departure and its rule, every time."""
import json
import subprocess
from pathlib import Path

import pytest

from conftest import REBALANCE

FINDINGS = Path(__file__).parent / "findings"

# trace -> (rule, API of the divergent request, what that request shows)
EXPECTED = {
    # librdkafka 2.16.0 (confluent-kafka 2.16.1): on resume its own session timeout (SESSTMOUT,
    # rdkafka_cgrp.c) clears its member.id, and a Heartbeat still goes out with the empty id
    # and the old generation (R10: the model's member heartbeats with the id it was given)
    "librdkafka-2.16-heartbeat-without-member-id": (
        "R10", "Heartbeat", lambda b: b["member_id"] == "" and b["generation_id"] > 0),
    # kafka-python 3.0.12: on_partitions_lost fires, but CooperativeStickyAssignor.metadata()
    # builds owned_partitions from the assignor's own memory of its last assignment, so the
    # rejoin under a new member.id claims the lost partitions (R15; KAFKA-12983's pattern)
    "kafka-python-3.0.12-claims-lost-partitions": (
        "R15", "JoinGroup", lambda b: b["member_id"] == ""
        and any(p["metadata"]["owned_partitions"] for p in b["protocols"])),
    # kafka-python 3.0.12, the same memory read before it is updated: in the scale-up, the
    # follow-up JoinGroup goes out 2 ms after a SyncGroup revoking t-5, still claiming t-5,
    # and the revocation callback runs after it (R18: revoke, then rejoin; seen in 1 run of 6)
    "kafka-python-3.0.12-claims-revoked-partition": (
        "R18", "JoinGroup", lambda b: b["member_id"] != ""
        and any(p["metadata"]["owned_partitions"] for p in b["protocols"])),
    # kafka-python 3.0.12: a JoinGroup 3 ms after a SyncGroup that revoked nothing, claiming what
    # it owns: an extra rebalance round. The model's member rejoins after revoking (R18), after
    # REBALANCE_IN_PROGRESS (R19) or a lost membership (R15); an application asking for a
    # rebalance (KIP-568 enforceRebalance) is not modelled (seen in 1 run of 6)
    "kafka-python-3.0.12-rejoins-unprompted": (
        "R18", "JoinGroup", lambda b: b["member_id"] != ""
        and any(p["metadata"]["owned_partitions"] for p in b["protocols"])),
    # kafka-python 3.0.12, the leader of a first round: 11 ms after the SyncGroup that gave it t-0 and
    # t-3, a JoinGroup under its member.id claiming nothing at generation -1, the assignor's memory
    # read before on_assignment fills it (its observed log has on_partitions_assigned 10 ms after the
    # JoinGroup went out): the model's member installs an assignment before it rejoins (R13; seen in
    # 1 run of 3 of test_conform_members' real-client run with both cores busy, none of 3 idle)
    "kafka-python-3.0.12-rejoins-before-installing-assignment": (
        "R13", "JoinGroup", lambda b: b["member_id"] != ""
        and all(not p["metadata"]["owned_partitions"] and p["metadata"]["generation"] == -1
                for p in b["protocols"])),
    # aiokafka 0.14.0: after UNKNOWN_MEMBER_ID it commits with an empty member.id and generation
    # -1, which Kafka accepts as a simple consumer's commit whenever the group is Empty
    # (GroupCoordinator.handleCommitOffsets); the Java consumer fails such a commit locally
    # (ConsumerCoordinator.sendOffsetCommitRequest: CommitFailedException)
    # kafka-python 3.0.12, the leader of a cooperative round again (test_interop_faults' scale-up run, both cores
    # busy): a JoinGroup under its member.id 1 ms after the SyncGroup that gave it t-0 besides its t-1 and t-3,
    # claiming t-1 and t-3 only, nothing having asked it to rejoin; on_partitions_assigned for t-0 runs 392 ms
    # later (R13: the model's member installs an assignment before it rejoins; seen in 1 run of 13 under load)
    "kafka-python-3.0.12-leader-rejoins-before-installing-assignment": (
        "R13", "JoinGroup", lambda b: b["member_id"] != ""
        and any(p["metadata"]["owned_partitions"] for p in b["protocols"])),
    "aiokafka-0.14-commits-without-member-id": (
        "R41", "OffsetCommit", lambda b: b["member_id"] == "" and b["generation_id"] == -1),
}

# Which recorded departures each client may show in the interop runs (tests/test_interop_faults.py,
# tests/test_conform_members.py): a run that departs must depart as one of these
DEPARTS = {"confluent": ("librdkafka-2.16-heartbeat-without-member-id",),
           "kafka-python": ("kafka-python-3.0.12-claims-lost-partitions",
                            "kafka-python-3.0.12-claims-revoked-partition",
                            "kafka-python-3.0.12-rejoins-unprompted",
                            "kafka-python-3.0.12-rejoins-before-installing-assignment",
                            "kafka-python-3.0.12-leader-rejoins-before-installing-assignment"),
           "aiokafka": ("aiokafka-0.14-commits-without-member-id",)}


def departs_as_recorded(client: str, divergence: dict) -> bool:
    """Whether a member-side divergence (conform's JSON ``divergence``) is one of
    ``client``'s recorded departures: the same rule and API, and a request that
    shows what the finding names."""
    return any((divergence["side"], divergence["rule"], divergence["record"]["api"]) == ("members", rule, api)
               and shows(divergence["record"]["body"]) for rule, api, shows in map(EXPECTED.get, DEPARTS.get(client, ())))


def conform(side: str, path: Path, tmp_path) -> tuple:
    run = subprocess.run([str(REBALANCE), "conform", "--side", side, str(path), "--json", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    return run.returncode, json.loads(run.stdout)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_conform_names_each_clients_departure(name, tmp_path):
    path = FINDINGS / f"{name}.jsonl"
    code, doc = conform("coordinator", path, tmp_path)
    assert (code, doc["verdict"]) == (0, "conforms"), doc  # serve is the model: its side conforms
    rule, api, shows = EXPECTED[name]
    code, doc = conform("both", path, tmp_path)
    d = doc["divergence"]
    assert code == 1 and d["side"] == "members" and d["rule"] == rule, doc
    last = len(path.read_text().splitlines())
    assert d["record"]["api"] == api and d["line"] >= last - 1 and shows(d["record"]["body"])
