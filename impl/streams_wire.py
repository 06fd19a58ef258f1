"""The Streams user data (seed 001) in the consumer protocol's ``user_data`` bytes:
what a Streams member reports in its Subscription and what the leader sends in
each Assignment, written and read with kio's primitives (spec/STREAMS_WIRE.md
gives the bytes field by field; SPEC.md R46 says what they mean).

Subscription user data v1: ``version`` int16, ``learning``, ``ready`` and
``standby`` as arrays of int32 task numbers, ``leaving`` boolean: the model's
``Subscription.streams`` = ``(learning, ready, standby, leaving)``.
Assignment user data v1: ``version`` int16, ``learning`` and ``standby`` as
arrays of int32 task numbers: the model's ``Assignment.streams``.
A task number is the task's partition of the tasks' topic (``T1`` is 0); the
active tasks travel as the consumer protocol's owned and assigned partitions.
Task numbers beyond the configured tasks are dropped, as the consumer protocol
drops partitions of unknown topics. Errors: ``FrameError`` for bytes that are
not user data of a version this reads (too short, truncated, version < 1);
a newer version is read as v1 (its prefix), as Kafka's consumer protocol does.

Kafka Streams' own SubscriptionInfo and AssignmentInfo
(org.apache.kafka.streams.processor.internals.assignment) carry a process id,
previous active and standby tasks and task offset sums; these bytes are the
seed's, under the protocol name ``streams`` (Kafka Streams' assignor is named
``stream``, StreamsPartitionAssignor.name), so a Kafka Streams instance never
selects this protocol with ours.
"""
from __future__ import annotations

import io

from kio.serial.errors import BufferUnderflow
from kio.serial.readers import legacy_array_reader, read_boolean, read_int16, read_int32
from kio.serial.writers import legacy_array_writer, write_boolean, write_int16, write_int32

from rebalance.model.config import GroupConfig
from rebalance.model.protocol import mask_of, partitions_of
from rebalance.model.streams import NO_USER_DATA

from .wire import FrameError

VERSION = 1
_write_tasks = legacy_array_writer(write_int32)
_read_tasks = legacy_array_reader(read_int32)


def _write(fields) -> bytes:
    """``fields``: (task bitmasks ..., then booleans ...) after the int16 version."""
    buf = io.BytesIO()
    write_int16(buf, VERSION)
    for value in fields:
        if isinstance(value, bool):
            write_boolean(buf, value)
        else:
            _write_tasks(buf, partitions_of(value))
    return buf.getvalue()


def _read(cfg: GroupConfig, data: bytes, masks: int, flags: int) -> tuple:
    """``masks`` task arrays then ``flags`` booleans after the version; FrameError."""
    try:
        version, at = read_int16(data, 0)
        if version < VERSION:
            raise FrameError(f"Streams user data version {version} (this reads {VERSION} and newer)")
        out = []
        for _ in range(masks):
            tasks, size = _read_tasks(data, at)
            at += size
            if any(t < 0 for t in tasks):
                raise FrameError(f"negative task number in Streams user data: {min(tasks)}")
            out.append(mask_of(t for t in tasks if t < cfg.num_partitions))
        for _ in range(flags):
            flag, size = read_boolean(data, at)
            at += size
            out.append(flag)
    except BufferUnderflow:
        raise FrameError(f"Streams user data truncated ({len(data)} bytes)") from None
    return tuple(out)


def encode_subscription(streams: tuple) -> bytes:
    """R46: a member's ``(learning, ready, standby, leaving)`` as subscription user data v1."""
    return _write(streams or NO_USER_DATA)


def decode_subscription(cfg: GroupConfig, data) -> tuple:
    """``(learning, ready, standby, leaving)`` of another member's user data;
    none (a member that sent no user data) reads as nothing learned, ready,
    standing by or leaving. Raises FrameError."""
    return _read(cfg, bytes(data), 3, 1) if data else NO_USER_DATA


def encode_assignment(streams: tuple) -> bytes:
    """R46: the leader's ``(learning, standby)`` for one member as assignment user data v1."""
    return _write(streams or (0, 0))


def decode_assignment(cfg: GroupConfig, data) -> tuple:
    """``(learning, standby)`` of an assignment's user data (none: ``(0, 0)``). Raises FrameError."""
    return _read(cfg, bytes(data), 2, 0) if data else (0, 0)
