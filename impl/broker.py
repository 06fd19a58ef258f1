"""The broker around the coordinator: the requests a Kafka client sends before and
beside the group protocol, answered for a one-broker cluster whose partitions'
logs are impl/records.py's. Nothing here is group protocol; each function maps a request payload
(kio) to a response dict for ``wire.response_frame``.

``Cluster``: this broker's node id (0), host, port and ``topics`` ((name,
partition count), ...).
"""
from __future__ import annotations

import os
from multiprocessing import shared_memory
import threading
import time
import uuid
from typing import NamedTuple

from .wire import SUPPORTED, read_request, response_frame

NODE_ID = 0
CLUSTER_ID = "rebalance-reference"
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
KAFKA_STORAGE_ERROR = 56
UNKNOWN_TOPIC_ID = 100
TOPIC_IDS = uuid.UUID("6d2a8c62-5b1e-4f0e-9c3b-2f1d7a0c4e11")  # the namespace of this broker's topic ids


class Cluster(NamedTuple):
    host: str
    port: int
    topics: tuple  # ((name, partition count), ...)

    def partitions(self, topic: str) -> int:
        """The topic's partition count, 0 if the topic does not exist."""
        return dict(self.topics).get(topic, 0)

    def hosts(self, topic: str, partition: int) -> bool:
        """Whether this broker leads ``topic``-``partition``. A request naming a
        partition it does not host is answered UNKNOWN_TOPIC_OR_PARTITION for that
        partition before the group coordinator sees the request
        (KafkaApis.handleOffsetCommitRequest); serve and conform both ask here."""
        return 0 <= partition < self.partitions(topic)


def api_versions(error: int = 0) -> dict:
    """ApiVersions: the versions of ``wire.SUPPORTED`` (KIP-511: also the answer,
    with UNSUPPORTED_VERSION, to an ApiVersions we cannot parse)."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(SUPPORTED.items())]
    return {"error_code": error, "api_keys": keys, "throttle_time": 0}


def topic_id(name: str) -> uuid.UUID:
    """The topic id of a topic name: derived from the name (Kafka draws a random one at
    creation), so it is the same across restarts without being stored. KIP-848's
    ConsumerGroupHeartbeat names partitions by topic id (KIP-516)."""
    return uuid.uuid5(TOPIC_IDS, name)


def topic_name(cluster: Cluster, tid: uuid.UUID):
    """The name of the cluster's topic of id ``tid``, or None."""
    return next((name for name, _ in cluster.topics if topic_id(name) == tid), None)


def metadata(cluster: Cluster, body) -> dict:
    """Metadata: this broker, leader of every partition; unknown topics answered
    UNKNOWN_TOPIC_OR_PARTITION (the caller auto-creates before, if it does), a topic
    asked for by an unknown id (v10+, name null) UNKNOWN_TOPIC_ID. Every topic for a null
    topic list, and for an empty one at v0 (MetadataRequest.isAllTopics)."""
    requested = getattr(body, "topics", None)
    if requested is None or (not requested and type(body).__version__ == 0):
        names = [t for t, _ in cluster.topics]
    else:
        names = [t.name if t.name is not None else topic_name(cluster, t.topic_id) or t.topic_id for t in requested]
    topics = []
    for name in names:
        if isinstance(name, uuid.UUID):  # asked for by an id no topic has
            topics.append({"error_code": UNKNOWN_TOPIC_ID, "name": None, "topic_id": name, "is_internal": False,
                           "partitions": []})
            continue
        count = cluster.partitions(name)
        topics.append({
            "error_code": 0 if count else UNKNOWN_TOPIC_OR_PARTITION, "name": name,
            "topic_id": topic_id(name) if count else uuid.UUID(int=0),
            "is_internal": False,
            "partitions": [{"error_code": 0, "partition_index": p, "leader_id": NODE_ID, "leader_epoch": 0,
                            "replica_nodes": (NODE_ID,), "isr_nodes": (NODE_ID,), "offline_replicas": ()}
                           for p in range(count)],
        })
    return {"throttle_time": 0, "brokers": [{"node_id": NODE_ID, "host": cluster.host, "port": cluster.port}],
            "cluster_id": CLUSTER_ID, "controller_id": NODE_ID, "topics": topics}


def parse_topic(value: str) -> tuple:
    """"NAME:PARTITIONS" as (name, partitions). Raises ValueError naming the problem."""
    name, _, count = value.rpartition(":")
    if not name or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{value!r}: expected NAME:PARTITIONS, e.g. orders:6")
    return name, int(count)


def find_coordinator(cluster: Cluster, body) -> dict:
    """FindCoordinator: this broker coordinates every group (v4: per key)."""
    here = {"node_id": NODE_ID, "host": cluster.host, "port": cluster.port, "error_code": 0, "error_message": None}
    keys = getattr(body, "coordinator_keys", None) or (getattr(body, "key", ""),)
    return {"throttle_time": 0, **here, "coordinators": [{"key": k, **here} for k in keys]}


async def produce(cluster: Cluster, records, body) -> dict:
    """Produce: each partition's records appended to its log (``records.Records.produce``;
    ReplicaManager.appendRecords), acks 1 and all alike (one replica: answered once
    the batch is on disk); acks other than -1, 0 or 1 is INVALID_REQUIRED_ACKS for
    every partition, a partition not hosted UNKNOWN_TOPIC_OR_PARTITION (no
    auto-creation on Produce, as Kafka's)."""
    topics = []
    for t in body.topic_data:
        parts = []
        for p in t.partition_data:
            start = 0
            if body.acks not in (-1, 0, 1):
                error, base, message = INVALID_REQUIRED_ACKS, -1, f"acks {body.acks}"
            elif cluster.hosts(t.name, p.index):
                error, base, message = await records.produce(t.name, p.index, p.records)
                start = records.log(t.name, p.index).start
            else:
                error, base, message = UNKNOWN_TOPIC_OR_PARTITION, -1, None
            parts.append({"index": p.index, "error_code": error, "base_offset": base, "log_append_time": None,
                          "log_start_offset": start, "record_errors": [], "error_message": message})
        topics.append({"name": t.name, "partition_responses": parts})
    return {"throttle_time": 0, "responses": topics}


async def list_offsets(cluster: Cluster, records, body) -> dict:
    """ListOffsets from the partitions' logs (``records.Records.offset_for``): earliest
    (-2, the log start), latest (-1, the high watermark), max timestamp (-3) or the
    first offset whose record's timestamp is at least the one asked
    (KafkaApis.handleListOffsetRequest, UnifiedLog.fetchOffsetByTimestamp); a
    partition not hosted is UNKNOWN_TOPIC_OR_PARTITION, any with the store offline
    KAFKA_STORAGE_ERROR."""
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            error = 0 if cluster.hosts(t.name, p.partition_index) else UNKNOWN_TOPIC_OR_PARTITION
            if not error and records.store.offline is not None:
                error = KAFKA_STORAGE_ERROR
            if error:
                parts.append({"partition_index": p.partition_index, "timestamp": -1, "offset": -1,
                              "leader_epoch": -1, "error_code": error})
                continue
            offset, ts = await records.offset_for(records.log(t.name, p.partition_index), p.timestamp)
            parts.append({"partition_index": p.partition_index, "timestamp": ts, "offset": offset,
                          "leader_epoch": 0, "error_code": 0})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


async def fetch(cluster: Cluster, records, body, fetch_max_bytes: int) -> tuple:
    """``(Fetch response, bytes of records in it)`` from the partitions' logs
    (``records.Records``): whole batches from the fetch offset up to the high
    watermark, up to each partition's max bytes (max.partition.fetch.bytes) and
    the request's max bytes capped by ``fetch_max_bytes`` (fetch.max.bytes:
    ReplicaManager.fetchMessages takes the smaller) over all, the first batch of
    the response whatever its size (KIP-74); an offset outside the log start and
    the high watermark is OFFSET_OUT_OF_RANGE (UnifiedLog.read), a partition not
    hosted UNKNOWN_TOPIC_OR_PARTITION, any with the store offline
    KAFKA_STORAGE_ERROR. No fetch sessions (session id 0: every Fetch is full,
    FetchSession's sessionless path), no transactions (last stable offset = high
    watermark)."""
    offline = records.store.offline is not None
    responses, reads = [], []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            log = records.log(t.topic, p.partition) if cluster.hosts(t.topic, p.partition) else None
            error = UNKNOWN_TOPIC_OR_PARTITION
            if log is not None:
                error = KAFKA_STORAGE_ERROR if offline else (
                    0 if log.start <= p.fetch_offset <= log.high_watermark else OFFSET_OUT_OF_RANGE)
            part = {"partition_index": p.partition, "error_code": error,
                    "high_watermark": log.high_watermark if log is not None else -1,
                    "last_stable_offset": log.high_watermark if log is not None else -1,
                    "log_start_offset": log.start if log is not None else -1,
                    "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
            if not error and p.fetch_offset < log.high_watermark:
                reads.append((part, (log, p.fetch_offset, p.partition_max_bytes)))
            parts.append(part)
        responses.append({"topic": t.topic, "partitions": parts})
    total = 0
    if reads:
        datas = await records.fetch([r for _, r in reads], min(body.max_bytes, fetch_max_bytes))
        for (part, _), data in zip(reads, datas):
            part["records"] = data
            total += len(data)
    return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}, total


def worker_init(parent: int) -> None:
    """Initializer of the worker process: exit when the server (pid ``parent``) is gone,
    even after a kill -9 that ran none of its cleanup."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)
    threading.Thread(target=watch, daemon=True).start()


def answer_shared(cluster: Cluster, name: str, size: int) -> tuple:
    """``answer`` of the frame in the first ``size`` bytes of shared memory block
    ``name`` (the server reads a large frame there, so none is copied to reach the
    worker process); the server unlinks the block (spawned workers share its
    resource tracker, so attaching registers nothing new)."""
    shm = shared_memory.SharedMemory(name)
    try:
        view = shm.buf[:size].toreadonly()
        try:
            return answer(cluster, view)
        finally:
            view.release()
    finally:
        shm.close()


def answer(cluster: Cluster, frame) -> bytes:
    """The response frame for a Metadata request frame (a read-only buffer, without
    the size prefix): decoded, answered and encoded in one call, so a large one can
    run in a worker process, away from the event loop. Raises FrameError for a
    frame that does not parse."""
    req = read_request(frame)
    return response_frame(req.api_key, req.version, req.correlation_id, metadata(cluster, req.body))
