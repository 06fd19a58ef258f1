"""Helpers for the trace tests (spec/TRACE.md): reading and checking a trace,
``rebalance proxy`` in its own process, our members forming a group on real
sockets, and ``record_wrong_upstream``: a proxy's trace of a coordinator that
accepts a stale OffsetCommit."""
from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
from pathlib import Path

from jsonschema import Draft202012Validator

from interop.harness import REBALANCE, Server, wait_for
from rebalance.impl.member import MemberRuntime
from rebalance.impl.trace import Recorder
from rebalance.impl.wire import Api

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


def responses(records: list, api: str) -> list:
    return [r for r in records if r["type"] == "response" and r["api"] == api]


async def form_group(bootstrap: str, names, trace_dir: Path | None = None) -> list:
    """Our members (cooperative, 100 ms heartbeats) started one by one until the
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


def restart_serve(server) -> None:
    """kill -9 the coordinator and start it again on its store and trace, until it
    has written its ``restart`` record (R37; AssertionError after 30 s)."""
    before = len(server.records("restart"))
    server.kill9()
    server.start()
    wait_for(lambda: len(server.records("restart")) > before, 30, "the restart record")


async def hang_up(members) -> None:
    """Stop heartbeating and close each member's connection between two requests,
    so every request sent has had its response."""
    for m in members:
        async with m.lock:
            m._beat.cancel()
            m.wire.close()
    await asyncio.sleep(0.3)


class ProxyProcess:
    """``rebalance proxy`` in its own process on a free port, in front of ``upstream_port``
    (a ``Server``: group.min.session.timeout.ms ``Server.MIN_SESSION_MS``)."""

    def __init__(self, tmp: Path, upstream_port: int, initial_delay_ms: int = 0):
        self.trace = tmp / "proxy.jsonl"
        self.log: list = []
        self.proc = subprocess.Popen(
            [str(REBALANCE), "proxy", "--listen", "127.0.0.1:0", "--upstream", f"127.0.0.1:{upstream_port}",
             "--trace", str(self.trace), "--initial-delay-ms", str(initial_delay_ms),
             "--group-min-session-timeout-ms", str(Server.MIN_SESSION_MS)],
            stderr=subprocess.PIPE, text=True)
        threading.Thread(target=lambda: [self.log.append(line) for line in self.proc.stderr], daemon=True).start()
        line = wait_for(lambda: next((x for x in self.log if "listening on" in x), None), 30, "the proxy to listen")
        self.port = int(re.search(r"listening on [\d.]+:(\d+)", line).group(1))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        assert not any("Traceback" in line for line in self.log), "".join(self.log)


def record_wrong_upstream(tmp_path: Path, mutations=("no-commit-fencing",)) -> Path:
    """The proxy's trace of ``rebalance serve --mutation ...`` with our members
    A and B, in which A, after B's join moved the group to generation 3, commits
    t-0 with the generation it first joined in (1): a zombie's stale OffsetCommit,
    which a correct coordinator answers ILLEGAL_GENERATION (R28) and
    no-commit-fencing accepts (``mutations=()``: the correct coordinator). Returns the path of the proxy's trace."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0, mutations=mutations)
    proxy = ProxyProcess(tmp_path, server.port)
    try:
        async def run():
            a, b = await form_group(f"127.0.0.1:{proxy.port}", "AB")
            async with a.lock:
                await a.wire.call(Api.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=1,
                                  member_id=a.ids.member_names[a.state.member_id], group_instance_id=None,
                                  topics=[{"name": TOPIC, "partitions": [
                                      {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                       "committed_metadata": None}]}])
            await hang_up([a, b])
        asyncio.run(run())
    finally:
        proxy.stop()
        server.stop()
    return proxy.trace
