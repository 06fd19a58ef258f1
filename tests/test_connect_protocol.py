"""Kafka Connect's embedded protocol (protocol type ``connect``) read into a trace's
JSON (impl/connect_protocol.py, spec/TRACE.md): bytes written here field by field as
Kafka 4.4.0's ConnectProtocol and IncrementalCooperativeConnectProtocol write them."""
import base64
import json
import struct
from pathlib import Path

import jsonschema
import pytest

from rebalance.checker.conform.members import Uninterpretable, _subscription_dict
from rebalance.impl.consumer_protocol import assignment_json, subscription_json

SCHEMA = json.loads((Path(__file__).parent.parent / "spec" / "trace.schema.json").read_text())


def valid(value, definition: str):
    jsonschema.validate(value, {"$ref": f"#/$defs/{definition}", "$defs": SCHEMA["$defs"]})
    return value


def string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def connectors(entries) -> bytes:
    out = struct.pack(">i", len(entries))
    for name, tasks in entries:
        out += string(name) + struct.pack(">i", len(tasks)) + b"".join(struct.pack(">i", t) for t in tasks)
    return out


def assignment(version, assigned, revoked=None, delay=None) -> bytes:
    out = struct.pack(">hh", version, 0) + string("connect-W1-abc") + string("http://127.0.0.1:8083/") + \
        struct.pack(">q", 11) + connectors(assigned)
    if revoked is not None:
        out += connectors(revoked)
    if delay is not None:
        out += struct.pack(">i", delay)
    return out


def test_a_workers_metadata_carries_what_it_runs():
    allocation = assignment(2, [("seq", [-1, 0, 3])], [], 0)
    metadata = struct.pack(">h", 2) + string("http://127.0.0.1:8083/") + struct.pack(">q", 11) + \
        struct.pack(">i", len(allocation)) + allocation
    assert valid(subscription_json("connect", metadata), "connect_subscription") == {
        "version": 2, "url": "http://127.0.0.1:8083/", "config_offset": 11, "allocation": {
            "version": 2, "error": 0, "leader": "connect-W1-abc", "leader_url": "http://127.0.0.1:8083/",
            "config_offset": 11, "assigned": [{"connector": "seq", "tasks": [-1, 0, 3]}], "revoked": [], "delay": 0}}
    # a worker that runs nothing sends a null allocation; protocol v0 ("default") has none at all
    nothing = struct.pack(">h", 1) + string("http://w/") + struct.pack(">q", -1) + struct.pack(">i", -1)
    assert subscription_json("connect", nothing)["allocation"] is None
    v0 = struct.pack(">h", 0) + string("http://w/") + struct.pack(">q", -1)
    assert subscription_json("connect", v0) == {"version": 0, "url": "http://w/", "config_offset": -1,
                                                "allocation": None}


def test_an_assignment_carries_revocations_and_the_delay():
    a = valid(assignment_json("connect", assignment(2, [("seq", [2])], [("seq", [-1, 5])], 12000)),
              "connect_assignment")
    assert (a["assigned"], a["revoked"], a["delay"]) == (
        [{"connector": "seq", "tasks": [2]}], [{"connector": "seq", "tasks": [-1, 5]}], 12000)
    # fields missing at the end take their defaults (Schema(tolerateMissingFieldsWithDefaults))
    a = assignment_json("connect", assignment(1, [("seq", [0])]))
    assert (a["revoked"], a["delay"]) == ([], 0)
    # v0 ("default", eager): no revocations, no delay
    assert assignment_json("connect", assignment(0, [("seq", [0, 1])]))["assigned"] == [
        {"connector": "seq", "tasks": [0, 1]}]


def test_bytes_that_do_not_parse_stay_opaque():
    bad = assignment(2, [("seq", [0])], [], 0)[:-3]
    assert assignment_json("connect", bad) == {"opaque": base64.b64encode(bad).decode()}
    assert subscription_json("connect", b"\xff\xff") == {"opaque": "//8="}  # version -1
    # the consumer protocol's reading is untouched
    assert "opaque" in subscription_json("other", b"\x00\x01")


def test_missing_v1_fields_take_their_defaults_and_a_truncated_allocation_stays_opaque():
    # ASSIGNMENT_V1 read with tolerateMissingFieldsWithDefaults: the lists may be absent too
    head = struct.pack(">hh", 1, 0) + string("L") + string("http://l/") + struct.pack(">q", 3)
    assert assignment_json("connect", head)["assigned"] == []
    # a null list (-1) reads as none
    assert assignment_json("connect", head + struct.pack(">i", -1))["assigned"] == []
    allocation = assignment(1, [("seq", [0])])[:-2]
    metadata = struct.pack(">h", 1) + string("http://w/") + struct.pack(">q", 0) + \
        struct.pack(">i", len(allocation)) + allocation
    assert "opaque" in subscription_json("connect", metadata)


def test_the_member_side_of_conform_does_not_read_connect_metadata_as_the_consumer_protocol():
    with pytest.raises(Uninterpretable, match="decoded"):
        _subscription_dict(subscription_json("connect", struct.pack(">h", 0) + string("http://w/")
                                             + struct.pack(">q", -1)))
