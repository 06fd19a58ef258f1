"""The application test a user of ``rebalance.testing`` writes (issue 19 item 5):
examples/app/app.py on librdkafka and kafka-python in one group against the
``kafka_cluster`` fixture; a rebalance forced mid-batch and a member expired;
no record lost, re-deliveries counted and printed.

It produces through serve's Produce API (issue 19 item 1); a serve without one
skips the test, saying so. ``pytest -m interop examples/app -s``."""
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from app import App  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")
pytestmark = [pytest.mark.interop, pytest.mark.kafka_cluster(topics={"orders": 4})]
RECORDS, GROUP, TOPIC = 400, "orders-app", "orders"


def produce(bootstrap: str) -> set:
    """RECORDS records to TOPIC; the (partition, offset)s acknowledged. Skips the test
    if serve has no Produce API yet."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    acked, errors = set(), []

    def delivered(err, msg):
        (errors.append(err.name()) if err else acked.add((msg.partition(), msg.offset())))
    for i in range(RECORDS):
        producer.produce(TOPIC, value=f"order-{i}".encode(), key=str(i).encode(), on_delivery=delivered)
    producer.flush(15)
    if errors and not acked:
        pytest.skip(f"serve has no Produce API yet (issue 19 item 1): the producer failed with {errors[0]}")
    assert not errors and len(acked) == RECORDS, errors[:3]
    return acked


def test_no_record_lost_under_a_forced_rebalance_and_an_expiry(kafka_cluster):
    produced = produce(kafka_cluster.bootstrap)
    sink, stop = [], threading.Event()
    apps = {"librdkafka": App("confluent", kafka_cluster.bootstrap, GROUP, TOPIC, "librdkafka", sink),
            "kafka-python": App("kafka-python", kafka_cluster.bootstrap, GROUP, TOPIC, "kafka-python", sink)}

    def run(app):
        while not stop.is_set():
            app.step()
            time.sleep(0.05)  # a slow application: a rebalance lands mid-batch
    threads = [threading.Thread(target=run, args=(a,), daemon=True) for a in apps.values()]
    for t in threads:
        t.start()
    try:
        kafka_cluster.wait_for_stable(GROUP, members=2)
        while len(sink) < RECORDS // 4:
            time.sleep(0.01)
        kafka_cluster.rebalance(GROUP)  # forced mid-batch (R56)
        while len(sink) < RECORDS // 2:
            time.sleep(0.01)
        victim = next(m["member_id"] for m in kafka_cluster.describe(GROUP)["members"]
                      if m["client_id"] == "kafka-python")
        kafka_cluster.expire(victim, GROUP)  # R11: its partitions go to the other member
        deadline = time.monotonic() + 60
        while {(p, o) for p, o, _ in sink} < produced and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for a in apps.values():
            a.close()
    seen = {(p, o) for p, o, _ in sink}
    redelivered = len(sink) - len(seen)
    print(f"\n{RECORDS} records, {len(sink)} processed, {redelivered} re-delivered; commits refused: "
          f"{ {name: a.failed_commits for name, a in apps.items()} }")
    assert produced <= seen, f"lost: {sorted(produced - seen)[:10]}"
