"""Where real clients depart from the model (docs/explanation/findings.md), kept as the traces
``rebalance serve --trace`` recorded in tests/test_interop_faults.py's pause run
(a member stopped with SIGSTOP past its session timeout, then resumed; a rare race,
in a loop of that pause), or ``rebalance
proxy`` in front of Kafka 4.4.0 in the catalogue's session_timeout (tests/catalogue),
cut after the departure's request: the coordinator's responses conform, and conform's
member side names the client's departure and its rule, every time. A departure that
makes two members process one partition at once shows on the clients side too: its
observed log is kept beside the trace (``NAME.observed.jsonl``)."""
import json
import subprocess
from pathlib import Path

import pytest

from conftest import REBALANCE

FINDINGS = Path(__file__).parent / "findings"

CONTESTED = "kafka-python-3.0.12-assigns-contested-partition"

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
    # kafka-python 3.0.12, the leader of the round after a stale claim (the first departure above): C claims
    # t-5, which it lost, and B claims it, which it owns, both at generation -1 (subscription v1). Kafka 4.4.0
    # drops claims tied in one generation from both (AbstractStickyAssignor.allSubscriptionsEqual,
    # AbstractStickyAssignor.java:173-181), counts the partition as changing owner (ConstrainedAssignmentBuilder
    # .assignNewPartition, :833-835) and withholds it for a round (CooperativeStickyAssignor.assignPartitions,
    # CooperativeStickyAssignor.java:125 adjustAssignment); the model does the same (R22, R23). kafka-python's
    # CooperativeStickyAssignor.assign maps each partition to its last claimant in the JoinGroup's member order
    # (cooperative_sticky.py:136-139) and hands a partition at once to a member that is its "current owner"
    # (:157-161): C is given t-5 in the round B revokes it, and C's on_partitions_assigned may run before B's
    # on_partitions_revoked returns (observed log line 10: both own t-5 for 1 ms). Kafka lists members in its
    # HashMap's order (ClassicGroup.currentClassicGroupMembers, ClassicGroup.java:1318), so it happens when C
    # comes after the other claimant: in 4 of 9 catalogue runs (17:31-17:38 UTC), the overlap visible in 2 (R23)
    CONTESTED: (
        "R23", "SyncGroup", lambda b: any(a["assignment"]["assigned_partitions"] for a in b["assignments"])),
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
    # kafka-python 3.0.12, a joiner that is not the leader (test_interop_faults' scale-up run, CI on 2026-11-29):
    # a JoinGroup under its member.id 4 ms after the SyncGroup that gave it nothing, claiming nothing at
    # generation -1, nothing having asked it to rejoin: the rows above seen through R18, since the model's
    # member given an empty assignment is already stable (seen in 1 CI run of 6)
    "kafka-python-3.0.12-rejoins-before-installing-empty-assignment": (
        "R18", "JoinGroup", lambda b: b["member_id"] != ""
        and all(not p["metadata"]["owned_partitions"] and p["metadata"]["generation"] == -1
                for p in b["protocols"])),
    # Kafka 4.4.0's Java consumer, on resume: its heartbeat thread checks the member state, then polls the
    # network (AbstractCoordinator.HeartbeatThread.run, AbstractCoordinator.java:1505, :1510), which may complete
    # the zombie commit's UNKNOWN_MEMBER_ID (ConsumerCoordinator.OffsetCommitResponseHandler: resetStateOnResponseError,
    # ConsumerCoordinator.java:1451: member.id and generation reset), and sends the overdue Heartbeat (:1539)
    # without checking the state again: empty member.id,
    # generation -1, 13 ms after the commit's UNKNOWN_MEMBER_ID (R10). A race: seen in 1 CI run of the pause
    # (2026-11-28), none of 32 pauses in 16 runs of both Java variants here, and in 1 of 22 pauses of three Java
    # consumers against serve, A paused past its 6 s session and resumed with a commit queued (kept here)
    "java-4.4.0-heartbeat-without-member-id": (
        "R10", "Heartbeat", lambda b: b["member_id"] == "" and b["generation_id"] == -1),
    # aiokafka 0.14.0, on resume, the same race as the Java consumer's: its heartbeat routine checks the member.id
    # once per turn, before it sleeps (aiokafka/consumer/group_coordinator.py:762, _heartbeat_routine), while the
    # zombie commit's UNKNOWN_MEMBER_ID resets member.id and generation (:1117, reset_generation), and the turn's
    # Heartbeat goes out with them (:800, _do_heartbeat): empty member.id, generation -1, 1.3 ms after the commit's
    # answer (R10). Seen in 1 CI run of test_scale_up_pause_and_kill_mid_rebalance[aiokafka] (2026-11-29), not in
    # the runs before it (kept here)
    "aiokafka-0.14-heartbeat-without-member-id": (
        "R10", "Heartbeat", lambda b: b["member_id"] == "" and b["generation_id"] == -1),
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
                            "kafka-python-3.0.12-leader-rejoins-before-installing-assignment",
                            "kafka-python-3.0.12-rejoins-before-installing-empty-assignment", CONTESTED),
           "aiokafka": ("aiokafka-0.14-commits-without-member-id", "aiokafka-0.14-heartbeat-without-member-id"),
           "java": ("java-4.4.0-heartbeat-without-member-id",)}


# The recorded departures that also make two members process one partition at once (the clients side)
OVERLAPS = {"kafka-python": (CONTESTED,)}


def departs_as(name: str, divergence: dict) -> bool:
    """Whether a member-side divergence (conform's JSON ``divergence``) is the recorded
    departure ``name``: the same rule and API, and a request that shows what it names."""
    rule, api, shows = EXPECTED[name]
    return (divergence["side"], divergence["rule"], divergence["record"]["api"]) == ("members", rule, api) \
        and shows(divergence["record"]["body"])


def departs_as_recorded(client: str, divergence: dict) -> bool:
    """Whether a member-side divergence is one of ``client``'s recorded departures."""
    return any(departs_as(name, divergence) for name in DEPARTS.get(client, ()))


def overlap_as_recorded(client: str, overlap: dict, divergences) -> str | None:
    """The recorded departure of ``client`` that explains the clients side's ``overlap``
    (conform's exclusive_processing divergence on the observed log), or None: one of the
    member side's ``divergences`` (conform's JSON) is that departure at the leader's
    SyncGroup, giving a partition of the ``assigned`` record that opens the overlap to a
    member while two members claimed it (R23)."""
    if overlap["rule"] != "exclusive_processing" or overlap["record"].get("event") != "assigned":
        return None
    given = [f"cooperative: {p['topic']}-{p['partition']} assigned to " for p in overlap["record"]["partitions"]]
    return next((name for name in OVERLAPS.get(client, ()) for d in divergences
                 if departs_as(name, d) and any(g in d["reason"] for g in given)), None)


def conform(side: str, path: Path, tmp_path) -> tuple:
    run = subprocess.run([str(REBALANCE), "conform", "--side", side, str(path), "--json", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    return run.returncode, json.loads(run.stdout)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_conform_names_each_clients_departure(name, tmp_path):
    path = FINDINGS / f"{name}.jsonl"
    code, doc = conform("coordinator", path, tmp_path)
    assert (code, doc["verdict"]) == (0, "conforms"), doc  # serve is the model, Kafka conforms here
    rule, api, shows = EXPECTED[name]
    code, doc = conform("both", path, tmp_path)
    d = doc["divergences"][-1]  # the departure's; one before it is another recorded departure (DEPARTS)
    client = next(c for c, names in DEPARTS.items() if name in names)
    assert all(departs_as_recorded(client, x) for x in doc["divergences"]), doc["divergences"]
    assert code == 1 and d["side"] == "members" and d["rule"] == rule, doc
    last = len(path.read_text().splitlines())
    assert d["record"]["api"] == api and d["line"] >= last - 1 and shows(d["record"]["body"])


def test_the_contested_partition_is_processed_twice_and_named(tmp_path):
    """kafka-python's contested assignment, on the clients side: conform finds B and C
    both owning t-5 (B revoking it 1 ms after C's on_partitions_assigned), and the
    member side's R23 at B's SyncGroup is the recorded departure that explains it; an
    overlap of another partition is not explained by it."""
    code, doc = conform("clients", FINDINGS / f"{CONTESTED}.observed.jsonl", tmp_path)
    overlap = doc["divergence"]
    assert (code, overlap["rule"], overlap["line"]) == (1, "exclusive_processing", 10), doc
    assert "-5 owned by both B and C" in overlap["reason"]
    _, members = conform("members", FINDINGS / f"{CONTESTED}.jsonl", tmp_path)
    assert overlap_as_recorded("kafka-python", overlap, members["divergences"]) == CONTESTED
    assert overlap_as_recorded("confluent", overlap, members["divergences"]) is None
    elsewhere = {**overlap, "record": {**overlap["record"], "partitions": [{**overlap["record"]["partitions"][0],
                                                                            "partition": 3}]}}
    assert overlap_as_recorded("kafka-python", elsewhere, members["divergences"]) is None


def test_kafka_pythons_assignor_gives_a_contested_partition_to_its_last_claimant():
    """The departure is kafka-python's own CooperativeStickyAssignor.assign, run here on
    the claims of the kept trace's round (A: t-0, t-2, t-3; B: t-1, t-4, t-5; C: the lost
    t-2, t-5; subscription v1, so every claim at generation -1): with C listed after B,
    C is given t-5, which B still owns; listed first, C's claims are overridden and
    nothing contested is given. The model and Kafka's assignor give t-5 to nobody (R23)."""
    pytest.importorskip("kafka")
    from types import SimpleNamespace

    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    class Topic:  # the leader's metadata: the one topic of six partitions
        def topics(self):
            return {"t"}

        def partitions_for_topic(self, topic):
            return set(range(6))

    claims = {"A": [0, 2, 3], "B": [1, 4, 5], "C": [2, 5]}

    def assign(order):
        members = [SimpleNamespace(member_id=m, group_instance_id=None, metadata=ConsumerProtocolSubscription(
            version=1, topics=["t"], user_data=b"", owned_partitions=[
                ConsumerProtocolSubscription.TopicPartition(topic="t", partitions=claims[m])])) for m in order]
        return {m: sorted(p for _, ps in a.assigned_partitions for p in ps)
                for m, a in CooperativeStickyAssignor().assign(Topic(), members).items()}

    assert assign("ABC") == {"A": [0], "B": [1, 4], "C": [5]}  # the kept trace's round (its line 242)
    assert 5 not in assign("CAB")["C"] and 2 not in assign("CAB")["C"]
