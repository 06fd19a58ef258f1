"""Kafka's wire format: size-prefixed frames, request and response headers, and
payloads as kio's dataclasses.

A frame is an int32 size and that many bytes. A request frame starts with its
header (RequestHeader v1, or v2 for a flexible request version); a response frame
with ResponseHeader v0, or v1 for a flexible response except ApiVersions
(always v0, KIP-511). Payloads are built and read with kio
(``kio.index.load_request_schema`` / ``load_response_schema``); ``make`` builds a
payload of whichever version a request asked for from one dict of field values,
so the callers describe a response once for every version.

Errors: ``FrameError`` for a frame that cannot be a request (too large, too
short, garbage, an unknown API key or an unsupported version: the broker closes
the connection, as Kafka's SocketServer does for a request it cannot parse);
``UnsupportedVersion`` for ApiVersions at a version we do not speak (answered
with UNSUPPORTED_VERSION and our versions, KIP-511).
"""
from __future__ import annotations

import asyncio
import datetime
import io
import mmap
import types
import typing
from dataclasses import fields, is_dataclass
from functools import cache, lru_cache
from typing import NamedTuple

from kio.index import load_request_schema as _load_request_schema
from kio.index import load_response_schema as _load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader as _entity_reader
from kio.serial import entity_writer as _entity_writer
from kio.static.primitive import i32Timedelta, i64Timedelta

MAX_FRAME = 100 * 1024 * 1024  # socket.request.max.bytes, Kafka's default (bytes)
SMALL_FRAME = 4096  # frames up to this size are read as bytes, larger ones into a buffer of their size


class Api:
    """Kafka ApiKeys used here (org.apache.kafka.common.protocol.ApiKeys)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    DESCRIBE_CONFIGS = 32
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


# Kafka's name of each API above (ApiKeys: JOIN_GROUP is "JoinGroup"), {api key: name}
KAFKA_NAMES = {key: "".join(word.capitalize() for word in attr.split("_"))
               for attr, key in vars(Api).items() if attr.isupper()}


# The versions this server answers, {api key: (min, max)}: within kio's schemas and
# below the versions that need topic ids (Fetch 13+, Produce 13, OffsetCommit 10+); KIP-848's heartbeat at
# Kafka 4.4.0's versions (ConsumerGroupHeartbeatRequestData, ConsumerGroupDescribeRequestData: 0-1).
SUPPORTED = {
    Api.PRODUCE: (3, 9),
    Api.FETCH: (4, 12),
    Api.LIST_OFFSETS: (1, 7),
    Api.METADATA: (0, 12),
    Api.OFFSET_COMMIT: (2, 9),
    Api.OFFSET_FETCH: (1, 7),
    Api.FIND_COORDINATOR: (0, 4),
    Api.JOIN_GROUP: (0, 9),
    Api.HEARTBEAT: (0, 4),
    Api.LEAVE_GROUP: (0, 5),
    Api.SYNC_GROUP: (0, 5),
    Api.DESCRIBE_GROUPS: (0, 5),
    Api.API_VERSIONS: (0, 3),
    Api.LIST_GROUPS: (0, 5),
    Api.CREATE_TOPICS: (2, 7),
    Api.DELETE_TOPICS: (1, 6),
    Api.DELETE_RECORDS: (0, 2),
    Api.INIT_PRODUCER_ID: (0, 4),
    Api.DESCRIBE_CONFIGS: (1, 4),
    Api.DELETE_GROUPS: (0, 2),
    Api.OFFSET_DELETE: (0, 0),
    Api.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    Api.CONSUMER_GROUP_DESCRIBE: (0, 1),
}


# kio looks schemas up and builds readers and writers on every call: cached, the heartbeat path's
# two lookups and two builds per request are dictionary hits
load_request_schema = cache(_load_request_schema)
load_response_schema = cache(_load_response_schema)
entity_reader = cache(_entity_reader)
entity_writer = cache(_entity_writer)


class FrameError(Exception):
    """A frame that is not a request we can answer; the connection is closed."""


class UnsupportedVersion(FrameError):
    """ApiVersions at a version we do not speak (answered, then the client retries)."""

    def __init__(self, message: str, correlation_id: int):
        super().__init__(message)
        self.correlation_id = correlation_id


class Request(NamedTuple):
    """A parsed request: header fields and the kio payload."""

    api_key: int
    version: int
    correlation_id: int
    client_id: str
    body: object


def ms(value) -> int:
    """A kio duration field in whole milliseconds."""
    return int(value / datetime.timedelta(milliseconds=1))


def _i16(frame: bytes, at: int) -> int:
    return int.from_bytes(frame[at:at + 2], "big", signed=True)


def read_request(frame: bytes) -> Request:
    """Parse a request frame's bytes (without the size prefix). Raises FrameError
    or UnsupportedVersion."""
    api_key, version, correlation_id = request_key(frame)
    if api_key not in SUPPORTED:
        raise FrameError(f"unknown or unsupported API key {api_key}")
    low, high = SUPPORTED[api_key]
    if not low <= version <= high:
        if api_key == Api.API_VERSIONS:
            raise UnsupportedVersion(f"ApiVersions v{version}", correlation_id)
        raise FrameError(f"API key {api_key} at unsupported version {version}")
    schema = load_request_schema(api_key, version)
    header_schema = _request_header(schema)
    try:
        header, used = entity_reader(header_schema)(frame, 0)
        body, _ = entity_reader(schema)(frame, used)
    except Exception as e:  # kio raises a variety of errors on bad bytes
        raise FrameError(f"malformed {schema.__name__} v{version}: {type(e).__name__}: {e}") from None
    # bytes after the payload are ignored, as Kafka's RequestContext.parseRequest does (it reads the payload
    # and never checks what remains): librdkafka's Metadata v12 for all topics ends with 3 such bytes
    null = _forbidden_null(body)
    if null:
        raise FrameError(f"{schema.__name__} v{version}: {null} is null, which the schema forbids")
    return Request(api_key, version, header.correlation_id, header.client_id or "", body)


def _request_header(schema):
    return RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1


def _response_header(api_key: int, schema):
    """ResponseHeader v1 for a flexible response, except ApiVersions (KIP-511)."""
    return ResponseHeaderV1 if schema.__flexible__ and api_key != Api.API_VERSIONS else ResponseHeaderV0


@cache
def _field_types(cls) -> dict:
    """{field name: (nested entity class or None, kio scalar type)} of a kio dataclass."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in fields(cls):
        inner = _unwrap(_unwrap(hints[f.name]))
        out[f.name] = (inner if is_dataclass(inner) else None, inner)
    return out


@cache
def _entity_fields(cls) -> tuple:
    """((field name, nullable, nested entity class or None), ...) of a kio dataclass."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        hint = hints[f.name]
        nullable = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
        out.append((f.name, nullable, _field_types(cls)[f.name][0]))
    return tuple(out)


def _forbidden_null(entity, path: str = ""):
    """The dotted path of the first field of ``entity`` (nested entities too, within
    nullable arrays as well) that is None though its schema does not allow null, or
    None. kio reads a null array or string where the schema forbids one as None;
    Kafka's generated readers refuse such a request ("non-nullable field ... was
    serialized as null") and the broker closes the connection."""
    for name, nullable, nested in _entity_fields(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return path + name
            continue
        if nested is not None:
            for i, item in enumerate(value if isinstance(value, tuple) else (value,)):
                found = _forbidden_null(item, f"{path}{name}[{i}].")
                if found:
                    return found
    return None


def _unwrap(hint):
    """X of ``X | None`` and of ``tuple[X, ...]``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0]
    return hint


def make(cls, data: dict):
    """A kio payload of class ``cls`` from a dict: fields the class lacks are
    ignored, nested entities are given as dicts (or tuples of dicts), error codes
    and durations as ints (ms). Raises TypeError if a required field is missing."""
    kwargs = {}
    for name, (nested, kind) in _field_types(cls).items():
        if name not in data:
            continue
        value = data[name]
        if nested is not None and value is not None:
            value = tuple(make(nested, x) for x in value) if isinstance(value, (list, tuple)) else make(nested, value)
        elif kind is ErrorCode:
            value = ErrorCode(int(value))
        elif kind in (i32Timedelta, i64Timedelta) and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        kwargs[name] = value
    return cls(**kwargs)


def _frame(header_schema, header, schema, payload) -> bytes:
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    entity_writer(header_schema)(buf, header)
    entity_writer(schema)(buf, payload)
    with buf.getbuffer() as out:
        out[0:4] = (len(out) - 4).to_bytes(4, "big")
    return buf.getvalue()  # the buffer's own bytes, not a copy (no view of it is left)


def response_frame(api_key: int, version: int, correlation_id: int, data: dict) -> bytes:
    """A whole response frame (size prefix included) for a request. A response whose
    field values are all hashable (a Heartbeat's, most often) is encoded once per
    API, version and values; its frame is the cached payload behind a new header."""
    try:
        payload = _flat_payload(api_key, version, tuple(data.items()))
    except TypeError:  # lists or dicts among the values: encoded each time
        return encode_response(api_key, version, correlation_id, make(load_response_schema(api_key, version), data))
    schema = load_response_schema(api_key, version)
    head = correlation_id.to_bytes(4, "big", signed=True)
    if _response_header(api_key, schema) is ResponseHeaderV1:
        head += b"\0"  # no tagged fields
    return (len(head) + len(payload)).to_bytes(4, "big") + head + payload


@lru_cache(maxsize=1024)
def _flat_payload(api_key: int, version: int, items: tuple) -> bytes:
    schema = load_response_schema(api_key, version)
    buf = io.BytesIO()
    entity_writer(schema)(buf, make(schema, dict(items)))
    return buf.getvalue()


def encode_response(api_key: int, version: int, correlation_id: int, payload) -> bytes:
    """A whole response frame (size prefix included) of a kio response payload."""
    schema = load_response_schema(api_key, version)
    header_schema = _response_header(api_key, schema)
    return _frame(header_schema, header_schema(correlation_id=correlation_id), schema, payload)


def request_key(frame: bytes) -> tuple:
    """``(api_key, version, correlation_id)`` from the first 8 bytes of a request
    frame (without the size prefix), whatever the API and version: what a proxy
    needs to forward a request it need not parse. Raises FrameError if shorter."""
    if len(frame) < 8:
        raise FrameError(f"a request header needs 8 bytes at least, got {len(frame)}")
    return _i16(frame, 0), _i16(frame, 2), int.from_bytes(frame[4:8], "big", signed=True)


async def read_frame(reader) -> bytes:
    """The next frame's bytes (without the size prefix) from an asyncio
    StreamReader. Raises FrameError for a size outside 1..MAX_FRAME and
    asyncio.IncompleteReadError when the peer closes."""
    size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
    if not 0 < size <= MAX_FRAME:
        raise FrameError(f"frame size {size} outside 1..{MAX_FRAME}")
    return await reader.readexactly(size)


async def read_request_frame(reader, max_bytes, pool=None, alloc=None, touch=None, pooled_above: int = 0):
    """The next request frame (without the size prefix) from an asyncio
    StreamReader: bytes up to SMALL_FRAME, else read into one buffer of its exact
    size as its bytes arrive, as a read-only memoryview (what kio reads).
    ``max_bytes(api_key)``: the largest frame allowed for the API its header
    names; ``alloc(api_key, size)``: a writable buffer of ``size`` bytes to read
    into (an anonymous mmap, whose pages are taken only as they are written, when
    None); ``touch()``: called whenever bytes arrive (connections.max.idle.ms
    counts from the last); ``pool``: a memory pool (limits.MemoryPool) from which a
    frame above ``pooled_above`` bytes takes its size once its first bytes past the
    header have arrived (a declared size reserves nothing before: a header alone
    holds nothing back), released by the caller once the frame is decoded. Raises
    FrameError for a size outside 8..max_bytes and asyncio.IncompleteReadError
    when the peer closes."""
    size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
    if not 8 <= size <= MAX_FRAME:
        raise FrameError(f"frame size {size} outside 8..{MAX_FRAME}")
    head = await reader.readexactly(8)
    api_key = _i16(head, 0)
    if size > max_bytes(api_key):
        raise FrameError(f"frame size {size} above {max_bytes(api_key)}, the limit for API key {api_key}")
    if touch is not None:
        touch()
    if size <= SMALL_FRAME:  # the common case (a heartbeat): two short reads, no buffer to fill
        return head + await reader.readexactly(size - 8)
    first = await reader.read(size - 8)
    if not first:
        raise asyncio.IncompleteReadError(b"", size)
    pooled = pool is not None and size > pooled_above
    if pooled and not pool.try_acquire(size):
        await pool.acquire(size)
    try:
        buf = memoryview(mmap.mmap(-1, size)) if alloc is None else alloc(api_key, size)
        buf[:8] = head
        buf[8:8 + len(first)] = first
        at = 8 + len(first)
        while at < size:  # chunks of the reader's buffer, never a second copy of the frame
            if touch is not None:
                touch()
            chunk = await reader.read(size - at)
            if not chunk:
                raise asyncio.IncompleteReadError(b"", size)
            buf[at:at + len(chunk)] = chunk
            at += len(chunk)
    except BaseException:
        if pooled:
            pool.release(size)
        raise
    if touch is not None:
        touch()
    return memoryview(buf).toreadonly()


def sized(frame: bytes) -> bytes:
    """A frame with its int32 size prefix."""
    return len(frame).to_bytes(4, "big") + frame


def response_correlation(frame: bytes) -> int:
    """The correlation id a response frame (without the size prefix) starts with.
    Raises FrameError if shorter than 4 bytes."""
    if len(frame) < 4:
        raise FrameError(f"a response header needs 4 bytes at least, got {len(frame)}")
    return int.from_bytes(frame[:4], "big", signed=True)


def request_frame(api_key: int, version: int, correlation_id: int, client_id: str, data: dict) -> bytes:
    """A whole request frame (size prefix included), as a client sends it."""
    schema = load_request_schema(api_key, version)
    header_schema = _request_header(schema)
    header = header_schema(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id, client_id=client_id)
    return _frame(header_schema, header, schema, make(schema, data))


def read_response(frame: bytes, api_key: int, version: int):
    """``(correlation_id, payload)`` of a response frame's bytes (without the size
    prefix). Raises FrameError on bytes that do not parse."""
    schema = load_response_schema(api_key, version)
    try:
        header, used = entity_reader(_response_header(api_key, schema))(frame, 0)
        body, _ = entity_reader(schema)(frame, used)
    except Exception as e:  # kio raises a variety of errors on bad bytes
        raise FrameError(f"malformed {schema.__name__} v{version}: {e}") from None
    return header.correlation_id, body
