"""``rebalance serve`` as a test double: how fast it starts and how fast records flow.

``startup()``: from the fixture's call (``rebalance.testing.Cluster(...)``, what the
``kafka_cluster`` fixture does) to librdkafka's first successful Metadata response
(``list_topics`` of one topic), in-process or as a ``rebalance serve``
subprocess, in seconds per run. Goal: well under 1 s.

``kafka_startup()``: the same for the real Kafka 4.4.0 broker the tests use as the
oracle (rebalance.testing.KafkaBroker), beside serve's.

``throughput()``: Produce and Fetch records per second for 1 KB records, on
loopback, ``rebalance serve`` in its own process (its default temporary store) and
librdkafka (confluent-kafka) in this one: a producer sends ``--records``
records (acks=all, no compression, linger 5 ms) and waits for every delivery
report; then a consumer in a new group reads them all back from the earliest
offset. Each figure is records over the wall seconds from the first send (or
the consumer's first poll) to the last delivery report (or record), so the
consumer's figure includes its group join.

Usage: python benchmarks/startup.py [--runs 10] [--records 100000]
"""
from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REBALANCE = Path(sys.executable).parent / "rebalance"
RECORD_BYTES = 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def startup(subprocess: bool = False, runs: int = 10) -> list:
    """``runs`` times (s) from ``Cluster({"t": 4})`` to librdkafka's first Metadata
    response naming topic t (see the module docstring)."""
    from confluent_kafka.admin import AdminClient

    from rebalance.testing import Cluster
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        with Cluster({"t": 4}, subprocess=subprocess, trace=False) as cluster:
            metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("t", timeout=10)
            times.append(time.perf_counter() - t0)
            assert len(metadata.topics["t"].partitions) == 4
    return times


def kafka_startup(runs: int = 3) -> list:
    """``runs`` times (s) from ``KafkaBroker()`` (the oracle's real Kafka 4.4.0: storage
    formatted, JVM started) to librdkafka's first Metadata response, the same measure
    as ``startup``'s for serve beside it."""
    from confluent_kafka.admin import AdminClient

    from rebalance.testing import KafkaBroker
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        with KafkaBroker() as broker:
            AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
            times.append(time.perf_counter() - t0)
    return times


def throughput(records: int = 100_000) -> dict:
    """``{"produce_records_per_s", "fetch_records_per_s", "records", "record_bytes"}``
    measured against a fresh ``rebalance serve`` (see the module docstring). Raises
    RuntimeError if a record is not delivered or not read back within 120 s."""
    from confluent_kafka import Consumer, Producer
    port = _free_port()
    server = subprocess.Popen([str(REBALANCE), "serve", "--port", str(port), "--topic", "bench:4", 
                               "--initial-rebalance-delay-ms", "0"], stderr=subprocess.PIPE, text=True)
    try:
        while "listening" not in server.stderr.readline():
            pass
        conf = {"bootstrap.servers": f"127.0.0.1:{port}"}
        producer = Producer({**conf, "acks": "all", "linger.ms": 5, "queue.buffering.max.messages": records})
        value, failed = b"x" * RECORD_BYTES, []
        t0 = time.perf_counter()
        for i in range(records):
            producer.produce("bench", value, partition=i % 4, on_delivery=lambda e, m: failed.append(e) if e else None)
            producer.poll(0)
        if producer.flush(120) or failed:
            raise RuntimeError(f"{len(failed)} records failed, first {failed[:1]}")
        produce_s = time.perf_counter() - t0
        consumer = Consumer({**conf, "group.id": "bench", "auto.offset.reset": "earliest"})
        consumer.subscribe(["bench"])
        read, t0 = 0, time.perf_counter()
        while read < records:
            if time.perf_counter() - t0 > 120:
                raise RuntimeError(f"read {read} of {records} records in 120 s")
            for m in consumer.consume(10_000, 0.5):
                read += m.error() is None
        fetch_s = time.perf_counter() - t0
        consumer.close()
        return {"records": records, "record_bytes": RECORD_BYTES,
                "produce_records_per_s": round(records / produce_s), "fetch_records_per_s": round(records / fetch_s)}
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    for mode, sub in (("in-process", False), ("subprocess", True)):
        times = startup(sub, args.runs)
        print(f"{mode}: fixture call to first Metadata response: median {statistics.median(times) * 1000:.0f} ms, "
              f"worst {max(times) * 1000:.0f} ms ({args.runs} runs)")
    times = kafka_startup(max(1, args.runs // 3))
    print(f"Kafka 4.4.0 (KRaft, one node): KafkaBroker() to first Metadata response: median "
          f"{statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms ({len(times)} runs)")
    r = throughput(args.records)
    print(f"{r['records']:,} records of {r['record_bytes']} bytes: produce {r['produce_records_per_s']:,} records/s, "
          f"fetch {r['fetch_records_per_s']:,} records/s")


if __name__ == "__main__":
    main()
