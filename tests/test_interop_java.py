"""Kafka 4.4.0's own Java consumer (the oracle's agent, docs/java-agent.md) against
``rebalance serve``, where the other clients' interop tests do not take it: KIP-345
static membership. (Scale-up, pause past the session timeout and kill mid-rebalance,
cooperative-sticky and eager range: tests/test_interop_faults.py.) Every run is held
to the model on both sides: serve's trace with ``rebalance conform --side
coordinator`` and ``--side both`` (the Java client's requests against the model's
member), the agents' observed log with ``--side clients``. Run with ``pytest -m interop``;
the agent's KIP-848 mode runs on the real broker (``pytest -m kafka``)."""
import json
import subprocess
import time
from types import SimpleNamespace

import pytest

from interop.harness import Group, Server, conform, wait_for

TOPIC, PARTITIONS = "t", 6
SESSION_MS = 6000
# the real broker's (test_consumer_protocol_on_kafka): KIP-848 members heartbeat at the broker's interval (5 s by default)
pytestmark = pytest.mark.kafka_broker(**{"group.consumer.min.heartbeat.interval.ms": 300,
                                        "group.consumer.heartbeat.interval.ms": 300})


def held_to_the_model(server: Server, group: Group) -> dict:
    """Every side's verdict, each asserted to conform; {side: verdict}."""
    verdicts = {}
    for side, path in (("coordinator", server.trace), ("both", server.trace), ("clients", group.observed)):
        code, verdicts[side] = conform(side, path)
        assert (code, verdicts[side]["verdict"]) == (0, "conforms"), (side, verdicts[side])
    return verdicts


@pytest.mark.interop
def test_static_restart_within_the_session_and_a_duplicate_fenced(tmp_path):
    """Two static members (group.instance.id). (1) Each in turn is closed (a static
    member sends no LeaveGroup, KIP-345) and started again within its session: no
    rebalance, and it gets its partitions back (R25, R26). (2) A second process with
    A's group.instance.id takes A's place with A's partitions and no rebalance; the
    old process's next Heartbeat is answered FENCED_INSTANCE_ID (R24, R28) and its
    poll throws FencedInstanceIdException: it says so and exits 1."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}")
    group = Group(server, "g", TOPIC, PARTITIONS)
    try:
        for name in "AB":
            group.start("java", name, instance_id=f"static-{name}", session_ms=SESSION_MS)
        owned = group.wait_balanced()
        generation = max(server.generations())
        for name in "AB":
            group.close(name)
            group.start("java", name, instance_id=f"static-{name}", session_ms=SESSION_MS)
            time.sleep(0.5)
            assert group.wait_balanced()[name] == owned[name]
        assert max(server.generations()) == generation, "a static restart within the session rebalanced"

        old = group.members["A"]
        group.start("java", "A2", instance_id="static-A", session_ms=SESSION_MS)
        wait_for(lambda: old.poll() is not None, 30, "the fenced process to exit")
        assert old.returncode == 1 and group.fatal["A"][0].startswith("fatal FencedInstanceIdException"), group.fatal
        group.members.pop("A")
        assert group.wait_balanced()["A2"] == owned["A"]
        assert max(server.generations()) == generation, "the replacement rebalanced"
    finally:
        group.stop_all()
        server.stop()
    # the situation, from serve's trace: the old process was answered FENCED_INSTANCE_ID (R24)
    assert any("FENCED_INSTANCE_ID" in json.dumps(r["body"]) for r in server.records("response")
               if r["api"] in ("Heartbeat", "OffsetCommit"))
    verdicts = held_to_the_model(server, group)
    assert verdicts["both"]["figures"]["members"]["clients"] == 5  # A, B, their restarts, and A2 apart from A
    # the replaced process keeps A's partitions until its next Heartbeat tells it (a zombie's window, R28)
    overlaps = group.double_ownership()
    assert all(d.endswith("assigned to A2 while A held it") for d in overlaps), overlaps


@pytest.mark.interop
@pytest.mark.parametrize("args, problem", [
    (["--strategy", "uniform"], "argument --strategy: uniform (classic protocol)"),
    (["--group-protocol", "consumer", "--strategy", "cooperative-sticky"], "group.remote.assignor"),
    (["--session-ms", "soon"], "--session-ms"),
])
def test_bad_arguments_exit_2(args, problem):
    from rebalance.oracle.agent import command

    p = subprocess.run([*command(), "A", "--bootstrap", "127.0.0.1:1", "--group", "g", "--topic", TOPIC, *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and problem in " ".join(p.stderr.split()) and p.stdout == "", p.stderr


@pytest.mark.kafka
def test_consumer_protocol_on_kafka(kafka_broker, tmp_path):
    """--group-protocol consumer (KIP-848) on the real broker, which serve does not speak
    yet: two agents share the partitions (the broker's uniform assignor), close, and their
    observed log conforms."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "java-kip848"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    group = Group(SimpleNamespace(port=kafka_broker.port, tmp=tmp_path), topic, topic, PARTITIONS)
    try:
        for name in "AB":
            group.start("java", name, args=("--group-protocol", "consumer"))
        owned = group.wait_balanced()
        assert sorted(map(len, owned.values())) == [3, 3]
        for name in "AB":
            group.close(name)
    finally:
        group.stop_all()
    code, verdict = conform("clients", group.observed)
    assert (code, verdict["verdict"]) == (0, "conforms"), verdict
