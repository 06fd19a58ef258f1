"""Kafka's consumer embedded protocol bytes (ConsumerProtocolSubscription and
ConsumerProtocolAssignment, KIP-429 and KIP-792) to and from the model's
``Subscription`` and ``Assignment``, through kio.

Bytes are an int16 version and the payload of that version; we write
Subscription v2 (owned partitions and their generation) and Assignment v1, and
read v0 to v3, newer versions as v3 (Kafka's consumer protocol reads a newer
version's prefix). Partitions become the model's bitmask over ``cfg.topics``;
partitions of other topics are dropped. ``subscription_json`` and
``assignment_json`` read the same bytes into a trace's JSON (spec/TRACE.md),
keeping every topic and the user data.
"""
from __future__ import annotations

import base64
import io
import struct
from bisect import bisect_left

from kio.index import load_entity_schema
from kio.schema.index import schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from rebalance.model.config import GroupConfig
from rebalance.model.protocol import (ALL_TOPICS, EMPTY_ASSIGNMENT, NO_GENERATION, Assignment, Subscription, mask_of,
                                      partitions_of)

from . import connect_protocol, streams_info, streams_wire
from .wire import FrameError, make

SUBSCRIPTION, ASSIGNMENT = "consumer_protocol_subscription", "consumer_protocol_assignment"


def topic_partitions(cfg: GroupConfig, mask: int) -> list:
    """[{"topic", "partitions"}] of a bitmask, in configuration order; linear in the
    partitions (a leader encodes 1,000 assignments of 100,000 partitions)."""
    out, base, ps = [], 0, partitions_of(mask)
    for name, count in cfg.topics:
        mine = ps[bisect_left(ps, base):bisect_left(ps, base + count)]
        if mine:
            out.append({"topic": name, "partitions": [p - base for p in mine]})
        base += count
    return out


def mask_of_topics(cfg: GroupConfig, topic_partitions, key=lambda name: name) -> int:
    """The bitmask of ``topic_partitions`` (entries with ``topic`` and ``partitions``) over
    ``cfg.topics``; ``key(topic name)``: what an entry's ``topic`` holds (a name, or a topic
    id). Partitions of other topics, or beyond a topic's count, are dropped."""
    base, offsets = 0, {}
    for name, count in cfg.topics:
        offsets[key(name)] = (base, count)
        base += count
    mask = 0
    for topic, partitions in topic_partitions:
        if topic in offsets:
            start, count = offsets[topic]
            mask |= mask_of(start + p for p in partitions if 0 <= p < count)
    return mask


def _mask(cfg: GroupConfig, topic_partitions) -> int:
    return mask_of_topics(cfg, ((tp.topic, tp.partitions) for tp in topic_partitions))


def _write(name: str, version: int, data: dict) -> bytes:
    schema = load_entity_schema(name, version, EntityType.data)
    buf = io.BytesIO()
    buf.write(struct.pack(">h", version))
    entity_writer(schema)(buf, make(schema, data))
    return buf.getvalue()


def _read(name: str, data: bytes):
    return _read_versioned(name, data)[1]


def _read_versioned(name: str, data: bytes):
    """(the int16 version in front of the bytes, the kio payload). Raises FrameError."""
    if len(data) < 2:
        raise FrameError(f"consumer protocol bytes too short ({len(data)})")
    written = struct.unpack(">h", data[:2])[0]
    version = min(written, max(schema_name_map[name]))
    if version < 0:
        raise FrameError(f"consumer protocol version {version}")
    try:
        payload, _ = entity_reader(load_entity_schema(name, version, EntityType.data))(data, 2)
    except Exception as e:  # kio raises a variety of errors on bad bytes
        raise FrameError(f"malformed consumer protocol bytes: {e}") from None
    return written, payload


def _b64(data) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode()


def _tps_json(tps) -> list:
    return [{"topic": tp.topic, "partitions": list(tp.partitions)} for tp in tps]


def subscription_json(protocol_type, data: bytes) -> dict:
    """A JoinGroup metadata as a trace's ``Subscription`` (spec/TRACE.md): ``version``,
    ``topics``, ``owned_partitions`` (KIP-429, v1+), ``generation`` (KIP-792, v2+; -1
    before), ``rack`` (v3+), ``user_data`` (base64); under protocol_type "connect" a
    worker's metadata (impl/connect_protocol.py); ``streams``: Kafka Streams'
    SubscriptionInfo decoded from the user data, when it is one; ``{"opaque": base64}`` under another
    protocol_type or for bytes that do not parse."""
    if protocol_type == connect_protocol.PROTOCOL_TYPE:
        return _connect(connect_protocol.read_metadata, data)
    return _json(SUBSCRIPTION, protocol_type, data, lambda s: {
        "topics": list(s.topics), "owned_partitions": _tps_json(getattr(s, "owned_partitions", ())),
        "generation": getattr(s, "generation_id", NO_GENERATION), "rack": getattr(s, "rack_id", None),
        "user_data": _b64(s.user_data), **_streams(streams_info.read_subscription, s.user_data)})


def assignment_json(protocol_type, data: bytes):
    """A SyncGroup assignment as a trace's ``Assignment`` (spec/TRACE.md): ``version``,
    ``assigned_partitions``, ``user_data`` (base64), ``streams`` (Kafka Streams'
    AssignmentInfo, when the user data is one); None for empty bytes (no
    assignment); a Connect assignment under protocol_type "connect"; ``{"opaque": base64}``
    as for ``subscription_json``."""
    if not data:
        return None
    if protocol_type == connect_protocol.PROTOCOL_TYPE:
        return _connect(connect_protocol.read_assignment, data)
    return _json(ASSIGNMENT, protocol_type, data, lambda a: {
        "assigned_partitions": _tps_json(a.assigned_partitions), "user_data": _b64(a.user_data),
        **_streams(streams_info.read_assignment, a.user_data)})


def _streams(read, user_data) -> dict:
    """``{"streams": ...}``: Kafka Streams' SubscriptionInfo or AssignmentInfo in the user
    data (impl/streams_info.py), when it parses as one to its last byte; ``{}`` otherwise."""
    if not user_data:
        return {}
    try:
        return {"streams": read(bytes(user_data))}
    except FrameError:
        return {}


def _connect(read, data: bytes) -> dict:
    try:
        return read(bytes(data))
    except FrameError:
        return {"opaque": _b64(data)}


def _json(name: str, protocol_type, data: bytes, fields) -> dict:
    """``{"version", **fields(payload)}`` of consumer protocol bytes, or ``{"opaque"}``."""
    if protocol_type == "consumer":
        try:
            version, payload = _read_versioned(name, bytes(data))
        except FrameError:
            pass
        else:
            return {"version": version, **fields(payload)}
    return {"opaque": _b64(data)}


def encode_subscription(cfg: GroupConfig, sub: Subscription) -> bytes:
    """Subscription v2: the member's topics of ``cfg`` (every one unless it subscribes
    to fewer, R61), the owned partitions and their generation; a Streams member's
    user data (R46, impl/streams_wire.py)."""
    return _write(SUBSCRIPTION, 2, {
        "topics": [name for i, (name, _) in enumerate(cfg.topics) if sub.topics >> i & 1],
        "user_data": streams_wire.encode_subscription(sub.streams) if cfg.streams else None,
        "owned_partitions": topic_partitions(cfg, sub.owned), "generation_id": sub.generation})


def decode_subscription(cfg: GroupConfig, data: bytes) -> Subscription:
    """The model's view of another member's subscription bytes: its topics of ``cfg``
    (``ALL_TOPICS`` when it names every one, R61; others are ignored), owned
    partitions and generation. Raises FrameError."""
    s = _read(SUBSCRIPTION, data)
    sub = model_subscription(cfg, getattr(s, "topics", ()), _mask(cfg, getattr(s, "owned_partitions", ())),
                             getattr(s, "generation_id", NO_GENERATION))
    return sub._replace(streams=streams_wire.decode_subscription(cfg, s.user_data)) if cfg.streams else sub


def model_subscription(cfg: GroupConfig, topic_names, owned: int, generation: int) -> Subscription:
    """The model's Subscription of a decoded one: its topics of ``cfg`` (``ALL_TOPICS`` when it
    names every one, R61; others are ignored), its ``owned`` partitions (a bitmask) and the
    ``generation`` it owns them in (NO_GENERATION when it owns nothing); also conform's, from a
    trace's JSON."""
    named = set(topic_names)
    topics = sum(1 << i for i, (name, _) in enumerate(cfg.topics) if name in named)
    return Subscription(owned, generation if owned else NO_GENERATION,
                        topics=ALL_TOPICS if topics == (1 << len(cfg.topics)) - 1 else topics)


def encode_assignment(cfg: GroupConfig, a: Assignment) -> bytes:
    """Assignment v1: the assigned partitions; a Streams member's learner and standby tasks (R46)."""
    return _write(ASSIGNMENT, 1, {"assigned_partitions": topic_partitions(cfg, a.partitions),
                                  "user_data": streams_wire.encode_assignment(a.streams) if cfg.streams else None})


def carries_user_data(data: bytes) -> bool:
    """Whether Assignment bytes carry user data (an assignor's own state). Raises FrameError."""
    return bool(data) and bool(getattr(_read(ASSIGNMENT, data), "user_data", None))


def decode_assignment(cfg: GroupConfig, data: bytes) -> Assignment:
    """Empty bytes (no assignment) are EMPTY_ASSIGNMENT. Raises FrameError."""
    if not data:
        return EMPTY_ASSIGNMENT
    a = _read(ASSIGNMENT, data)
    if cfg.streams:
        return Assignment(_mask(cfg, a.assigned_partitions), streams=streams_wire.decode_assignment(cfg, a.user_data))
    return Assignment(_mask(cfg, a.assigned_partitions))
