"""Traces in format v2 (spec/TRACE.md), recorded by a real ``rebalance serve``
process and by our member runtime on real sockets: every line validates against
spec/trace.schema.json, and the records say what happened in Kafka's terms."""
import asyncio
import json
import re
import time
from pathlib import Path

from jsonschema import Draft202012Validator

from interop.harness import Server
from rebalance.impl.member import MemberRuntime
from rebalance.impl.trace import Recorder

ROOT = Path(__file__).resolve().parent.parent
VALIDATOR = Draft202012Validator(json.loads((ROOT / "spec" / "trace.schema.json").read_text()))
TOPIC, PARTITIONS = "t", 4


def read_trace(path: Path) -> list:
    """The records of a trace, each line checked against the schema and the rules
    TRACE.md adds: the header first and only there, t_ms never decreasing, every
    response after its request on the same connection, once."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for n, r in enumerate(records, 1):
        errors = [e.message for e in VALIDATOR.iter_errors(r)]
        assert not errors, f"{path.name} line {n}: {errors[:3]} in {r}"
    assert records[0]["type"] == "header" and all(r["type"] != "header" for r in records[1:])
    times = [r["t_ms"] for r in records[1:]]
    assert times == sorted(times), "t_ms went backwards"
    pending, opened = set(), set()
    for r in records[1:]:
        if r["type"] == "open":
            assert r["connection"] not in opened, "connection names are unique"
            opened.add(r["connection"])
        elif r["type"] in ("request", "response"):
            assert r["connection"] in opened
            key = (r["connection"], r["correlation_id"])
            if r["type"] == "request":
                pending.add(key)
            else:
                assert key in pending, f"a response without its request: {r}"
                pending.remove(key)
    return records


def group_records(records: list) -> dict:
    """{connection: [(type, api, correlation_id, body), ...]} of its group requests and responses."""
    out: dict = {}
    for r in records:
        if r["type"] in ("request", "response"):
            out.setdefault(r["connection"], []).append((r["type"], r["api"], r["correlation_id"], r["body"]))
    return out


async def form_group(bootstrap: str, names, trace_dir: Path | None = None) -> list:
    """Our members (cooperative, 100 ms heartbeats) joined one by one until the
    group owns every partition, each member some."""
    members = []
    for name in names:
        trace = Recorder(trace_dir / f"{name}.jsonl", "member") if trace_dir else None
        m = MemberRuntime(bootstrap, "g", [TOPIC], client_id=name, heartbeat_ms=100, trace=trace)
        await m.start()
        members.append(m)
    end = time.monotonic() + 15
    while time.monotonic() < end:
        owned = [m.owned for m in members]
        if all(owned) and sum(map(len, owned)) == PARTITIONS:
            return members
        await asyncio.sleep(0.1)
    raise AssertionError(f"the group did not form: {[m.owned for m in members]}")


def joined_ids(records: list) -> set:
    return {r["body"]["member_id"] for r in records if r["type"] == "response" and r["api"] == "JoinGroup"
            and r["body"]["error"] in ("NONE", "MEMBER_ID_REQUIRED")}


def test_serve_and_member_traces(tmp_path):
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    try:
        async def run():
            members = await form_group(f"127.0.0.1:{server.port}", "AB", tmp_path)
            return members, {m.client_id: set(m.names.values()) - {""} for m in members}
        members, known = asyncio.run(run())
        server.kill9()  # the members are still in the group: the store keeps it
        server.start()
        wait_ms = time.monotonic() + 5
        while time.monotonic() < wait_ms and "restart" not in server.trace.read_text():
            time.sleep(0.1)
    finally:
        server.stop()

    records = read_trace(server.trace)
    header = records[0]
    assert header["recorder"] == "serve" and header["settings"] == {
        "topics": [{"name": TOPIC, "partitions": PARTITIONS}], "group_initial_rebalance_delay_ms": 0,
        "mutations": []}
    restarts = [r for r in records if r["type"] == "restart"]
    assert [r["groups"] for r in restarts] == [["g"]]

    # member ids are the Kafka strings serve handed out: client.id, "-", a UUID
    ids = joined_ids(records)
    assert {i.rsplit("-", 5)[0] for i in ids} == {"A", "B"}
    assert all(re.fullmatch(r"[AB]-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", i) for i in ids)
    assert set().union(*known.values()) <= ids
    used = {r["body"]["member_id"] for r in records if r["type"] == "request" and r["api"] != "JoinGroup"}
    assert used <= ids
    ok = [r for r in records if r["type"] == "response" and r["api"] == "JoinGroup" and r["body"]["error"] == "NONE"]
    assert [r["body"]["generation_id"] for r in ok][-2:] == [3, 3]  # B's join: a revoking round, then the follow-up
    assigned = [r["body"]["assignment"] for r in records if r["type"] == "response" and r["api"] == "SyncGroup"]
    assert all(a is None or a["version"] >= 0 for a in assigned)
    assert any(a and a["assigned_partitions"] for a in assigned)
    assert Server.generations(server) == [r["body"]["generation_id"] for r in ok]

    # each member's own trace is what serve recorded on that connection, record for record
    serve_connections = group_records(records)
    for name in "AB":
        mine = read_trace(tmp_path / f"{name}.jsonl")
        assert mine[0]["recorder"] == "member"
        (conn, seen), = group_records(mine).items()
        assert seen in serve_connections.values(), f"{name}'s records differ from serve's"
