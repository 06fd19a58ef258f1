"""Kafka 4.4.0's own Java consumer (the oracle's agent, docs/java-agent.md) against
``rebalance serve``, where the other clients' interop tests do not take it: KIP-345
static membership. (Scale-up, pause past the session timeout and kill mid-rebalance,
cooperative-sticky and eager range: tests/test_interop_faults.py.) Every run is held
to the model on both sides: serve's trace with ``rebalance conform --side
coordinator`` and ``--side both`` (the Java client's requests against the model's
member), the agents' observed log with ``--side clients``. Run with ``pytest -m interop``;
the agent's KIP-848 mode runs on serve (``interop``) and on the real broker (``pytest -m kafka``)."""
import json
import subprocess
import time
from types import SimpleNamespace

import pytest

from interop.harness import Group, Server, conform, verdict_text, wait_for

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
        assert (code, verdicts[side]["verdict"]) == (0, "conforms"), verdict_text(verdicts[side])
    return verdicts


@pytest.mark.interop
def test_static_restart_within_the_session_and_a_duplicate_fenced(tmp_path):
    """Two static members (group.instance.id). (1) Each in turn is closed (a static
    member sends no LeaveGroup, KIP-345) and started again within its session: no
    rebalance, and it gets its partitions back (R25, R26). (2) A second process with
    A's group.instance.id takes A's place with A's partitions and no rebalance; the
    old process's next Heartbeat is answered FENCED_INSTANCE_ID (R24, R28) and its
    poll throws FencedInstanceIdException: it says so and exits 1. (3) The agent's
    ``pause`` and ``resume``: A2 stops fetching its partitions and starts again, its
    membership untouched. (4) ``close leave``: the static B leaves at once with a
    LeaveGroup (KIP-1092's CloseOptions), and the group rebalances onto A2."""
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
        group.start("java", "A2", instance_id="static-A", session_ms=SESSION_MS, args=("--consumed",))
        wait_for(lambda: old.poll() is not None, 30, "the fenced process to exit")
        assert old.returncode == 1 and group.fatal["A"][0].startswith("fatal FencedInstanceIdException"), group.fatal
        group.members.pop("A")
        assert group.wait_balanced()["A2"] == owned["A"]
        assert max(server.generations()) == generation, "the replacement rebalanced"

        produce(server.port, owned["A"])
        wait_for(lambda: consumed(group, "A2") == {(p, 0) for p in owned["A"]}, 30, "A2 to consume")
        group.tell("A2", "pause")
        time.sleep(0.5)
        produce(server.port, owned["A"])
        time.sleep(1.5)
        assert consumed(group, "A2") == {(p, 0) for p in owned["A"]}, "A2 fetched while paused"
        group.tell("A2", "resume")
        wait_for(lambda: len(consumed(group, "A2")) == 2 * len(owned["A"]), 30, "A2 to consume once resumed")

        group.tell("B", "close leave")
        assert group.members.pop("B").wait(30) == 0
        wait_for(lambda: group.owned().get("A2") == set(range(PARTITIONS)), 30, "A2 to take over B's partitions")
        assert max(server.generations()) == generation + 1
    finally:
        group.stop_all()
        server.stop()
    # the situation, from serve's trace: the old process was answered FENCED_INSTANCE_ID (R24)
    assert any("FENCED_INSTANCE_ID" in json.dumps(r["body"]) for r in server.records("response")
               if r["api"] in ("Heartbeat", "OffsetCommit"))
    assert [r["client_id"] for r in server.records("request") if r["api"] == "LeaveGroup"] == ["B"]
    # the replaced process keeps A's partitions until its next Heartbeat tells it (R28): when A2's
    # assignment comes first, A and A2 both own them, running, for up to a heartbeat interval
    # (conform's clients side reports that overlap as A replaced, not as double ownership: R28)
    verdicts = held_to_the_model(server, group)
    assert verdicts["both"]["figures"]["members"]["clients"] == 5  # A, B, their restarts, and A2 apart from A
    unpaused = [o for o in verdicts["clients"]["figures"]["exclusive_processing"] if not o["paused"]]
    assert all(o["replaced"] == ["A"] for o in unpaused), unpaused
    overlaps = group.double_ownership()
    assert all(d.endswith("assigned to A2 while A held it") for d in overlaps), overlaps


def produce(port: int, partitions) -> None:
    """One record into each of ``partitions`` of TOPIC (librdkafka)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
    for p in partitions:
        producer.produce(TOPIC, b"x", partition=p)
    assert producer.flush(10) == 0


def consumed(group: Group, name: str) -> set:
    """{(partition, offset)} of ``name``'s consumed records so far."""
    return {(e["partition"], e["offset"]) for e in group.snapshot() if e["member"] == name and e["event"] == "consumed"}


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


def share_and_close(group: Group) -> None:
    """Two agents with --group-protocol consumer (KIP-848) share the partitions (the
    coordinator's uniform assignor), close, and their observed log conforms."""
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


@pytest.mark.kafka
def test_consumer_protocol_on_kafka(kafka_broker, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "java-kip848"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    share_and_close(Group(SimpleNamespace(port=kafka_broker.port, tmp=tmp_path), topic, topic, PARTITIONS))


@pytest.mark.interop
def test_consumer_protocol_on_serve(tmp_path):
    """The same on serve, whose consumer group coordinator is the model's (docs/kip848.md, serve)."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", args=("--group-consumer-heartbeat-interval-ms", 300))
    try:
        share_and_close(Group(server, "java-kip848", TOPIC, PARTITIONS))
    finally:
        server.stop()


@pytest.mark.interop
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_poll_timeout_leaves_and_rejoins(tmp_path, static):
    """A member whose application stops polling past max.poll.interval.ms (2 s here): its
    heartbeat thread leaves the group (KIP-62; AbstractCoordinator.maybeLeaveGroup,
    AbstractCoordinator.java:1171, "consumer poll timeout has expired") and resets its
    member.id (:1183); when it polls again it loses its partitions and rejoins under a new
    member.id. Dynamic: it sent LeaveGroup, so the group rebalanced without it meanwhile.
    Static: it sends none (KIP-345), so its rejoin with its group.instance.id replaces
    itself and gets its partitions back without a rebalance (R25)."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}")
    group = Group(server, "g", TOPIC, PARTITIONS)
    try:
        for name in "AB":
            group.start("java", name, session_ms=SESSION_MS, args=("--max-poll-ms", 2000),
                        instance_id=f"static-{name}" if static else None)
        was = group.wait_balanced()
        generation = max(server.generations())
        stalled = group.snapshot()[-1]["t_ms"]
        group.tell("A", "stall 4000")
        if not static:
            wait_for(lambda: group.balanced_among(["B"]), 30, "B to take over from the stalled A")
        wait_for(lambda: any(e["member"] == "A" and e["event"] == "lost" and e["t_ms"] > stalled
                             for e in group.snapshot()), 30, "A to lose its partitions")
        owned = group.wait_balanced()
    finally:
        group.stop_all()
        server.stop()
    # the situation, from serve's trace: A left by its poll timeout (dynamic), and rejoined without its member.id
    leaves = [r["client_id"] for r in server.records("request") if r["api"] == "LeaveGroup"]
    assert leaves == ([] if static else ["A"]), leaves
    assert any(r["client_id"] == "A" and r["api"] == "JoinGroup" and r["body"]["member_id"] == ""
               and r["t_ms"] > stalled for r in server.records("request"))
    if static:
        assert owned == was and max(server.generations()) == generation
    verdicts = held_to_the_model(server, group)
    # dynamic: B is given A's partitions while A, stalled, still owns them (a zombie, reported)
    zombie = [o for o in verdicts["clients"]["figures"]["exclusive_processing"] if o["paused"] == ["A"]]
    assert bool(zombie) == (not static), verdicts["clients"]["figures"]["exclusive_processing"]
