"""The admin APIs of ``rebalance serve`` on real sockets with a raw wire client:
ListGroups, DeleteGroups (R44: only an Empty group, the model's ``deletable``),
OffsetDelete, CreateTopics, DeleteTopics, auto-creation and DescribeConfigs."""
import json

import pytest

from interop.harness import Server, conform
from rebalance.impl.wire import Api
from test_serve import Client, server, stable_member  # noqa: F401 (the server fixture)


def list_groups(c, states=()):
    return [(g.group_id, g.group_state, g.protocol_type)
            for g in c.call(Api.LIST_GROUPS, 4, states_filter=list(states)).groups]


def delete_groups(c, *names):
    return [(r.group_id, r.error_code) for r in c.call(Api.DELETE_GROUPS, 2, groups_names=list(names)).results]


def commit(c, mid, generation, offset=5):
    r = c.call(Api.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation, member_id=mid,
               group_instance_id=None, topics=[{"name": "t", "partitions": [
                   {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                    "committed_metadata": None}]}])
    assert r.topics[0].partitions[0].error_code == 0


def committed(c) -> int:
    r = c.call(Api.OFFSET_FETCH, 7, group_id="g", topics=[{"name": "t", "partition_indexes": [0]}],
               require_stable=False)
    return r.topics[0].partitions[0].committed_offset


def leave(c, mid):
    r = c.call(Api.LEAVE_GROUP, 5, group_id="g", members=[{"member_id": mid, "group_instance_id": None,
                                                           "reason": None}])
    assert r.error_code == 0


@pytest.mark.spec("R44")
def test_delete_groups_deletes_only_an_empty_group_and_its_offsets(server):
    member, mid, generation = stable_member(server.port)
    admin = Client(server.port, "admin")
    commit(member, mid, generation)
    assert list_groups(admin) == [("g", "Stable", "consumer")]
    assert list_groups(admin, ["empty"]) == []
    assert delete_groups(admin, "g", "nope") == [("g", 68), ("nope", 69)]  # NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND
    assert member.call(Api.HEARTBEAT, 4, group_id="g", generation_id=generation, member_id=mid,
                       group_instance_id=None).error_code == 0  # the group lives on
    leave(member, mid)
    assert list_groups(admin, ["Empty"]) == [("g", "Empty", "")] and committed(admin) == 5
    assert delete_groups(admin, "g") == [("g", 0)]
    assert list_groups(admin) == [] and committed(admin) == -1
    assert delete_groups(admin, "g") == [("g", 69)]
    _, _, again = stable_member(server.port)
    assert again == 1  # a new group (R43, R44)
    # the DeleteGroups answers are in the trace, each held to R44
    assert [r["body"]["results"] for r in server.records("response") if r["api"] == "DeleteGroups"] == [
        [{"group_id": "g", "error": "NON_EMPTY_GROUP"}, {"group_id": "nope", "error": "GROUP_ID_NOT_FOUND"}],
        [{"group_id": "g", "error": "NONE"}], [{"group_id": "g", "error": "GROUP_ID_NOT_FOUND"}]]
    code, verdict = conform("coordinator", server.trace)
    assert (code, verdict["verdict"]) == (0, "conforms") and "R44" in verdict["rules"], verdict


def test_the_delete_non_empty_group_mutation_is_caught(tmp_path):
    """The deliberately wrong coordinator deletes a Stable group: what the test
    above refuses, and conform names R44 on its trace."""
    server = Server(tmp_path, "t:4", initial_delay_ms=0, mutations=("delete-non-empty-group",))
    try:
        stable_member(server.port)
        assert delete_groups(Client(server.port, "admin"), "g") == [("g", 0)]
    finally:
        server.stop()
    code, verdict = conform("coordinator", server.trace)
    assert code == 1 and verdict["divergence"]["rule"] == "R44", verdict


def test_offset_delete_refuses_subscribed_topics_until_the_group_is_empty(server):
    member, mid, generation = stable_member(server.port)
    admin = Client(server.port, "admin")
    commit(member, mid, generation)

    def offset_delete(group="g"):
        r = admin.call(Api.OFFSET_DELETE, 0, group_id=group, topics=[{"name": "t", "partitions": [
            {"partition_index": 0}]}])
        return r.error_code, [p.error_code for t in r.topics for p in t.partitions]
    # stable_member's metadata is not consumer protocol bytes: it subscribes to no topic Kafka can read
    assert offset_delete("nope") == (69, [])
    leave(member, mid)
    assert offset_delete() == (0, [0]) and committed(admin) == -1


def test_create_describe_and_delete_topics(server):
    admin = Client(server.port, "admin")

    def create(name, partitions=3, rf=1, validate_only=False, configs=()):
        r = admin.call(Api.CREATE_TOPICS, 7, topics=[{"name": name, "num_partitions": partitions,
                                                      "replication_factor": rf, "assignments": [], "configs": [
                                                          {"name": k, "value": v} for k, v in configs]}],
                       timeout=1000, validate_only=validate_only)
        return r.topics[0].error_code

    def topics():
        r = admin.call(Api.METADATA, 12, topics=None, allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)
        return sorted((t.name, len(t.partitions)) for t in r.topics)
    assert create("orders") == 0 and create("dry", validate_only=True) == 0 and create("one", partitions=-1) == 0
    assert topics() == [("one", 1), ("orders", 3), ("t", 4)]
    assert create("orders") == 36 and create("bad/name") == 17 and create("p0", partitions=0) == 37
    assert create("rf3", rf=3) == 38
    assert create("bad-retention", configs=[("retention.ms", "soon")]) == 40  # INVALID_CONFIG
    assert create("kept", configs=[("retention.bytes", "1000"), ("cleanup.policy", "delete")]) == 0
    r = admin.call(Api.DESCRIBE_CONFIGS, 4, resources=[
        {"resource_type": 2, "resource_name": "orders", "configuration_keys": ["retention.ms", "retention.bytes"]},
        {"resource_type": 2, "resource_name": "nope", "configuration_keys": None},
        {"resource_type": 2, "resource_name": "kept", "configuration_keys": ["retention.bytes"]}],
        include_synonyms=False, include_documentation=False)
    assert [(c.name, c.value) for c in r.results[0].configs] == [("retention.ms", "604800000"),
                                                                  ("retention.bytes", "-1")]  # Kafka's defaults
    assert r.results[1].error_code == 3
    assert [(c.name, c.value) for c in r.results[2].configs] == [("retention.bytes", "1000")]
    r = admin.call(Api.DELETE_TOPICS, 6, topics=[{"name": "orders", "topic_id": None},
                                                 {"name": "nope", "topic_id": None}], timeout=1000)
    assert [(x.name, x.error_code) for x in r.responses] == [("orders", 0), ("nope", 3)]
    assert topics() == [("kept", 3), ("one", 1), ("t", 4)]


def test_a_compacted_topic_keeps_its_cleanup_policy(server):
    """Kafka Connect creates its internal topics with cleanup.policy=compact and refuses
    to start on one that DescribeConfigs says is not (TopicAdmin.verifyTopicCleanupPolicyOnlyCompact)."""
    admin = Client(server.port, "admin")

    def create(name, policy):
        r = admin.call(Api.CREATE_TOPICS, 7, topics=[{"name": name, "num_partitions": 1, "replication_factor": -1,
                                                      "assignments": [], "configs": [
                                                          {"name": "cleanup.policy", "value": policy}]}],
                       timeout=1000, validate_only=False)
        return r.topics[0].error_code
    assert create("configs", "compact") == 0 and create("both", "compact,delete") == 0
    assert create("bad", "shred") == 40  # INVALID_CONFIG
    r = admin.call(Api.DESCRIBE_CONFIGS, 4, resources=[
        {"resource_type": 2, "resource_name": name, "configuration_keys": ["cleanup.policy"]}
        for name in ("configs", "both", "t")], include_synonyms=False, include_documentation=False)
    assert [[(c.name, c.value, c.config_source) for c in x.configs] for x in r.results] == [
        [("cleanup.policy", "compact", 1)], [("cleanup.policy", "compact,delete", 1)],
        [("cleanup.policy", "delete", 5)]]  # DYNAMIC_TOPIC_CONFIG, then Kafka's default


@pytest.mark.parametrize("flag,created", [((), False), (("--auto-create-topics",), True)])
def test_metadata_auto_creates_topics_only_when_told(tmp_path, flag, created):
    server = Server(tmp_path, "t:4", initial_delay_ms=0, args=flag)
    try:
        c = Client(server.port, "auto")
        r = c.call(Api.METADATA, 12, topics=[{"name": "fresh", "topic_id": None}], allow_auto_topic_creation=True,
                   include_topic_authorized_operations=False)
        assert (r.topics[0].error_code, len(r.topics[0].partitions)) == ((0, 1) if created else (3, 0))
    finally:
        server.stop()


def test_conform_follows_the_topics_created_and_deleted(server):
    """A `topics` trace record after CreateTopics and DeleteTopics: conform hosts the
    partitions serve hosts, so commits to a topic created at run time conform, and so
    does a commit refused after its topic is deleted."""
    member, mid, generation = stable_member(server.port)
    admin = Client(server.port, "admin")

    def commit_late():
        r = member.call(Api.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation, member_id=mid,
                        group_instance_id=None, topics=[{"name": "late", "partitions": [
                            {"partition_index": 1, "committed_offset": 3, "committed_leader_epoch": -1,
                             "committed_metadata": None}]}])
        return r.topics[0].partitions[0].error_code
    assert commit_late() == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert admin.call(Api.CREATE_TOPICS, 7, topics=[{"name": "late", "num_partitions": 2, "replication_factor": 1,
                                                     "assignments": [], "configs": []}], timeout=1000,
                      validate_only=False).topics[0].error_code == 0
    assert commit_late() == 0
    admin.call(Api.DELETE_TOPICS, 6, topics=[{"name": "late", "topic_id": None}], timeout=1000)
    assert commit_late() == 3
    server.stop()
    code, verdict = conform("coordinator", server.trace)
    assert (code, verdict["verdict"]) == (0, "conforms"), verdict
    blind = server.trace.with_name("blind.jsonl")  # a recorder that misses the topics records: caught
    blind.write_text("".join(line for line in server.trace.read_text().splitlines(True)
                             if json.loads(line)["type"] != "topics"))
    code, verdict = conform("coordinator", blind)
    assert (code, verdict["verdict"]) == (1, "divergent"), verdict


@pytest.mark.spec("R24")
def test_a_joingroup_under_a_member_id_never_handed_out_echoes_it(server):
    """As Kafka 4.4.0 (GroupMetadataManager.classicGroupJoinExistingMember; the catalogue's
    fenced_commit on the real broker): UNKNOWN_MEMBER_ID carries the member.id asked with."""
    stable_member(server.port)
    r = Client(server.port, "stale").join("g", "stale-1234")
    assert (r.error_code.value, r.member_id) == (25, "stale-1234")  # UNKNOWN_MEMBER_ID
    code, verdict = conform("coordinator", server.trace)
    assert (code, verdict["verdict"]) == (0, "conforms"), verdict
