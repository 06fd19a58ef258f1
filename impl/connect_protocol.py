"""Kafka Connect's embedded protocol (protocol type ``connect``) read into a trace's JSON
(spec/TRACE.md, "Kafka Connect's protocol, decoded"): a worker's JoinGroup metadata and
the leader's SyncGroup assignments, as Kafka 4.4.0's ConnectProtocol (v0, protocol
``default``, eager) and IncrementalCooperativeConnectProtocol (v1 ``compatible``, v2
``sessioned``) write them with Kafka's ``Schema``/``Struct`` types (not generated message
classes, so kio has no entity schema for them: they are read with kio's primitive readers,
as impl/streams_wire.py reads the Streams user data).

The bytes, after an int16 ``version`` (ConnectProtocol.CONNECT_PROTOCOL_HEADER_SCHEMA;
negative: Kafka's SchemaException "Unsupported subscription version"):

* Metadata (ConnectProtocol.CONFIG_STATE_V0, = IncrementalCooperativeConnectProtocol
  .CONFIG_STATE_V1): the worker's REST ``url`` (string), its ``config_offset`` (int64:
  how far it read the config topic); v1+ then ALLOCATION_V1: ``allocation`` (nullable
  bytes: an assignment, header included, of what the worker runs now; null when it runs
  nothing, IncrementalCooperativeConnectProtocol.serializeAssignment).
* Assignment (ConnectProtocol.ASSIGNMENT_V0, IncrementalCooperativeConnectProtocol
  .ASSIGNMENT_V1): ``error`` (int16: 0, or 1 CONFIG_MISMATCH), ``leader`` (member.id),
  ``leader_url``, ``config_offset`` (int64), ``assigned`` (what the worker starts: v0
  everything it runs, v1+ only what is new); v1+ then ``revoked`` (what it stops) and
  ``delay`` (int32 ms: the scheduled.rebalance.max.delay.ms countdown, 0 for none).
  Each list is CONNECTOR_ASSIGNMENT_V0's ``[{"connector": name, "tasks": [int32]}]`` in
  the order of the bytes, task -1 standing for the connector itself
  (ConnectProtocol.CONNECTOR_TASK). v1+ lists are nullable (null read as ``[]``) and
  v1+ fields missing at the end take their defaults (``[]``, delay 0), as Kafka's
  ``Schema(tolerateMissingFieldsWithDefaults=true)`` reads them; bytes after the last
  field are ignored, as Kafka's Schema.read ignores them.

Errors: ``FrameError`` for bytes that do not parse (too short, truncated, a negative
version, a string that is not UTF-8); impl/consumer_protocol.py then keeps them in the
trace as ``{"opaque": base64}``.
"""
from __future__ import annotations

from kio.serial.errors import BufferUnderflow
from kio.serial.readers import (
    legacy_array_reader, read_int16, read_int32, read_int64, read_legacy_string, read_nullable_legacy_bytes,
)

from .wire import FrameError

PROTOCOL_TYPE = "connect"  # WorkerCoordinator.protocolType
CONNECTOR_TASK = -1  # a task id standing for the connector itself (ConnectProtocol.CONNECTOR_TASK)
_read_tasks = legacy_array_reader(read_int32)


class Cursor:
    """A cursor over bytes written with Kafka's ``Schema`` or ``DataOutputStream`` types
    (here and Kafka Streams' user data, impl/streams_info.py); ``take(reader)`` reads one
    kio primitive, raising kio's BufferUnderflow past the end."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def done(self) -> bool:
        return self.at >= len(self.data)

    def take(self, reader):
        value, size = reader(self.data, self.at)
        self.at += size
        return value


class _Reader(Cursor):
    """A cursor over Connect protocol bytes."""

    def version(self) -> int:
        version = self.take(read_int16)
        if version < 0:
            raise FrameError(f"Connect protocol version {version}")
        return version

    def connectors(self) -> list:
        """An array of CONNECTOR_ASSIGNMENT_V0 (null: ``[]``)."""
        count = self.take(read_int32)
        return [{"connector": self.take(read_legacy_string), "tasks": list(self.take(_read_tasks))}
                for _ in range(max(count, 0))]

    def assignment(self, version: int) -> dict:
        out = {"version": version, "error": self.take(read_int16), "leader": self.take(read_legacy_string),
               "leader_url": self.take(read_legacy_string), "config_offset": self.take(read_int64),
               "assigned": [], "revoked": [], "delay": 0}
        if version == 0:
            out["assigned"] = self.connectors()
            return out
        for name, read in (("assigned", self.connectors), ("revoked", self.connectors),
                           ("delay", lambda: self.take(read_int32))):
            if self.done():  # tolerateMissingFieldsWithDefaults
                break
            out[name] = read()
        return out


def _parse(data: bytes, what: str, read):
    try:
        return read(_Reader(bytes(data)))
    except BufferUnderflow:
        raise FrameError(f"Connect {what} truncated ({len(data)} bytes)") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise FrameError(f"malformed Connect {what}: {e}") from None


def read_metadata(data: bytes) -> dict:
    """A worker's JoinGroup metadata (ConnectProtocol.deserializeMetadata,
    IncrementalCooperativeConnectProtocol.deserializeMetadata): ``{"version", "url",
    "config_offset", "allocation": an assignment as ``read_assignment`` gives it, or
    None}``. Raises FrameError."""
    def read(r: _Reader) -> dict:
        version = r.version()
        out = {"version": version, "url": r.take(read_legacy_string), "config_offset": r.take(read_int64),
               "allocation": None}
        if version >= 1 and not r.done():
            allocation = r.take(read_nullable_legacy_bytes)
            if allocation is not None:
                out["allocation"] = read_assignment(allocation)
        return out
    return _parse(data, "metadata", read)


def read_assignment(data: bytes) -> dict:
    """A SyncGroup assignment or a metadata's allocation (ConnectProtocol
    .deserializeAssignment, IncrementalCooperativeConnectProtocol.deserializeAssignment):
    ``{"version", "error", "leader", "leader_url", "config_offset", "assigned",
    "revoked", "delay"}``. Raises FrameError."""
    return _parse(data, "assignment", lambda r: r.assignment(r.version()))
