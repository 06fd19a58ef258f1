"""The admin APIs of ``rebalance serve`` that touch no group state: CreateTopics,
DeleteTopics and DescribeConfigs, for a one-broker cluster whose topics are
``broker.Cluster.topics``. Each maps a request payload (kio) to a response dict
for ``wire.response_frame``, and the topics it creates or deletes, so the
caller swaps its cluster in one place. The group admin APIs (ListGroups,
DeleteGroups, OffsetDelete) live beside the groups, in impl/coordinator.py;
the rule that only an Empty group is deleted is the model's
(model/coordinator.py ``deletable``).

Errors are Kafka's (org.apache.kafka.common.protocol.Errors) as its controller
answers them (ControllerApis, ZkAdminManager.createTopics, Topic.validate).
"""
from __future__ import annotations

import re
import uuid

from .broker import UNKNOWN_TOPIC_OR_PARTITION, Cluster

INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REQUEST = 42
INVALID_CONFIG = 40
POLICY_VIOLATION = 44

DEFAULT_PARTITIONS = 1  # num.partitions, Kafka's default: a CreateTopics with -1, an auto-created topic
LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # org.apache.kafka.common.internals.Topic.validate
TOPIC, BROKER = 2, 4  # ConfigResource.Type ids
# the configs DescribeConfigs reports for a topic: Kafka's defaults, all read only here, but the retention
# ones, which CreateTopics may set and the broker's log.retention.ms and log.retention.bytes default, and
# cleanup.policy, which CreateTopics may set
TOPIC_CONFIGS = {"cleanup.policy": "delete", "compression.type": "producer", "max.message.bytes": "1048588",
                 "message.timestamp.type": "CreateTime", "min.insync.replicas": "1"}
RETENTION = ("retention.ms", "retention.bytes")  # the topic configs serve honours (-1: no limit)
# cleanup.policy: kept and reported (Kafka Connect refuses internal topics that are not compact,
# TopicAdmin.verifyTopicCleanupPolicyOnlyCompact); serve keeps every record of a compacted topic, as Kafka
# keeps its active segment uncompacted, and deletes by retention only under "delete"
CLEANUP_POLICY, CLEANUP_POLICIES = "cleanup.policy", ("compact", "delete")
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # DescribeConfigsResponse.ConfigSource ids
BROKER_CONFIGS = {"num.partitions": str(DEFAULT_PARTITIONS),
                  "default.replication.factor": "1", "offsets.topic.replication.factor": "1"}


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name (Topic.validate), or None."""
    if name in (".", ".."):
        return f"topic name {name!r} is illegal"
    if not LEGAL_NAME.fullmatch(name or ""):
        return f"topic name {name!r} must be 1-249 of [a-zA-Z0-9._-]"
    return None


def topic_configs(configs) -> tuple:
    """``(the configs serve keeps among ``configs`` ({name, value} entries), the error
    message of one that is not valid or None)``: the retention configs as ints of -1
    or more, cleanup.policy as a comma-separated list of compact and delete (Kafka's
    ValidList of TopicConfig.CLEANUP_POLICY_*); other configs are accepted and not kept."""
    out = {}
    for c in configs or ():
        if c.name == CLEANUP_POLICY:
            policies = [p.strip() for p in (c.value or "").split(",")]
            if not set(policies) <= set(CLEANUP_POLICIES) or not c.value:
                return out, f"Invalid value {c.value} for configuration {c.name}: must be a list of compact, delete"
            out[c.name] = ",".join(policies)
        elif c.name in RETENTION:
            try:
                out[c.name] = int(c.value)
            except (TypeError, ValueError):
                return out, f"Invalid value {c.value} for configuration {c.name}: Not a number of type LONG"
            if out[c.name] < -1:
                return out, f"Invalid value {c.value} for configuration {c.name}: must be -1 or more"
    return out, None


def create_topics(cluster: Cluster, body) -> tuple:
    """``(topics to add ((name, partitions, retention configs), ...), CreateTopics
    response)``: a legal, new name with a partition count of 1 or more (-1:
    num.partitions), a replication factor of 1 or -1 (one broker) and retention
    configs that are integers (INVALID_CONFIG); ``validate_only`` adds nothing."""
    added, results = [], []
    for t in body.topics:
        count = DEFAULT_PARTITIONS if t.num_partitions == -1 else t.num_partitions
        error, message = 0, None
        configs, bad_config = topic_configs(t.configs)
        if topic_name_error(t.name):
            error, message = INVALID_TOPIC_EXCEPTION, topic_name_error(t.name)
        elif cluster.partitions(t.name) or t.name in (a[0] for a in added):
            error, message = TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
        elif t.assignments:
            error, message = INVALID_REQUEST, "manual replica assignments are not supported by a one-broker cluster"
        elif count < 1:
            error, message = INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        elif t.replication_factor not in (-1, 1):
            error, message = (INVALID_REPLICATION_FACTOR,
                              f"Replication factor: {t.replication_factor} larger than available brokers: 1.")
        elif bad_config:
            error, message = INVALID_CONFIG, bad_config
        if not error and not getattr(body, "validate_only", False):
            added.append((t.name, count, configs))
        results.append({"name": t.name, "topic_id": uuid.UUID(int=0), "error_code": error, "error_message": message,
                        "topic_config_error_code": 0, "num_partitions": count if not error else -1,
                        "replication_factor": 1 if not error else -1,
                        "configs": [] if not error else None})
    return tuple(added), {"throttle_time": 0, "topics": results}


def delete_topics(cluster: Cluster, body) -> tuple:
    """``(names to delete, DeleteTopics response)``: an unknown topic is
    UNKNOWN_TOPIC_OR_PARTITION; v6 names topics in ``topics`` (by name only: serve
    has no topic ids), earlier versions in ``topic_names``."""
    names = [t.name for t in body.topics] if hasattr(body, "topics") else list(body.topic_names)
    gone, results = [], []
    for name in names:
        error = 0 if name and cluster.partitions(name) and name not in gone else UNKNOWN_TOPIC_OR_PARTITION
        if not error:
            gone.append(name)
        results.append({"name": name, "topic_id": uuid.UUID(int=0), "error_code": error,
                        "error_message": None if not error else "This server does not host this topic-partition."})
    return tuple(gone), {"throttle_time": 0, "responses": results}


def describe_configs(cluster: Cluster, body, retention, created) -> dict:
    """DescribeConfigs: a topic's configs (``retention(topic)``: its retention.ms and
    retention.bytes; ``created(topic)``: those set at its creation, reported as source
    DYNAMIC_TOPIC_CONFIG, the others as DEFAULT_CONFIG) or this broker's defaults
    (read only, source DEFAULT_CONFIG), the keys asked for or all; an unknown topic
    is UNKNOWN_TOPIC_OR_PARTITION, another resource type INVALID_REQUEST."""
    results = []
    for r in body.resources:
        configs, error, message, dynamic = {}, 0, None, {}
        if r.resource_type == TOPIC:
            dynamic = created(r.resource_name)
            configs = {**TOPIC_CONFIGS, **{k: str(v) for k, v in {**retention(r.resource_name), **dynamic}.items()}}
            if not cluster.partitions(r.resource_name):
                error, message = UNKNOWN_TOPIC_OR_PARTITION, f"Topic {r.resource_name} does not exist"
        elif r.resource_type == BROKER:
            configs = BROKER_CONFIGS
        else:
            error, message = INVALID_REQUEST, f"resource type {r.resource_type} is not described by rebalance serve"
        keys = configs if r.configuration_keys is None else [k for k in r.configuration_keys if k in configs]
        results.append({"error_code": error, "error_message": message, "resource_type": r.resource_type,
                        "resource_name": r.resource_name, "configs": [] if error else [
                            {"name": k, "value": configs[k], "read_only": k not in dynamic, "is_default": k not in dynamic,
                             "config_source": DYNAMIC_TOPIC_CONFIG if k in dynamic else DEFAULT_CONFIG,
                             "is_sensitive": False, "synonyms": [], "config_type": 0,
                             "documentation": None} for k in keys]})
    return {"throttle_time": 0, "results": results}
