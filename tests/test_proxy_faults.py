"""``rebalance proxy``'s faults (impl/proxy.py, issue 38): a response delayed or dropped
on its way to one client, while the broker saw and answered the request; each recorded
as a ``fault`` record after the response as the broker gave it (spec/TRACE.md)."""
import asyncio
import json
import time

import pytest

from catalogue.targets import RecordingProxy
from interop.harness import Server
from rebalance.impl.faults import FaultError
from rebalance.impl.member import Wire
from rebalance.impl.wire import Api
from rebalance.model.timing import SessionBounds


def join(port: int, client: str, timeout: float):
    async def go():
        wire = await Wire.open("127.0.0.1", port, client)
        try:
            return await asyncio.wait_for(wire.call(
                Api.JOIN_GROUP, 5, group_id="g", session_timeout=6000, rebalance_timeout=6000, member_id="",
                group_instance_id=None, protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}]),
                timeout)
        finally:
            wire.close()
    return asyncio.run(go())


@pytest.fixture
def proxy(tmp_path):
    server = Server(tmp_path, "t:2")
    p = RecordingProxy(("127.0.0.1", server.port), tmp_path / "proxy.jsonl", 300, SessionBounds(100, 1_800_000))
    yield p
    p.close()
    server.stop()


def faults(p) -> list:
    return [json.loads(line) for line in p.trace.read_text().splitlines() if '"fault"' in line]


def test_a_dropped_response_never_reaches_its_client_but_is_recorded(proxy):
    proxy.inject("JoinGroup", drop=True, member="x", count=1)
    with pytest.raises(asyncio.TimeoutError):
        join(proxy.port, "x", 2)
    (fault,) = faults(proxy)
    assert fault["fault"] == "drop" and fault["api"] == "JoinGroup"
    answered = [json.loads(line) for line in proxy.trace.read_text().splitlines() if '"response"' in line
                and '"JoinGroup"' in line]
    assert answered, "the broker's answer is recorded though the client never got it"
    assert join(proxy.port, "x", 5).error_code.name == "member_id_required"  # count 1: the next one passes


def test_a_delayed_response_arrives_late_only_for_its_member(proxy):
    proxy.inject("JoinGroup", delay_ms=700, member="slow")
    started = time.monotonic()
    join(proxy.port, "fast", 5)
    assert time.monotonic() - started < 0.5
    started = time.monotonic()
    join(proxy.port, "slow", 5)
    assert time.monotonic() - started >= 0.7
    assert [f["fault"] for f in faults(proxy)] == ["delay"]


def test_the_proxy_refuses_to_answer_in_the_brokers_place(proxy):
    with pytest.raises(FaultError, match="broker's to give"):
        proxy.inject("Heartbeat", error="NOT_COORDINATOR")


def test_the_java_clients_apiversions_v5_passes_through_to_serve_and_is_capped(proxy):
    """kafka-clients 4.x asks ApiVersions v5: serve (v0-3) answers UNSUPPORTED_VERSION in
    v0's layout (KIP-511), which the proxy passes unchanged, and the retry's answer, which
    it caps. Read as v5, the KIP-511 answer reached the Java client garbled."""
    import socket

    from rebalance.impl.wire import read_response, request_frame

    def ask(s, version):
        frame = bytearray(request_frame(Api.API_VERSIONS, min(version, 4), 1, "java", {
            "client_software_name": "java", "client_software_version": "4.4.0"}))
        frame[6:8] = version.to_bytes(2, "big")  # v5 has v4's layout (kio has no v5)
        s.sendall(frame)
        size = int.from_bytes(s.recv(4), "big")
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
        return data
    with socket.create_connection(("127.0.0.1", proxy.port)) as s:
        refused = ask(s, 5)
        _, r = read_response(refused, Api.API_VERSIONS, 0)
        assert r.error_code.value == 35 and r.api_keys  # UNSUPPORTED_VERSION, with serve's versions
        _, r = read_response(ask(s, 3), Api.API_VERSIONS, 3)
        assert r.error_code.value == 0


def test_a_delayed_request_reaches_the_broker_late_and_a_dropped_one_never(proxy):
    proxy.inject("JoinGroup", delay_ms=700, member="slow", request=True, count=1)
    started = time.monotonic()
    join(proxy.port, "slow", 5)
    assert time.monotonic() - started >= 0.7
    proxy.inject("JoinGroup", drop=True, member="lost", request=True, count=1)
    with pytest.raises(asyncio.TimeoutError):
        join(proxy.port, "lost", 2)
    records = [json.loads(line) for line in proxy.trace.read_text().splitlines()[1:]]
    kinds = [r["fault"] for r in records if r["type"] == "fault"]
    assert kinds == ["delay_request", "drop_request"]
    asked = [r["client_id"] for r in records if r["type"] == "request"]
    assert asked == ["slow"]  # recorded as forwarded: the dropped one never was
    delayed = next(r for r in records if r["type"] == "fault")
    forwarded = next(r for r in records if r["type"] == "request")
    assert forwarded["t_ms"] - delayed["t_ms"] >= 700


def test_serve_refuses_request_faults():
    from rebalance.impl.faults import Injections
    with pytest.raises(FaultError, match="rebalance proxy"):
        Injections().inject("JoinGroup", delay_ms=100, request=True)
