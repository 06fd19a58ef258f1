"""The broker around the coordinator: the requests a Kafka client sends before and
beside the group protocol, answered for a one-broker cluster whose topics hold
empty logs. Nothing here is group protocol; each function maps a request payload
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

from .wire import SUPPORTED, Api, ms, read_request, response_frame

NODE_ID = 0
CLUSTER_ID = "rebalance-reference"
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_VERSION = 35


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


def metadata(cluster: Cluster, body) -> dict:
    """Metadata: this broker, leader of every partition; unknown topics answered
    UNKNOWN_TOPIC_OR_PARTITION (no auto-creation)."""
    requested = getattr(body, "topics", None)
    names = [t for t, _ in cluster.topics] if requested is None else [t.name for t in requested]
    topics = []
    for name in names:
        count = cluster.partitions(name)
        topics.append({
            "error_code": 0 if count else UNKNOWN_TOPIC_OR_PARTITION, "name": name, "topic_id": uuid.UUID(int=0),
            "is_internal": False,
            "partitions": [{"error_code": 0, "partition_index": p, "leader_id": NODE_ID, "leader_epoch": 0,
                            "replica_nodes": (NODE_ID,), "isr_nodes": (NODE_ID,), "offline_replicas": ()}
                           for p in range(count)],
        })
    return {"throttle_time": 0, "brokers": [{"node_id": NODE_ID, "host": cluster.host, "port": cluster.port}],
            "cluster_id": CLUSTER_ID, "controller_id": NODE_ID, "topics": topics}


def find_coordinator(cluster: Cluster, body) -> dict:
    """FindCoordinator: this broker coordinates every group (v4: per key)."""
    here = {"node_id": NODE_ID, "host": cluster.host, "port": cluster.port, "error_code": 0, "error_message": None}
    keys = getattr(body, "coordinator_keys", None) or (getattr(body, "key", ""),)
    return {"throttle_time": 0, **here, "coordinators": [{"key": k, **here} for k in keys]}


def list_offsets(cluster: Cluster, body) -> dict:
    """ListOffsets: every log is empty, so the earliest and latest offsets are 0."""
    return {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "timestamp": -1, "offset": 0, "leader_epoch": 0,
             "error_code": 0 if p.partition_index < cluster.partitions(t.name) else UNKNOWN_TOPIC_OR_PARTITION}
            for p in t.partitions]}
        for t in body.topics]}


def fetch(cluster: Cluster, body) -> dict:
    """Fetch: no records; the high watermark of every partition is 0."""
    return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": t.topic, "partitions": [
            {"partition_index": p.partition, "high_watermark": 0, "last_stable_offset": 0, "log_start_offset": 0,
             "aborted_transactions": (), "preferred_read_replica": -1, "records": b"",
             "error_code": 0 if p.partition < cluster.partitions(t.topic) else UNKNOWN_TOPIC_OR_PARTITION}
            for p in t.partitions]}
        for t in body.topics]}


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


def answer(cluster: Cluster, frame) -> tuple:
    """``(response frame, wait ms)`` for a Metadata, ListOffsets or Fetch request
    frame (a read-only buffer, without the size prefix): decoded, answered and
    encoded in one call, so a large one can run in a worker process, away from the
    event loop (a Fetch's response waits ``max.wait.ms`` first; the caller waits).
    Raises FrameError for a frame that does not parse."""
    req = read_request(frame)
    b = req.body
    if req.api_key == Api.METADATA:
        data, wait = metadata(cluster, b), 0
    elif req.api_key == Api.LIST_OFFSETS:
        data, wait = list_offsets(cluster, b), 0
    else:
        data, wait = fetch(cluster, b), ms(b.max_wait)
    return response_frame(req.api_key, req.version, req.correlation_id, data), wait
