"""Issue 42 item 8: a null in an array the schema does not allow null is a parse
error, for every API and version serve advertises (wire.SUPPORTED), at any depth
(OffsetFetch v5's and v7's ``topics[].partition_indexes`` reached the handler and
raised). The cases are generated from kio's schemas: each request carries one
element in every array on the way to its non-nullable array, which is null."""
import datetime
import socket
import typing
import uuid
from dataclasses import fields, is_dataclass

import pytest
from kio.index import load_request_schema

from interop.harness import wait_for
from rebalance.impl.wire import SUPPORTED, FrameError, read_request, request_frame
from test_serve import closed, server  # noqa: F401 (the server fixture)


def _parts(hint):
    """(nullable, is an array, the element or value type) of a field's type hint."""
    args = typing.get_args(hint)
    nullable = type(None) in args
    if nullable:
        hint = next(a for a in args if a is not type(None))
    if typing.get_origin(hint) is tuple:
        return nullable, True, typing.get_args(hint)[0]
    return nullable, False, hint


def _zero(kind):
    if is_dataclass(kind):
        return full(kind)
    if kind is bool:
        return False
    if isinstance(kind, type) and issubclass(kind, uuid.UUID):
        return uuid.UUID(int=0)
    if isinstance(kind, type) and issubclass(kind, datetime.timedelta):
        return 0
    if isinstance(kind, type) and issubclass(kind, (str, bytes)):
        return kind("" if issubclass(kind, str) else b"")
    return kind(0)


def full(cls) -> dict:
    """Field values of a kio entity class: zero values, one element in every array."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in fields(cls):
        _, array, kind = _parts(hints[f.name])
        out[f.name] = [_zero(kind)] if array else _zero(kind)
    return out


def null_arrays(cls, path=()):
    """Every path (field names) to an array field that does not admit null."""
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        nullable, array, kind = _parts(hints[f.name])
        if array and not nullable:
            yield path + (f.name,)
        if is_dataclass(kind):
            yield from null_arrays(kind, path + (f.name,))


def with_null(data: dict, path) -> dict:
    """``data`` with the field at ``path`` null (the first element of each array on the way)."""
    data = dict(data)
    if len(path) == 1:
        data[path[0]] = None
        return data
    inner = data[path[0]]
    data[path[0]] = [with_null(inner[0], path[1:])] if isinstance(inner, list) else with_null(inner, path[1:])
    return data


CASES = [(api, version, path) for api, (low, high) in sorted(SUPPORTED.items()) for version in range(low, high + 1)
         for path in null_arrays(load_request_schema(api, version))]


def frame_of(api, version, path) -> bytes:
    return request_frame(api, version, 1, "nulls", with_null(full(load_request_schema(api, version)), path))


def test_every_advertised_version_has_its_cases():
    no_array = {12, 18, 22}  # Heartbeat, ApiVersions, InitProducerId
    assert len(CASES) > 100 and {api for api, _, _ in CASES} == set(SUPPORTED) - no_array
    assert any(path == ("topics", "partition_indexes") for api, version, path in CASES if (api, version) == (9, 7))


def test_a_null_in_a_non_nullable_array_is_a_parse_error():
    for api, version, path in CASES:
        with pytest.raises(FrameError, match="is null, which the schema forbids"):
            read_request(frame_of(api, version, path)[4:])
        read_request(request_frame(api, version, 1, "nulls", full(load_request_schema(api, version)))[4:])  # else ok


def test_on_the_wire_each_closes_its_connection_only_and_never_reaches_a_handler(server):
    for api, version, path in CASES:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(frame_of(api, version, path))
            assert closed(s), (api, version, path)
    wait_for(lambda: sum("which the schema forbids" in line for line in server.log) >= min(len(CASES), 10), 10,
             "the parse errors logged")  # warnings are rate-limited: ten of a kind a minute
    assert server.alive()
    assert not any("Traceback" in line or "internal error" in line for line in server.log), server.log[-5:]
