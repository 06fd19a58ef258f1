"""rebalance conform on traces recorded by real processes: ``rebalance serve
--trace`` with our members on real sockets (killed with SIGKILL and started again
on its store and trace: a restart record, R37), and ``rebalance proxy`` in front
of a serve whose coordinator accepts a stale OffsetCommit."""
import asyncio
import json
import subprocess
import time

import pytest

from interop.harness import REBALANCE, Server, wait_until
from traces import PARTITIONS, TOPIC, form_group, hang_up, record_wrong_upstream, restart_serve


def _conform(path, tmp_path):
    run = subprocess.run([str(REBALANCE), "conform", str(path), "--json", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, json.loads(run.stdout)


def test_serve_trace_with_our_members_conforms(tmp_path):
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    try:
        async def run():
            members = await form_group(f"127.0.0.1:{server.port}", "ABC")
            await asyncio.sleep(1.0)  # heartbeats and commits in a Stable group
            await members[2].close()  # LeaveGroup: the others rebalance (R7)
            end = time.monotonic() + 10
            while time.monotonic() < end and sum(len(m.owned) for m in members[:2]) != PARTITIONS:
                await asyncio.sleep(0.1)
            await hang_up(members[:2])
        asyncio.run(run())
        restart_serve(server)  # the group is in the store (R37)
    finally:
        server.stop()
    code, doc = _conform(server.trace, tmp_path)
    assert code == 0, doc
    assert doc["verdict"] == "conforms" and doc["records_checked"] > 20
    assert {"R2", "R4", "R7", "R8", "R10", "R37"} <= set(doc["rules"])


@pytest.mark.slow  # 9 s on an idle 2-core machine: in CI by its subset (.ci/slow)
def test_proxy_trace_of_a_wrong_coordinator_diverges(tmp_path):
    for name in ("wrong", "right"):
        (tmp_path / name).mkdir()
    code, doc = _conform(record_wrong_upstream(tmp_path / "wrong"), tmp_path)
    assert code == 1, doc
    d = doc["divergence"]
    assert d["rule"] == "R9" and d["record"]["api"] == "OffsetCommit"
    assert d["expected"] == ["OffsetCommit ILLEGAL_GENERATION"]
    assert (tmp_path / "out" / "conform-proxy.svg").exists()
    code, doc = _conform(record_wrong_upstream(tmp_path / "right", mutations=()), tmp_path)
    assert code == 0, doc


def test_a_refused_session_timeout_conforms_and_an_accepted_one_diverges(tmp_path):
    """R42 both ways: serve (Kafka's bounds) refuses session.timeout.ms = 2**31-1 and the
    trace conforms; the same trace under a header claiming the broker's bounds
    allow it diverges at that response, naming R42."""
    from test_serve import Client
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    try:
        c = Client(server.port, "greedy")
        r = c.call(11, 9, group_id="g", session_timeout=2**31 - 1, rebalance_timeout=10_000, member_id="",
                   group_instance_id=None, protocol_type="consumer",
                   protocols=[{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"}], reason=None)
        assert r.error_code == 26
        assert c.join("g").error_code == 79  # within bounds: MEMBER_ID_REQUIRED (R36)
    finally:
        server.stop()
    code, doc = _conform(server.trace, tmp_path)
    assert code == 0 and "R42" in doc["rules"], doc
    lines = server.trace.read_text().splitlines()
    header = json.loads(lines[0])
    header["settings"]["group_max_session_timeout_ms"] = 2**31 - 1
    lenient = tmp_path / "lenient.jsonl"
    lenient.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    code, doc = _conform(lenient, tmp_path)
    assert code == 1 and doc["divergence"]["rule"] == "R42", doc


@pytest.mark.spec("R43")
def test_a_group_that_expired_and_formed_again_conforms(tmp_path):
    """serve removes an Empty group at its retention check and records ``expire``; the
    group formed again starts at generation 1 and conform starts it over (R43).
    Without the record the model carries the old group on and diverges; an
    ``expire`` of a group the model has Stable diverges naming R43."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0,
                    args=("--offsets-retention-ms", 1, "--offsets-retention-check-interval-ms", 300))
    try:
        async def run():
            for k in range(1, 3):
                members = await form_group(f"127.0.0.1:{server.port}", "A")
                await members[0].close()  # LeaveGroup: Empty
                await wait_until(lambda: len(server.records("expire")) >= k, "a retention check to remove it", 30)
        asyncio.run(run())
    finally:
        server.stop()
    lines = server.trace.read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert [r["groups"] for r in records if r["type"] == "expire"] == [["g"], ["g"]]
    assert server.generations() == [1, 1]
    code, doc = _conform(server.trace, tmp_path)
    assert code == 0 and "R43" in doc["rules"], doc
    without = tmp_path / "without.jsonl"
    without.write_text("".join(x + "\n" for x, r in zip(lines, records) if r["type"] != "expire"))
    code, doc = _conform(without, tmp_path)
    assert code == 1 and doc["divergence"]["record"]["api"] == "JoinGroup", doc
    early = tmp_path / "early.jsonl"  # the first group's expiry moved to just after its SyncGroup
    sync = next(i for i, r in enumerate(records) if r.get("api") == "SyncGroup" and r["type"] == "response")
    moved = [x for x, r in zip(lines, records) if r["type"] != "expire"]
    moved.insert(sync + 1, json.dumps({"type": "expire", "t_ms": records[sync]["t_ms"], "groups": ["g"]}))
    early.write_text("".join(x + "\n" for x in moved))
    code, doc = _conform(early, tmp_path)
    assert code == 1 and doc["divergence"]["rule"] == "R43", doc


def test_commits_to_partitions_serve_does_not_host_conform(tmp_path):
    """KafkaApis.handleOffsetCommitRequest answers UNKNOWN_TOPIC_OR_PARTITION for the
    partitions the broker does not host before the group coordinator sees the request;
    the rest get the coordinator's one answer (R9). conform judges both the same way:
    a request mixing hosted and unhosted partitions, one with only unhosted ones (the
    model never sees it, so even a stale generation is not ILLEGAL_GENERATION), conform."""
    from test_serve import Api, stable_member

    def part(i):
        return {"partition_index": i, "committed_offset": 5, "committed_leader_epoch": -1, "committed_metadata": None}

    server = Server(tmp_path, "t:4", initial_delay_ms=0)
    try:
        member, mid, generation = stable_member(server.port)
        for gen, topics in ((generation, [{"name": "t", "partitions": [part(1), part(9)]},
                                          {"name": "nope", "partitions": [part(0)]}]),
                            (generation + 7, [{"name": "nope", "partitions": [part(0)]}])):
            r = member.call(Api.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=gen, member_id=mid,
                            group_instance_id=None, topics=topics)
            assert all(p.error_code in (0, 3) for t in r.topics for p in t.partitions)
    finally:
        server.stop()
    code, doc = _conform(server.trace, tmp_path)
    assert code == 0, doc
    # a broker that stored the unhosted partition, or refused the hosted one, diverges there
    for wrong, right in (('"partition":0,"error":"UNKNOWN_TOPIC_OR_PARTITION"', '"partition":0,"error":"NONE"'),
                         ('"partition":1,"error":"NONE"', '"partition":1,"error":"UNKNOWN_TOPIC_OR_PARTITION"')):
        text = server.trace.read_text()
        assert wrong in text
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text.replace(wrong, right, 1))
        code, doc = _conform(bad, tmp_path)
        assert code == 1 and doc["divergence"]["record"]["api"] == "OffsetCommit", doc
