"""Kafka Streams' own user data in the consumer protocol (assignor ``stream``,
StreamsPartitionAssignor, KIP-441): a member's SubscriptionInfo and the leader's
AssignmentInfo, read into a trace's JSON (spec/TRACE.md, "Kafka Streams' user data,
decoded") with kio's primitives, in the layouts Kafka Streams 4.4.0 writes (versions 7
to 11; StreamsAssignmentProtocolVersions.LATEST_SUPPORTED_VERSION is 11). Not the seed's
own Streams user data (impl/streams_wire.py, protocol ``streams``).

SubscriptionInfo (the generated SubscriptionInfoData, big-endian): ``version`` int32,
``latest_supported_version`` int32, ``process_id`` (UUID, 16 bytes), ``user_endpoint``
(int32-length bytes, "host:port" or empty), ``task_offset_sums`` (int32 count of: int32
subtopology, then v10+ int32 partition, int64 offset sum and a nullable int16-length named
topology; v7-9 an int32 count of (int32 partition, int64 offset sum) per subtopology),
v8+ ``unique_field`` int8, v9+ ``error_code`` int32, v11+ ``client_tags`` (int32 count of
int32-length key and value bytes). An offset sum is the task's changelog offsets summed
(its state's position): -2 (Task.LATEST_OFFSET) for a task the instance runs active,
-3 (SubscriptionInfo.UNKNOWN_OFFSET_SUM) unknown; the leader reads lags from them.

AssignmentInfo v7-11 (AssignmentInfo.encode, DataOutputStream): ``version`` int32,
``commonly_supported_version`` int32, ``active_tasks`` (int32 count of task ids; one per
assigned partition, in the order of the consumer assignment's partitions),
``standby_tasks`` (int32 count of a task id and its partitions: int32 count of (UTF
topic, int32 partition)), a topic dictionary (int32 count of (int32 index, UTF name)),
``partitions_by_host`` and ``standby_partitions_by_host`` (each an int32 count of (UTF
host, int32 port, int32 count of (int32 topic index, int32 partition))), ``error_code``
int32, ``next_rebalance_ms`` int64 (the wall time the member rejoins for a probing
rebalance; 0: at once, tasks wait for their revocation; 2^63-1: none). A task id is
int32 subtopology, int32 partition, v10+ an int32 count of UTF-16 chars of the named
topology; written ``"SUBTOPOLOGY_PARTITION"`` as Kafka's TaskId.toString
(``NAME__SUBTOPOLOGY_PARTITION`` with a named topology). UTF strings are Java's modified
UTF-8 (int16 length), read as UTF-8.

Errors: ``FrameError`` for bytes that are not one of these versions or do not parse to
their last byte (impl/consumer_protocol.py then leaves the user data undecoded).
"""
from __future__ import annotations

from kio.serial.errors import BufferUnderflow
from kio.serial.readers import (
    read_int8, read_int32, read_int64, read_legacy_bytes, read_legacy_string, read_nullable_legacy_string, read_uuid,
)

from .connect_protocol import Cursor
from .wire import FrameError

ASSIGNOR = "stream"  # StreamsPartitionAssignor.name
VERSIONS = range(7, 12)  # MIN_VERSION_OFFSET_SUM_SUBSCRIPTION .. LATEST_SUPPORTED_VERSION
NO_REBALANCE_MS = 2**63 - 1  # Long.MAX_VALUE: no followup rebalance


def task_name(subtopology: int, partition: int, topology: str | None = None) -> str:
    return f"{topology}__{subtopology}_{partition}" if topology else f"{subtopology}_{partition}"


class _Reader(Cursor):
    def task(self, version: int) -> str:
        subtopology, partition = self.take(read_int32), self.take(read_int32)
        topology = None
        if version >= 10:
            chars = self.take(read_int32)
            raw = self.data[self.at:self.at + 2 * chars]
            if len(raw) < 2 * chars:
                raise BufferUnderflow
            self.at += 2 * chars
            topology = raw.decode("utf-16-be") or None
        return task_name(subtopology, partition, topology)

    def partitions(self) -> list:
        """(UTF topic, int32 partition) pairs grouped as [{topic, partitions}] in first-seen order."""
        out: dict = {}
        for _ in range(max(self.take(read_int32), 0)):
            topic = self.take(read_legacy_string)
            out.setdefault(topic, []).append(self.take(read_int32))
        return [{"topic": t, "partitions": ps} for t, ps in out.items()]

    def hosts(self, topics: dict) -> list:
        out = []
        for _ in range(max(self.take(read_int32), 0)):
            host, port = self.take(read_legacy_string), self.take(read_int32)
            by_topic: dict = {}
            for _ in range(max(self.take(read_int32), 0)):
                index, partition = self.take(read_int32), self.take(read_int32)
                if index not in topics:
                    raise ValueError(f"topic index {index} not in the dictionary")
                by_topic.setdefault(topics[index], []).append(partition)
            out.append({"host": host, "port": port,
                        "partitions": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
        return out

    def version(self) -> int:
        version = self.take(read_int32)
        if version not in VERSIONS:
            raise FrameError(f"Kafka Streams user data version {version} (this reads {VERSIONS.start}-"
                             f"{VERSIONS.stop - 1})")
        return version


def _parse(data: bytes, what: str, read) -> dict:
    r = _Reader(bytes(data))
    try:
        out = read(r)
    except BufferUnderflow:
        raise FrameError(f"Kafka Streams {what} truncated ({len(data)} bytes)") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise FrameError(f"malformed Kafka Streams {what}: {e}") from None
    if not r.done():
        raise FrameError(f"Kafka Streams {what}: {len(data) - r.at} bytes after its last field")
    return out


def read_subscription(data: bytes) -> dict:
    """SubscriptionInfo (module docstring): ``{"version", "latest_supported_version",
    "process_id", "user_endpoint", "task_offset_sums": {task: offset sum},
    "unique_field", "error_code", "client_tags": {key: value}}``. Raises FrameError."""
    def read(r: _Reader) -> dict:
        version = r.version()
        out = {"version": version, "latest_supported_version": r.take(read_int32),
               "process_id": str(r.take(read_uuid) or "00000000-0000-0000-0000-000000000000"),
               "user_endpoint": r.take(read_legacy_bytes).decode(), "task_offset_sums": {},
               "unique_field": 0, "error_code": 0, "client_tags": {}}
        for _ in range(max(r.take(read_int32), 0)):
            subtopology = r.take(read_int32)
            if version >= 10:
                partition, offset_sum = r.take(read_int32), r.take(read_int64)
                topology = r.take(read_nullable_legacy_string)
                out["task_offset_sums"][task_name(subtopology, partition, topology)] = offset_sum
            else:
                for _ in range(max(r.take(read_int32), 0)):
                    partition = r.take(read_int32)
                    out["task_offset_sums"][task_name(subtopology, partition)] = r.take(read_int64)
        if version >= 8:
            out["unique_field"] = r.take(read_int8)
        if version >= 9:
            out["error_code"] = r.take(read_int32)
        if version >= 11:
            for _ in range(max(r.take(read_int32), 0)):
                key = r.take(read_legacy_bytes).decode()
                out["client_tags"][key] = r.take(read_legacy_bytes).decode()
        return out
    return _parse(data, "SubscriptionInfo", read)


def read_assignment(data: bytes) -> dict:
    """AssignmentInfo (module docstring): ``{"version", "commonly_supported_version",
    "active_tasks": [task], "standby_tasks": {task: [{topic, partitions}]},
    "partitions_by_host", "standby_partitions_by_host": [{host, port, partitions}],
    "error_code", "next_rebalance_ms"}``. Raises FrameError."""
    def read(r: _Reader) -> dict:
        version = r.version()
        out = {"version": version, "commonly_supported_version": r.take(read_int32),
               "active_tasks": [r.task(version) for _ in range(max(r.take(read_int32), 0))],
               "standby_tasks": {}}
        for _ in range(max(r.take(read_int32), 0)):
            task = r.task(version)
            out["standby_tasks"][task] = r.partitions()
        topics = {}
        for _ in range(max(r.take(read_int32), 0)):
            index = r.take(read_int32)
            topics[index] = r.take(read_legacy_string)
        out["partitions_by_host"] = r.hosts(topics)
        out["standby_partitions_by_host"] = r.hosts(topics)
        out["error_code"] = r.take(read_int32)
        out["next_rebalance_ms"] = r.take(read_int64)
        return out
    return _parse(data, "AssignmentInfo", read)
