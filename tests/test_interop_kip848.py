"""librdkafka (confluent-kafka) with ``group.protocol=consumer`` (KIP-848) against
``rebalance serve`` and, the same scenario, against the real Kafka 4.4.0 broker: two
consumers share a topic's four partitions, one leaves, the other is given them all. The
outcome must be the same on both; each run prints its times."""
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from interop.harness import Group, Server, conform, wait_for

SESSION_MS = 3000

# group.consumer.assignment.interval.ms 0: a new target at every group epoch bump, as the model computes it
# (Kafka 4.4.0's default, 1000 ms, holds a bump's target back up to a second: docs/kip848.md, serve)
# group.consumer.session.timeout.ms 3 s: the lifecycle's pause and kill are fenced within seconds
pytestmark = pytest.mark.kafka_broker(**{"group.consumer.heartbeat.interval.ms": 500,
                                         "group.consumer.min.heartbeat.interval.ms": 500,
                                         "group.consumer.assignment.interval.ms": 0,
                                         "group.consumer.min.session.timeout.ms": 1000,
                                         "group.consumer.session.timeout.ms": SESSION_MS})
PARTITIONS = [0, 1, 2, 3]


def consumer(bootstrap: str, group: str, name: str, topic: str, assignor: str | None = None):
    """``assignor``: group.remote.assignor, the server assignor it names (None: none, the broker's default)."""
    from confluent_kafka import Consumer

    remote = {"group.remote.assignor": assignor} if assignor else {}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "client.id": name, "enable.auto.commit": True, "auto.commit.interval.ms": 200, **remote})
    c.subscribe([topic])
    return c


def owned(c) -> list:
    return sorted(p.partition for p in c.assignment())


def poll_until(consumers, done, timeout_s: float, what: str) -> float:
    """Poll every consumer until ``done()``; the seconds it took."""
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < timeout_s, f"{what} within {timeout_s} s: " + \
            ", ".join(str(owned(c)) for c in consumers)
        for c in consumers:
            c.poll(0.05)
    return time.monotonic() - start


def described_assignor(bootstrap: str, group: str) -> str:
    """The server assignor the group uses, as ConsumerGroupDescribe answers it (AssignorName)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a dropped client fails its futures
    return admin.describe_consumer_groups([group])[group].result(20).partition_assignor


def share_then_leave(bootstrap: str, topic: str, group: str, assignor: str | None = None) -> dict:
    """A joins and takes every partition; B joins and they share them (disjoint, all four);
    B closes (a leave heartbeat, epoch -1) and A is given all four. Both name server
    assignor ``assignor`` (``consumer``). Returns the outcome (``shared``: each one's
    partitions then; ``assignor``: the one the group then used, ``described_assignor``) and
    the seconds each step took."""
    a = consumer(bootstrap, group, "A", topic, assignor)
    b = None
    try:
        alone = poll_until([a], lambda: owned(a) == PARTITIONS, 60, "A owning every partition")
        b = consumer(bootstrap, group, "B", topic, assignor)
        shared = poll_until([a, b], lambda: owned(a) and owned(b) and sorted(owned(a) + owned(b)) == PARTITIONS,
                            60, "A and B sharing the partitions")
        split, halves = (len(owned(a)), len(owned(b))), sorted((owned(a), owned(b)))
        used = described_assignor(bootstrap, group)
        b.close()
        b = None
        taken = poll_until([a], lambda: owned(a) == PARTITIONS, 60, "A owning every partition after B left")
        return {"split": split, "shared": halves, "assignor": used, "final": owned(a),
                "seconds": (round(alone, 2), round(shared, 2), round(taken, 2))}
    finally:
        for c in (a, b):
            if c is not None:
                c.close()


@pytest.mark.interop
def test_librdkafka_consumer_protocol_on_serve(tmp_path):
    server = Server(tmp_path, "kip848:4", initial_delay_ms=0, args=("--group-consumer-heartbeat-interval-ms", 500))
    try:
        out = share_then_leave(f"127.0.0.1:{server.port}", "kip848", "kip848-serve")
    finally:
        server.stop()
    print("serve", out)
    assert out["split"] == (2, 2) and out["final"] == PARTITIONS  # the uniform assignor: two each
    assert out["assignor"] == "uniform"  # none named: the default
    assert any("consumer group kip848-serve" in line for line in server.log)  # the model's coordinator decided


@pytest.mark.interop
def test_a_named_range_assignor_is_used_on_serve(tmp_path):
    """group.remote.assignor=range: the group uses the range assignor its members name (K16), as
    Kafka 4.4.0 does (group.consumer.assignors: uniform, range); serve refused it
    UNSUPPORTED_ASSIGNOR until 2026-11-30, and the consumers never got a partition."""
    server = Server(tmp_path, "kip848:4", initial_delay_ms=0, args=("--group-consumer-heartbeat-interval-ms", 500))
    try:
        out = share_then_leave(f"127.0.0.1:{server.port}", "kip848", "kip848-range-serve", "range")
    finally:
        server.stop()
    print("serve", out)
    assert (out["assignor"], out["shared"], out["final"]) == ("range", [[0, 1], [2, 3]], PARTITIONS)


@pytest.mark.kafka
def test_a_named_range_assignor_is_used_on_kafka(kafka_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("kip848-range", 4, 1)])["kip848-range"].result(20)
    out = share_then_leave(kafka_broker.bootstrap, "kip848-range", "kip848-range-kafka", "range")
    print("kafka", out)
    assert (out["assignor"], out["shared"], out["final"]) == ("range", [[0, 1], [2, 3]], PARTITIONS)  # as on serve


@pytest.mark.kafka
def test_librdkafka_consumer_protocol_on_kafka(kafka_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("kip848", 4, 1)])["kip848"].result(20)
    out = share_then_leave(kafka_broker.bootstrap, "kip848", "kip848-kafka")
    print("kafka", out)
    assert out["split"] == (2, 2) and out["final"] == PARTITIONS and out["assignor"] == "uniform"  # as on serve


@pytest.mark.kafka
def test_raw_heartbeats_get_the_same_answers_from_kafka(kafka_broker, tmp_path):
    """tests/test_serve_kip848.py's conversation of raw heartbeats, played on Kafka 4.4.0:
    every answer (error, member epoch, assignment) as serve's model gives it. Recorded by
    ``rebalance proxy`` (its trace kept as tests/kafka_traces/kip848_conversation.jsonl),
    and ``conform`` holds Kafka's every answer to the model's consumer group coordinator."""
    from catalogue.targets import RecordingProxy
    from confluent_kafka.admin import AdminClient, NewTopic
    from rebalance.checker.conform import coordinator
    from rebalance.checker.conform.trace import read
    from rebalance.model.timing import SessionBounds
    from test_serve import Client
    from test_serve_kip848 import CONVERSATION, conversation
    from rebalance.impl.wire import Api

    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("t", 4, 1)])["t"].result(20)
    m = Client(kafka_broker.port).call(Api.METADATA, 12, topics=[{"name": "t", "topic_id": None}],
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    tid = m.topics[0].topic_id
    coordinator_has_topic(kafka_broker.port, "t", "conversation")
    proxy = RecordingProxy(("127.0.0.1", kafka_broker.port), tmp_path / "kip848_conversation.jsonl", 0,
                           SessionBounds())
    try:
        got = conversation(proxy.port, tid, "conversation")
    finally:
        proxy.close()
    for line in got:
        print(line)
    assert got == CONVERSATION
    verdict = coordinator.check(read(proxy.trace))
    # every request and its answer, but the describe's, held at its answer alone (K17)
    assert verdict.status == "conforms" and verdict.records_checked == 2 * len(CONVERSATION) - 1, verdict
    assert "K17" in verdict.rules


def coordinator_has_topic(port: int, topic: str, group: str) -> None:
    """Wait until Kafka's group coordinator gives ``topic``'s partitions to a lone member of a
    warm-up group, which then leaves: its metadata image lags the Metadata a new topic is
    listed in, and a group joined before then is first given nothing (K5's divergence on a
    franz-go lifecycle, CI 2026-11-30). FindCoordinator (for ``group`` too) makes the broker
    create __consumer_offsets and its coordinator load."""
    from rebalance.impl.wire import Api
    from test_serve import Client

    end = time.monotonic() + 60
    w = Client(port)
    while True:
        found = w.call(Api.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["warm-up", group])
        r = None if any(c.error_code for c in found.coordinators) else w.call(
            Api.CONSUMER_GROUP_HEARTBEAT, 1, group_id="warm-up", member_id="W", member_epoch=0, instance_id=None,
            rack_id=None, rebalance_timeout=1000, subscribed_topic_names=[topic], subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[])
        if r is not None and r.error_code == 0 and r.assignment and r.assignment.topic_partitions:
            w.call(Api.CONSUMER_GROUP_HEARTBEAT, 1, group_id="warm-up", member_id="W", member_epoch=-1,
                   instance_id=None, rack_id=None, rebalance_timeout=-1, subscribed_topic_names=None,
                   subscribed_topic_regex=None, server_assignor=None, topic_partitions=None)
            return
        assert time.monotonic() < end, (found, r)
        time.sleep(0.2)


def lifecycle(client: str, upstream: tuple, topic: str, tmp) -> dict:
    """Three consumers of ``client`` (an agent kind, or ``KIND/ASSIGNOR``: naming that server
    assignor, ``--strategy``) with group.protocol=consumer through a recording proxy in
    front of ``upstream``: A and B share ``topic``'s six partitions, C joins (scale-up), C is
    stopped (SIGSTOP) past the session timeout and the others take its partitions, C resumes,
    is fenced and rejoins, B is killed (SIGKILL) and the others take its partitions, A and C
    close. Returns each side's conform verdict and the seconds each step took to settle."""
    from catalogue.targets import RecordingProxy
    from rebalance.model.timing import SessionBounds

    proxy = RecordingProxy(upstream, tmp / "proxy.jsonl", 0, SessionBounds(), SESSION_MS)  # serve records trace.jsonl
    group = Group(SimpleNamespace(port=proxy.port, tmp=tmp), f"{topic}-g", topic, 6)
    settled = {}

    def step(what: str, names, action=None):
        started = time.monotonic()
        if action is not None:
            action()
        wait_for(lambda: group.balanced_among(names), 60, f"{what}: {names} to balance; owned {group.owned()}")
        settled[what] = round(time.monotonic() - started, 1)
    try:
        client, _, assignor = client.partition("/")
        args = ("--group-protocol", "consumer", *(("--strategy", assignor) if assignor else ()))
        step("A and B share", ["A", "B"], lambda: [group.start(client, n, args=args) for n in "AB"])
        step("C joins", ["A", "B", "C"], lambda: group.start(client, "C", args=args))
        described = [describe(proxy.port, group.group)]
        step("C is stopped", ["A", "B"], lambda: group.pause("C"))
        step("C resumes", ["A", "B", "C"], lambda: group.resume("C"))
        step("B is killed", ["A", "C"], lambda: group.kill9("B"))
        described.append(describe(proxy.port, group.group))
        for name in "AC":
            group.close(name)
    finally:
        group.stop_all()
        proxy.close()
    return {"settled_s": settled, "described": described, "coordinator": conform("coordinator", proxy.trace)[1],
            "members": conform("members", proxy.trace)[1], "clients": conform("clients", group.observed)[1],
            "describe_records": sum('"api":"ConsumerGroupDescribe"' in line and '"type":"response"' in line
                                    for line in Path(proxy.trace).read_text().splitlines())}


def describe(port: int, group: str) -> dict:
    """The Admin API's describe of ``group`` through the proxy (librdkafka's
    describe_consumer_groups: ConsumerGroupDescribe for a consumer group), as the members and
    their assignments it gives."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    d = admin.describe_consumer_groups([group], request_timeout=20)[group].result(30)
    return {"type": str(d.type), "state": str(d.state),
            "members": sorted(sorted(tp.partition for tp in m.assignment.topic_partitions) for m in d.members)}


def _held(out: dict, client: str) -> None:
    print(out["settled_s"], out["described"], out["members"]["verdict"], out["members"]["figures"])
    # the Admin API's describes went out as ConsumerGroupDescribe, judged on the coordinator side
    assert out["describe_records"] == 2, out["described"]
    for side in ("coordinator", "clients"):
        assert out[side]["verdict"] == "conforms", out[side]
    assert {"K5", "K7", "K10"} <= set(out["coordinator"]["rules"])  # reconciled, fenced by a timer, sent
    # the member side: the model's client (K12-K15) replayed against what each client received
    assert {"K12", "K13", "K14"} <= set(out["members"]["rules"])
    if out["members"]["verdict"] != "conforms":  # the Java consumer's one departure, finding K-F4:
        # fenced, it auto-commits the partitions it lost at epoch -1 (docs/client-findings-on-kafka.md)
        d = out["members"]["divergence"]
        assert client == "java" and d["record"]["body"]["generation_id"] == -1, d
        assert {x["rule"] for x in out["members"]["divergences"]} == {"K11"}, out["members"]["divergences"]


@pytest.mark.interop
@pytest.mark.parametrize("client", ["confluent", "java", "franz-go/range"])
def test_lifecycle_conforms_on_serve(tmp_path, client):
    """librdkafka 2.16, the Java consumer 4.4.0 and franz-go 1.22 (naming the range server
    assignor, K16) with group.protocol=consumer on serve: scale-up, pause and kill, recorded by
    the proxy, conform on the coordinator, members and clients sides."""
    _held(on_serve(client, tmp_path), client)


def on_serve(client: str, tmp, scenario=None, topic: str = "life", partitions: int = 6) -> dict:
    """``scenario(client, upstream, topic, tmp)`` (``lifecycle`` by default; also
    test_migration_online's ``migration``) on ``rebalance serve``, with this module's broker's
    group.consumer settings and ``topic`` of ``partitions``."""
    server = Server(tmp, f"{topic}:{partitions}", initial_delay_ms=0,
                    args=("--group-consumer-heartbeat-interval-ms", 500, "--group-consumer-session-timeout-ms",
                          SESSION_MS))
    try:
        return (scenario or lifecycle)(client, ("127.0.0.1", server.port), topic, tmp)
    finally:
        server.stop()


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["confluent", "java", "franz-go/range"])
def test_lifecycle_conforms_on_kafka(kafka_broker, tmp_path, client):
    """The same on the real Kafka 4.4.0 broker (the topic listed by its Metadata before the
    proxy reads it: catalogue.targets.create_topic)."""
    from catalogue.targets import create_topic

    topic = f"life-{client.replace('/', '-')}"
    create_topic("127.0.0.1", kafka_broker.port, topic, 6)
    coordinator_has_topic(kafka_broker.port, topic, f"{topic}-g")
    _held(lifecycle(client, ("127.0.0.1", kafka_broker.port), topic, tmp_path), client)
