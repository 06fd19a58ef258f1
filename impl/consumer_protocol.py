"""Kafka's consumer embedded protocol bytes (ConsumerProtocolSubscription and
ConsumerProtocolAssignment, KIP-429 and KIP-792) to and from the model's
``Subscription`` and ``Assignment``, through kio.

Bytes are an int16 version and the payload of that version; we write
Subscription v2 (owned partitions and their generation) and Assignment v1, and
read v0 to v3, newer versions as v3 (Kafka's consumer protocol reads a newer
version's prefix). Partitions become the model's bitmask over ``cfg.topics``;
partitions of other topics are dropped.
"""
from __future__ import annotations

import io
import struct

from kio.index import load_entity_schema
from kio.schema.index import schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from rebalance.model.config import GroupConfig
from rebalance.model.protocol import EMPTY_ASSIGNMENT, NO_GENERATION, Assignment, Subscription, partitions_of

from .wire import FrameError, make

SUBSCRIPTION, ASSIGNMENT = "consumer_protocol_subscription", "consumer_protocol_assignment"


def topic_partitions(cfg: GroupConfig, mask: int) -> list:
    """[{"topic", "partitions"}] of a bitmask, in configuration order."""
    out, base = [], 0
    for name, count in cfg.topics:
        ps = [p - base for p in partitions_of(mask) if base <= p < base + count]
        if ps:
            out.append({"topic": name, "partitions": ps})
        base += count
    return out


def _mask(cfg: GroupConfig, topic_partitions) -> int:
    base, offsets = 0, {}
    for name, count in cfg.topics:
        offsets[name] = (base, count)
        base += count
    mask = 0
    for tp in topic_partitions:
        if tp.topic in offsets:
            start, count = offsets[tp.topic]
            for p in tp.partitions:
                if 0 <= p < count:
                    mask |= 1 << (start + p)
    return mask


def _write(name: str, version: int, data: dict) -> bytes:
    schema = load_entity_schema(name, version, EntityType.data)
    buf = io.BytesIO()
    buf.write(struct.pack(">h", version))
    entity_writer(schema)(buf, make(schema, data))
    return buf.getvalue()


def _read(name: str, data: bytes):
    if len(data) < 2:
        raise FrameError(f"consumer protocol bytes too short ({len(data)})")
    version = min(struct.unpack(">h", data[:2])[0], max(schema_name_map[name]))
    if version < 0:
        raise FrameError(f"consumer protocol version {version}")
    try:
        payload, _ = entity_reader(load_entity_schema(name, version, EntityType.data))(data, 2)
    except Exception as e:  # kio raises a variety of errors on bad bytes
        raise FrameError(f"malformed consumer protocol bytes: {e}") from None
    return payload


def encode_subscription(cfg: GroupConfig, sub: Subscription) -> bytes:
    """Subscription v2: every topic of ``cfg``, the owned partitions and their generation."""
    return _write(SUBSCRIPTION, 2, {
        "topics": [name for name, _ in cfg.topics], "user_data": None,
        "owned_partitions": topic_partitions(cfg, sub.owned), "generation_id": sub.generation})


def decode_subscription(cfg: GroupConfig, data: bytes) -> Subscription:
    """The model's view of another member's subscription bytes. Raises FrameError."""
    s = _read(SUBSCRIPTION, data)
    owned = _mask(cfg, getattr(s, "owned_partitions", ()))
    generation = getattr(s, "generation_id", NO_GENERATION)
    return Subscription(owned, generation if owned else NO_GENERATION)


def encode_assignment(cfg: GroupConfig, a: Assignment) -> bytes:
    return _write(ASSIGNMENT, 1, {"assigned_partitions": topic_partitions(cfg, a.partitions), "user_data": None})


def decode_assignment(cfg: GroupConfig, data: bytes) -> Assignment:
    """Empty bytes (no assignment) are EMPTY_ASSIGNMENT. Raises FrameError."""
    if not data:
        return EMPTY_ASSIGNMENT
    return Assignment(_mask(cfg, _read(ASSIGNMENT, data).assigned_partitions))
