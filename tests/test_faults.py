"""Fault injection (issue 19 item 3) on real sockets: each operation of
impl/faults.py through ``rebalance.testing.Cluster`` (in-process) or ``rebalance
ctl`` against a ``rebalance serve`` subprocess, seen by a raw wire client
(tests/test_serve.py's Client); the trace with its ``fault`` records conforms,
and a trace whose fault layer left its faults unrecorded diverges."""
import json
import socket
import threading
import time

import pytest

from conftest import run_cli
from rebalance.checker.conform.coordinator import check
from rebalance.checker.conform.trace import parse
from rebalance.impl.wire import Api
from rebalance.testing import Cluster, FaultError
from test_serve import Client, stable_member

NONE, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE = 0, 16, 15
REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID = 27, 25


@pytest.fixture
def cluster():
    with Cluster({"t": 4}) as c:
        yield c


def heartbeat(client, member_id, generation):
    return client.call(Api.HEARTBEAT, 4, group_id="g", generation_id=generation, member_id=member_id,
                       group_instance_id=None).error_code


def verdict(records, drop=lambda r: False):
    """The coordinator side's verdict on ``records`` (less those ``drop`` picks)."""
    lines = [json.dumps(r) + "\n" for r in records if not drop(r)]
    return check(parse(lines))


@pytest.mark.spec("R11", "R56")
def test_injected_faults_conform_and_unrecorded_ones_diverge(cluster):
    client, mid, generation = stable_member(cluster.port)
    cluster.inject("Heartbeat", error="NOT_COORDINATOR", count=2)
    assert [heartbeat(client, mid, generation) for _ in range(3)] == [NOT_COORDINATOR, NOT_COORDINATOR, NONE]
    assert cluster.rebalance("g") == "PreparingRebalance"
    assert heartbeat(client, mid, generation) == REBALANCE_IN_PROGRESS  # R56, then R10
    r = client.join("g", mid)
    assert r.error_code == NONE and r.generation_id == generation + 1
    client.call(Api.SYNC_GROUP, 5, group_id="g", generation_id=r.generation_id, member_id=mid,
                group_instance_id=None, protocol_type="consumer", protocol_name="range",
                assignments=[{"member_id": mid, "assignment": b"all of it"}])
    assert cluster.expire(mid) is True
    assert heartbeat(client, mid, r.generation_id) == UNKNOWN_MEMBER_ID  # R11
    trace = cluster.trace()
    faults = [r["fault"] for r in trace if r["type"] == "fault"]
    assert faults == ["error", "error", "rebalance", "expire"]
    v = verdict(trace)
    assert v.status == "conforms" and {"R11", "R56"} <= v.rules, v
    # a fault layer that did not record its faults: each is a divergence, naming the rule
    for kind, rule in (("error", "R10"), ("rebalance", "R10"), ("expire", "R10")):
        v = verdict(trace, lambda r: r.get("fault") == kind)
        assert v.status == "divergent" and v.divergence.rule == rule, (kind, v)


def test_delay_and_drop_for_one_member_leave_the_others_alone(cluster):
    client, mid, generation = stable_member(cluster.port)
    other = Client(cluster.port, "other")
    cluster.inject("Heartbeat", delay_ms=400, member=mid, count=1)
    t0 = time.monotonic()
    assert heartbeat(client, mid, generation) == NONE
    delayed = time.monotonic() - t0
    t0 = time.monotonic()
    assert heartbeat(other, "nobody", generation) == UNKNOWN_MEMBER_ID  # another member: not delayed
    assert delayed >= 0.4 > time.monotonic() - t0
    cluster.inject("Heartbeat", drop=True, member="raw-dropped", for_ms=60_000)  # by client.id
    dropped = Client(cluster.port, "raw-dropped")
    dropped.sock.settimeout(1)
    with pytest.raises(socket.timeout):
        heartbeat(dropped, mid, generation)
    assert heartbeat(client, mid, generation) == NONE
    assert [r["fault"] for r in cluster.trace() if r["type"] == "fault"] == ["delay", "drop"]
    assert verdict(cluster.trace()).status == "conforms"  # the dropped response is the model's: recorded as given


def test_coordinator_away_and_back(cluster):
    client, mid, generation = stable_member(cluster.port)
    cluster.coordinator_away("NOT_COORDINATOR")
    found = client.call(Api.FIND_COORDINATOR, 3, key="g", key_type=0)
    assert found.error_code == COORDINATOR_NOT_AVAILABLE
    assert heartbeat(client, mid, generation) == NOT_COORDINATOR
    cluster.coordinator_back()
    assert client.call(Api.FIND_COORDINATOR, 3, key="g", key_type=0).error_code == NONE
    assert heartbeat(client, mid, generation) == NONE
    assert verdict(cluster.trace()).status == "conforms"


def test_pause_holds_requests_until_resume(cluster):
    client, mid, generation = stable_member(cluster.port)
    cluster.pause()
    answers = []
    beat = threading.Thread(target=lambda: answers.append(heartbeat(client, mid, generation)))
    beat.start()
    time.sleep(0.5)
    assert answers == [] and cluster.status()["paused"]  # held
    cluster.resume()
    beat.join(5)
    assert answers == [NONE]
    assert [r["fault"] for r in cluster.trace() if r["type"] == "fault"] == ["pause", "resume"]


def test_bad_fault_input_is_refused_by_name(cluster):
    stable_member(cluster.port)
    for call, message in ((lambda: cluster.inject("Produce!", error="NOT_COORDINATOR"), "unknown API"),
                          (lambda: cluster.inject("Heartbeat", error="NO_SUCH_ERROR"), "unknown error"),
                          (lambda: cluster.inject("Heartbeat", error=16, drop=True), "exactly one"),
                          (lambda: cluster.inject("Metadata", error=16), "cannot inject an error"),
                          (lambda: cluster.expire("nobody", "g"), "no member"),
                          (lambda: cluster.rebalance("nogroup"), "no group")):
        with pytest.raises(FaultError, match=message):
            call()


def test_ctl_against_a_serve_subprocess(tmp_path):
    # a minute's session and rebalance timeouts: five `rebalance ctl` processes run between the steps, and an
    # injected heartbeat error does not reach the group (its session goes on running down)
    with Cluster({"t": 4}, subprocess=True) as cluster:
        client, mid, generation = stable_member(cluster.port, 60_000)
        ctl = ("ctl", "--control", cluster.control_address, "--json")
        code, out, err = run_cli(*ctl, "inject", "Heartbeat", "--error", "REBALANCE_IN_PROGRESS", "--count", "1")
        assert code == 0 and json.loads(out)["error"] == "REBALANCE_IN_PROGRESS", err
        assert heartbeat(client, mid, generation) == REBALANCE_IN_PROGRESS
        code, out, _ = run_cli(*ctl, "status")
        assert code == 0 and json.loads(out)["groups"]["g"]["state"] == "Stable"
        joiner = Client(cluster.port, "joiner")  # a second member, held at the JoinGroup barrier (R4)
        jid = joiner.join("g", timeout_ms=60_000).member_id
        held = threading.Thread(target=lambda: joiner.join("g", jid, 60_000), daemon=True)
        held.start()
        time.sleep(0.3)
        code, out, err = run_cli(*ctl, "expire", "g", jid)  # a barrier keeps it (R11): done, without effect, 1
        assert code == 1 and json.loads(out) == {"expired": False}, err
        code, out, err = run_cli(*ctl, "expire", "g", mid)
        assert code == 0 and json.loads(out) == {"expired": True}
        assert heartbeat(client, mid, generation) == UNKNOWN_MEMBER_ID
        code, out, err = run_cli(*ctl, "inject", "Nope", "--drop")  # bad input: 2, named, no traceback
        assert code == 2 and "unknown API 'Nope'" in json.loads(out)["error"]["message"] and "Traceback" not in err
        address = cluster.control_address
    code, out, err = run_cli("ctl", "--control", address, "--json", "pause")  # nothing answers: 3
    assert code == 3 and "no control endpoint" in json.loads(out)["error"]["message"]


def test_the_pytest_plugin_gives_a_kafka_cluster(kafka_cluster):
    client, mid, _ = stable_member(kafka_cluster.port)
    assert kafka_cluster.wait_for_stable("g", members=1) == {mid: []}  # an opaque assignment holds no partitions


@pytest.mark.spec("R9")
def test_a_coordinator_without_commit_fencing_is_caught_in_a_trace_with_faults():
    """The expiry is the model's; the commit the expired member then gets accepted
    (mutation no-commit-fencing) is not: conform names R9."""
    with Cluster({"t": 4}, mutations=("no-commit-fencing",)) as cluster:
        client, mid, generation = stable_member(cluster.port)
        assert cluster.expire(mid) is True
        r = client.call(Api.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation, member_id=mid,
                        group_instance_id=None, topics=[{"name": "t", "partitions": [
                            {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                             "committed_metadata": ""}]}])
        assert r.topics[0].partitions[0].error_code == NONE  # the mutated coordinator accepts it
        v = verdict(cluster.trace())
    assert v.status == "divergent" and v.divergence.rule == "R9", v
