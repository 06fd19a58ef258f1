"""``rebalance conform`` on traces recorded from the real Apache Kafka 4.4.0 broker
through ``rebalance proxy`` by the scenario catalogue (tests/catalogue), kept in
tests/kafka_traces/ so that the coordinator side is held to Kafka in the default suite,
without Java. Each model fix made because of a scenario is pinned here: its trace
conforms, and the mutation that restores the model's old rule diverges on it."""
import json
from pathlib import Path

import pytest

from rebalance.checker.conform import coordinator
from rebalance.checker.conform.trace import read

TRACES = Path(__file__).parent / "kafka_traces"


def check(path: Path, *mutations):
    return coordinator.check(read(path), coordinator.Options(mutations=frozenset(mutations)))


# kept for another verdict, pinned by its own test
HEADER_WITHOUT_THE_TOPIC = TRACES / "kip848_header_without_the_topic_java.jsonl"


@pytest.mark.parametrize("path", sorted(set(TRACES.glob("*.jsonl")) - {HEADER_WITHOUT_THE_TOPIC}),
                         ids=lambda p: p.stem)
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


# (scenario trace, the mutation restoring the model's rule before issue 38, the rule conform then names)
FIXES = [
    # group.initial.rebalance.delay.ms 0: static B and A (no MEMBER_ID_REQUIRED) joining before the delay's
    # timer fires are both in generation 1
    ("static_restart_of_the_leader_joingroup_v5", "initial-rebalance-completes-when-all-joined", "R25"),
    # the delay (3 s) runs again because B and C joined during it: generation 1 completes after 6 s
    ("initial_delay_extended_by_late_joiners", "initial-delay-runs-once", "R30"),
    # librdkafka's JoinGroup v5: the restarted static leader is named a follower (the previous leader's id)
    ("static_restart_of_the_leader_joingroup_v5", "static-leader-told-it-leads-before-v9", "R25"),
    ("static_replacement_joingroup_v5", "static-leader-told-it-leads-before-v9", "R25"),
    # a JoinGroup under a member.id the coordinator expired: UNKNOWN_MEMBER_ID echoes that member.id
    ("fenced_commit_and_a_stale_rejoin", "unknown-member-id-not-echoed", "R2"),
    # KIP-848, the Java consumer: C's OffsetCommit at epoch 6 reached the coordinator after its heartbeat had moved
    # C to epoch 7; Kafka 4.4.0 accepted it for t-4, t-5, which C held since before (KIP-1251)
    ("kip848_commit_racing_an_epoch_bump_java", "commit-at-member-epoch-only", "K11"),
    # KIP-848's online migration, the Java consumer (tests/test_migration_online.py): B's JoinGroup in the upgraded
    # group is answered naming its first protocol, cooperative-sticky (GroupMetadataManager.java:2902)
    ("kip848_migration_java", "classic-join-names-no-protocol", "M3"),
    # the same with librdkafka's cooperative-sticky, whose assignments carry user data: Kafka refuses the upgrade,
    # GROUP_ID_NOT_FOUND (ConsumerGroup.java:1240)
    ("kip848_migration_refused_librdkafka", "upgrade-drops-user-data", "M1"),
    # KIP-848's raw conversation (tests/test_interop_kip848.py): A, revoking t-2 and t-3, is described holding all
    # four, those pending revocation included (ConsumerGroupMember.java:487-488)
    ("kip848_conversation", "describe-omits-pending-revocation", "K17"),
]


@pytest.mark.parametrize("trace,mutation,rule", FIXES, ids=[f"{t}-{m}" for t, m, _ in FIXES])
def test_each_fix_is_what_makes_kafkas_trace_conform(trace, mutation, rule):
    verdict = check(TRACES / f"{trace}.jsonl", mutation)
    assert verdict.status == "divergent" and verdict.divergence.rule == rule, verdict.divergence


def test_a_header_without_the_clients_topic_is_incomplete_not_divergent(tmp_path, monkeypatch):
    """The Java consumer's KIP-848 lifecycle on a fresh Kafka 4.4.0 (benchmarks/kip848_runs.py, run 5 of
    14:04 UTC): the proxy read the broker's topics before the topic created just before showed in its
    Metadata (KafkaApis forwards CreateTopics to the controller; the broker's cache follows), so the
    header lists none, and the coordinator side diverged at the first assignment (K5, line 6; then
    K11 and K2, 202 records: the signature of the run of the earlier stop that kept no trace). Kafka
    and the model agree: with the topic in the header the trace conforms. conform now says
    incomplete, naming the line and the topic, and the member side no longer raises on it."""
    from rebalance.checker.conform import members

    trace = read(HEADER_WITHOUT_THE_TOPIC)
    assert trace.settings["topics"] == []
    verdict = coordinator.check(trace)
    assert verdict.status == "incomplete" and verdict.uninterpreted[0].startswith("line 6: "), verdict
    assert "'lifecycle-java'" in verdict.uninterpreted[0]
    assert members.check(trace).status == "incomplete"
    monkeypatch.setattr(coordinator._Side, "unlisted", lambda self, api, body: [])  # judged against the header
    verdict = coordinator.check(trace)
    assert verdict.status == "divergent" and (verdict.divergence.line, verdict.divergence.rule) == (6, "K5")
    monkeypatch.undo()
    lines = HEADER_WITHOUT_THE_TOPIC.read_text().splitlines()
    header = json.loads(lines[0])
    header["settings"]["topics"] = [{"name": "lifecycle-java", "partitions": 6}]  # what the broker had
    listed = tmp_path / "listed.jsonl"
    listed.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    assert coordinator.check(read(listed)).status == "conforms"
    # the member side then diverges only where the Java consumer commits at generation -1 (K-F4)
    assert [(d.line, d.rule) for d in members.check(read(listed)).divergences] == [(249, "K11")]


def test_an_offset_commit_accepted_for_a_topic_the_header_does_not_list_is_incomplete():
    """The same rule at an OffsetCommit: Kafka's commit race trace (the Java consumer, proxied)
    with its first accepted commit's topic renamed to one the header does not list is
    incomplete there, naming that topic; as recorded it conforms (test_kafka_traces_conform)."""
    from rebalance.checker.conform.trace import parse

    records = [json.loads(line) for line in (TRACES / "kip848_commit_racing_an_epoch_bump_java.jsonl").read_text()
               .splitlines()]
    n = next(i for i, r in enumerate(records) if r.get("api") == "OffsetCommit" and r["type"] == "response"
             and any(p["error"] == "NONE" for t in r["body"]["topics"] for p in t["partitions"]))
    records[n]["body"]["topics"][0]["name"] = "ghost"
    verdict = coordinator.check(parse([json.dumps(r) + "\n" for r in records]))
    assert verdict.status == "incomplete", verdict
    assert verdict.uninterpreted[0].startswith(f"line {n + 1}: ") and "'ghost'" in verdict.uninterpreted[0]


def test_after_a_proxied_restart_sessions_start_when_the_coordinator_loads(monkeypatch):
    """Scenario broker_restart on Kafka: the broker took 23 s to come back, the clients'
    own sessions expired meanwhile and they joined as new members, so the round waited
    for the loaded members' sessions (10 s) to expire, counted from the load, not from
    the kill the restart record marks (GroupMetadataManager.onLoaded)."""
    path = TRACES / "broker_restart_clients_rejoin_as_new_members.jsonl"
    assert check(path).status == "conforms"
    restart = coordinator._Group.restart

    def at_the_kill(self, t, loaded):
        restart(self, t, loaded)
        for c in self.frontier:  # the sessions restarted when the restart was recorded
            c.loading = False
            self._rearm(c, None, coordinator.NO_MEMBER_ID, t)
    monkeypatch.setattr(coordinator._Group, "restart", at_the_kill)
    assert check(path).status == "divergent"


def test_a_new_leader_is_any_member_that_rejoined(monkeypatch):
    """Scenario rebalance_timeout (Java consumer, range) on Kafka: the leader B stalled,
    C joined before A rejoined, and Kafka made A the leader: the first rejoined member in
    ClassicGroup's HashMap (maybeElectNewJoinedLeader), not the first to rejoin, which is
    the model's pick; conform searches every rejoined member as the model's first."""
    path = TRACES / "rebalance_timeout_elects_a_leader_by_hashmap_order.jsonl"
    assert check(path).status == "conforms"
    monkeypatch.setattr(coordinator._Group, "_elections", lambda self, c: iter(()))
    verdict = check(path)
    assert verdict.status == "divergent" and verdict.divergence.rule == "R5", verdict.divergence


# (mutation, the line of kip848_migration_java.jsonl where conform catches it, its rule)
MIGRATION_MUTATIONS = [
    ("upgrade-drops-assignment", 78, "K5"),  # C's join is given B's partitions, which B still owns
    ("classic-member-not-told-to-rejoin", 82, "M5"),  # B, a classic member, is not told to revoke for C
    ("downgrade-restarts-generation", 247, "R10"),  # E's generation is the consumer group's epoch after D left
]


@pytest.mark.parametrize("mutation,line,rule", MIGRATION_MUTATIONS, ids=[m for m, _, _ in MIGRATION_MUTATIONS])
def test_the_migration_judge_catches_the_migrations_mutations(mutation, line, rule):
    """Kafka's trace of an upgrade and a downgrade, judged by the migration model's handlers
    (checker/conform/migration_coordinator.py), conforms; each mutation of the migration
    diverges on it where its rule first shows."""
    verdict = check(TRACES / "kip848_migration_java.jsonl", mutation)
    assert verdict.status == "divergent" and (verdict.divergence.line, verdict.divergence.rule) == (line, rule), \
        verdict.divergence
