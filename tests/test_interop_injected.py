"""Every fault operation of impl/faults.py against a real client, librdkafka
(confluent-kafka), through ``rebalance.testing``'s ``kafka_cluster``: the
client's observed reaction to each, and the trace, faults included, holds to the
model (``rebalance conform``'s coordinator side). Interop: ``pytest -m interop
tests/test_interop_injected.py -s`` prints what each client did."""
import concurrent.futures
import json
import threading
import time

import pytest

from rebalance.checker.conform import run
from rebalance.checker.conform.coordinator import check
from rebalance.checker.conform.trace import parse

confluent_kafka = pytest.importorskip("confluent_kafka")
pytestmark = [pytest.mark.interop, pytest.mark.kafka_cluster(topics={"t": 4})]
GROUP = "app"


class Member:
    """A librdkafka consumer polled on a thread; its rebalance callbacks as events
    [(monotonic s, "assign"|"revoke"|"lost", partitions, member id)]."""

    def __init__(self, cluster, name: str, **conf):
        self.events, self.errors, self.stop, self.calls = [], [], threading.Event(), []
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "client.id": name,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 200, "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000, "socket.timeout.ms": 3000,
            "error_cb": lambda e: self.errors.append(str(e)), **conf})
        self.consumer.subscribe(["t"], on_assign=self._on("assign"), on_revoke=self._on("revoke"),
                                on_lost=self._on("lost"))
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _on(self, kind):
        def callback(consumer, partitions):
            self.events.append((time.monotonic(), kind, sorted(p.partition for p in partitions),
                                consumer.memberid()))
        return callback

    def _poll(self):
        while not self.stop.is_set():
            while self.calls:
                fn, done = self.calls.pop(0)
                try:
                    done.set_result(fn())
                except Exception as e:  # noqa: BLE001 - handed to the caller
                    done.set_exception(e)
            self.consumer.poll(0.05)

    def call(self, fn, timeout_s: float = 30):
        """``fn()`` on the polling thread: a consumer call from another thread while
        poll runs blocks (a synchronous commit was never sent, memberid() hung)."""
        done = concurrent.futures.Future()
        self.calls.append((fn, done))
        return done.result(timeout_s)

    def memberid(self) -> str:
        return self.call(self.consumer.memberid)

    def commit(self, partition: int, offset: int) -> str:
        """A synchronous commit; "NONE" or the error's name."""
        tp = confluent_kafka.TopicPartition("t", partition, offset)
        try:
            (result,) = self.call(lambda: self.consumer.commit(offsets=[tp], asynchronous=False))
            return result.error.name() if result.error else "NONE"
        except confluent_kafka.KafkaException as e:
            return e.args[0].name()

    def assigns(self) -> int:
        return sum(1 for e in self.events if e[1] == "assign")

    def close(self):
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def conforms(cluster) -> None:
    trace = cluster.trace()
    v = check(parse([json.dumps(r) + "\n" for r in trace]))
    assert v.status == "conforms", v
    print(f"trace: {len(trace)} records, {sum(r['type'] == 'fault' for r in trace)} faults, conforms "
          f"(rules {', '.join(sorted(v.rules))})")


@pytest.fixture
def member(kafka_cluster):
    m = Member(kafka_cluster, "c1")
    kafka_cluster.wait_for_stable(GROUP, members=1)
    wait(lambda: m.assigns() == 1, 10, "the first assignment")
    yield m
    m.close()


def test_librdkafka_recovers_from_not_coordinator(kafka_cluster, member):
    """The coordinator goes away for 2 s (NOT_COORDINATOR on group requests,
    COORDINATOR_NOT_AVAILABLE on FindCoordinator) and comes back: librdkafka looks
    the coordinator up again, keeps its membership (2 s < session.timeout.ms) and
    commits once it is back."""
    generation = kafka_cluster.describe(GROUP)["generation"]
    kafka_cluster.coordinator_away("NOT_COORDINATOR")
    time.sleep(2)
    kafka_cluster.coordinator_back()
    t0 = time.monotonic()
    assert member.commit(member.events[0][2][0], 1) == "NONE"
    recovered = time.monotonic() - t0
    trace = kafka_cluster.trace()
    refused = [r for r in trace if r.get("fault") == "error"]
    apis = sorted({r["api"] for r in refused})
    print(f"\nlibrdkafka: {len(refused)} requests refused while away ({', '.join(apis)}); "
          f"commit succeeded {recovered:.2f} s after the coordinator came back; errors seen: {member.errors}")
    assert "Heartbeat" in apis and "FindCoordinator" in apis  # it heartbeated, got NOT_COORDINATOR, looked again
    assert kafka_cluster.describe(GROUP)["generation"] == generation and member.assigns() == 1  # no rebalance
    conforms(kafka_cluster)
    # the member side takes the broker's NOT_COORDINATOR as a lost response (SPEC 10.2): a Heartbeat so answered
    # changes nothing, and librdkafka's next requests are the model member's (it was incomplete here before 81e941e)
    both = run.check(parse([json.dumps(r) + "\n" for r in kafka_cluster.trace()]), "both", {})
    assert both.status == "conforms", both


def test_librdkafka_rejoins_after_a_forced_rebalance_and_after_expiry(kafka_cluster, member):
    generation = kafka_cluster.describe(GROUP)["generation"]
    old_id = member.events[0][3]
    assert kafka_cluster.rebalance(GROUP) == "PreparingRebalance"
    kafka_cluster.wait_for_stable(GROUP, members=1)
    wait(lambda: kafka_cluster.describe(GROUP)["generation"] == generation + 1, 10, "the forced round")
    print(f"\nforced rebalance: generation {generation} -> {generation + 1}, "
          f"callbacks {[e[1] for e in member.events]}")
    assert member.memberid() == old_id  # the same member rejoined
    assert kafka_cluster.expire(old_id) is True
    wait(lambda: member.memberid() not in ("", old_id) and kafka_cluster.describe(GROUP)["state"] == "Stable"
         and kafka_cluster.describe(GROUP)["members"], 20, "a rejoin under a new member.id")
    kafka_cluster.wait_for_stable(GROUP, members=1)
    wait(lambda: member.events[-1][1] == "assign", 10, "the assignment after expiry")
    kinds = [e[1] for e in member.events]
    print(f"expiry: member.id {old_id[:12]}... -> {member.memberid()[:12]}..., callbacks {kinds}")
    assert "lost" in kinds or kinds.count("revoke") >= 2  # librdkafka gave up what it had (KIP-429's lost)
    conforms(kafka_cluster)


def test_librdkafka_under_injected_errors_delays_drops_and_a_pause(kafka_cluster, member):
    generation = kafka_cluster.describe(GROUP)["generation"]
    kafka_cluster.inject("Heartbeat", error="REBALANCE_IN_PROGRESS", count=1)
    kafka_cluster.inject("SyncGroup", delay_ms=1500, count=1)
    t0 = time.monotonic()
    wait(lambda: member.assigns() == 2, 20, "the round the injected error started")
    took = time.monotonic() - t0
    print(f"\nREBALANCE_IN_PROGRESS on a heartbeat: librdkafka rejoined, generation {generation} -> "
          f"{kafka_cluster.describe(GROUP)['generation']}; its SyncGroup delayed 1.5 s: assigned after {took:.2f} s")
    assert took >= 1.5 and kafka_cluster.describe(GROUP)["generation"] == generation + 1
    kafka_cluster.inject("OffsetCommit", drop=True, count=1)
    t0 = time.monotonic()
    outcome = member.commit(member.events[-1][2][0], 5)
    print(f"a dropped OffsetCommit response: librdkafka's commit ended {outcome} after {time.monotonic() - t0:.2f} s")
    assert any(r.get("fault") == "drop" for r in kafka_cluster.trace())
    kafka_cluster.pause()
    time.sleep(1)
    kafka_cluster.resume()
    wait(lambda: any(r.get("type") == "response" and r["api"] == "Heartbeat" for r in kafka_cluster.trace()
                     [[i for i, r in enumerate(kafka_cluster.trace()) if r.get("fault") == "resume"][0]:]),
         10, "a heartbeat answered after the resume")
    print(f"a 1 s pause: librdkafka stayed in generation {kafka_cluster.describe(GROUP)['generation']}")
    assert kafka_cluster.describe(GROUP)["generation"] == generation + 1 and member.assigns() == 2
    conforms(kafka_cluster)
