"""The member side of ``rebalance conform`` (checker/conform/members.py): traces
recorded by a real ``rebalance serve`` with our member runtime conform, and a
wrong member, run for real with a mutation, is caught naming the rule."""
import asyncio
import json
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from jsonschema import Draft202012Validator

from interop.harness import Group, Server, wait_for
from rebalance.checker.conform import members
from rebalance.checker.conform.verdict import CONFORMS, DIVERGENT, INCOMPLETE
from rebalance.impl.member import MemberRuntime
from rebalance.model.protocol import HeartbeatDue

ROOT = Path(__file__).resolve().parent.parent
VALIDATOR = Draft202012Validator(json.loads((ROOT / "spec" / "trace.schema.json").read_text()))
TOPIC, PARTITIONS = "t", 4


class Trace(NamedTuple):
    """Stand-in for checker/conform/trace.py's reader until it lands."""

    header: dict
    records: list


def read(path: Path) -> Trace:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for n, r in enumerate(lines, 1):
        assert not list(VALIDATOR.iter_errors(r)), f"line {n} is not schema-valid: {r}"
    return Trace(lines[0], list(enumerate(lines[1:], 2)))


async def wait_until(predicate, what: str, timeout: float = 15):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def join(bootstrap: str, name: str, **kw) -> MemberRuntime:
    m = MemberRuntime(bootstrap, "g", [TOPIC], client_id=name, heartbeat_ms=100, session_ms=1000, **kw)
    await m.start()
    return m


def settled(ms) -> bool:
    owned = [p for m in ms for p in m.owned]
    return len(owned) == PARTITIONS == len(set(owned)) and all(m.owned for m in ms)


def kill(m: MemberRuntime) -> None:
    """The process dies: no LeaveGroup, the socket just closes."""
    m._beat.cancel()
    m.wire.writer.transport.abort()


def recorded(tmp_path, scenario) -> Trace:
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    try:
        asyncio.run(scenario(f"127.0.0.1:{server.port}"))
        time.sleep(0.2)
    finally:
        server.stop()
    return read(server.trace)


@pytest.mark.spec("R13", "R16", "R18", "R20", "R23")
def test_real_members_conform(tmp_path):
    """Scale-up A, B, C; C closes gracefully; B is killed; A takes everything back."""
    async def scenario(bootstrap):
        a = await join(bootstrap, "A")
        await wait_until(lambda: settled([a]), "A to own everything")
        b = await join(bootstrap, "B")
        c = await join(bootstrap, "C")
        await wait_until(lambda: settled([a, b, c]), "A, B, C to share the partitions")
        await c.close()
        await wait_until(lambda: settled([a, b]), "A and B to share after C left")
        kill(b)
        await wait_until(lambda: settled([a]), "A to own everything after B died")
        await a.close()

    trace = recorded(tmp_path, scenario)
    verdict = members.check(trace, None)
    assert verdict.status == CONFORMS, verdict.divergence
    assert {"R13", "R16", "R18", "R20", "R23", "R10", "R8"} <= verdict.rules
    assert verdict.figures["clients"] == 3 and verdict.figures["leader_assignments"] >= 3
    assert verdict.records_checked > 20


@pytest.mark.spec("R15")
def test_kept_partitions_after_unknown_member_id_diverge(tmp_path):
    """KAFKA-12983, run for real: A (keep-owned-on-unknown-member-id) pauses past its
    session timeout, is answered UNKNOWN_MEMBER_ID, and rejoins still claiming."""
    async def scenario(bootstrap):
        a = await join(bootstrap, "A", mutations=("keep-owned-on-unknown-member-id",))
        b = await join(bootstrap, "B")
        await wait_until(lambda: settled([a, b]), "A and B to share")
        a._beat.cancel()  # a zombie: no heartbeats past session.timeout.ms
        await wait_until(lambda: settled([b]), "B to own everything")
        await a._step(HeartbeatDue())
        await wait_until(lambda: a.state.member_id and a.state.generation > 0, "A to rejoin")

    trace = recorded(tmp_path, scenario)
    verdict = members.check(trace, None)
    assert verdict.status == DIVERGENT
    d = verdict.divergence
    assert d.rule == "R15" and d.record["api"] == "JoinGroup" and d.record["body"]["member_id"] == ""
    assert d.expected == ("JoinGroup member_id='' group_instance_id=None owned_partitions=[] generation=-1",)
    assert any(r["type"] == "response" and r["body"].get("error") == "UNKNOWN_MEMBER_ID" for _, r in d.context)
    assert d.context[-1] == (d.line, d.record)


@pytest.mark.spec("R23")
def test_leader_assigning_a_claimed_partition_diverges(tmp_path):
    """assign-before-revoke, run for real: A, the leader, owns everything and hands
    B partitions A still claims in the same round."""
    async def scenario(bootstrap):
        a = await join(bootstrap, "A", mutations=("assign-before-revoke",))
        await wait_until(lambda: settled([a]), "A to own everything")
        b = await join(bootstrap, "B")
        await wait_until(lambda: b.owned, "B to be given partitions")

    trace = recorded(tmp_path, scenario)
    verdict = members.check(trace, None)
    assert verdict.status == DIVERGENT
    d = verdict.divergence
    assert d.rule == "R23" and d.record["api"] == "SyncGroup" and d.record["body"]["assignments"]
    assert "still owns it" in d.reason


@pytest.mark.interop
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_real_clients_conform(tmp_path, client):
    """librdkafka and kafka-python (cooperative-sticky, auto-commit) through a
    scale-up, a graceful close and a kill, as serve recorded them."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}")
    group = Group(server, "g", TOPIC, PARTITIONS)
    try:
        for name in "ABC":
            group.start(client, name)
        owned = group.wait_balanced()
        for name in "ABC":  # commit one partition each: OffsetCommit under its member.id and generation
            group.tell(name, f"commit {min(owned[name])} 1")
        wait_for(lambda: sum(e["event"] == "committed" for e in group.snapshot()) == 3, 30, "the commits")
        group.close("B")
        group.wait_balanced()
        group.kill9("C")
        group.wait_balanced(timeout=60)
    finally:
        group.stop_all()
        server.stop()
    verdict = members.check(read(server.trace), None)
    assert verdict.status == CONFORMS, verdict.divergence
    assert {"R13", "R16", "R18", "R20", "R23", "R10", "R41"} <= verdict.rules
