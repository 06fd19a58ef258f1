"""One real Kafka consumer process for the interop tests.

``python agent.py CLIENT NAME --bootstrap HOST:PORT --group G --topic T
[--instance-id ID] [--session-ms MS]`` with CLIENT ``confluent`` (librdkafka
through confluent-kafka), ``kafka-python`` or ``rebalance`` (our member runtime,
impl/member.py), all with the cooperative-sticky assignor. Prints one JSON line per rebalance callback: ``{"t": CLOCK_MONOTONIC
seconds, "member": NAME, "event": "assigned" | "revoked" | "lost", "partitions":
[...]}``, taken on entry to an assignment and on exit from a revocation, so
that intervals of ownership are never shorter than the real ones. Reads
``close`` on stdin to close the consumer gracefully (then prints ``closed``), and
``commit PARTITION OFFSET`` to commit an offset synchronously (then prints
``committed``).
"""
from __future__ import annotations

import argparse
import json
import sys
import queue
import threading
import time

commands: queue.Queue = queue.Queue()


def say(name, event, partitions=()):
    print(json.dumps({"t": time.monotonic(), "member": name, "event": event,
                      "partitions": sorted(partitions)}), flush=True)


def confluent(a):
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": a.name,
            "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": a.session_ms,
            "heartbeat.interval.ms": 300, "enable.auto.commit": True, "auto.commit.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000}
    if a.instance_id:
        conf["group.instance.id"] = a.instance_id
    c = Consumer(conf)

    def revoked(_, parts):
        say(a.name, "revoked", [p.partition for p in parts])

    c.subscribe([a.topic], on_assign=lambda _, parts: say(a.name, "assigned", [p.partition for p in parts]),
                on_revoke=revoked, on_lost=lambda _, parts: say(a.name, "lost", [p.partition for p in parts]))
    from confluent_kafka import TopicPartition

    def commit(p, offset):
        c.commit(offsets=[TopicPartition(a.topic, p, offset)], asynchronous=False)

    while serve(a, commit):
        m = c.poll(0.1)
        if m is not None and m.error():
            say(a.name, "error:" + str(m.error()))
    c.close()


def kafka_python(a):
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            say(a.name, "assigned", [p.partition for p in assigned])

        def on_partitions_revoked(self, revoked):
            say(a.name, "revoked", [p.partition for p in revoked])

        def on_partitions_lost(self, lost):
            say(a.name, "lost", [p.partition for p in lost])

    c = KafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.name,
                      group_instance_id=a.instance_id or None, session_timeout_ms=a.session_ms,
                      heartbeat_interval_ms=300, partition_assignment_strategy=[CooperativeStickyAssignor],
                      enable_auto_commit=True, auto_commit_interval_ms=500, metadata_max_age_ms=1000)
    c.subscribe([a.topic], listener=Listener())
    from kafka import OffsetAndMetadata, TopicPartition

    def commit(p, offset):
        c.commit({TopicPartition(a.topic, p): OffsetAndMetadata(offset, "", -1)})

    while serve(a, commit):
        c.poll(timeout_ms=100)
    c.close()


def rebalance(a):
    import asyncio

    from rebalance.impl.member import MemberRuntime

    async def run():
        m = MemberRuntime(a.bootstrap, a.group, [a.topic], instance_id=a.instance_id, client_id=a.name,
                          session_ms=a.session_ms, heartbeat_ms=300,
                          listener=lambda kind, parts: say(a.name, kind, [p for _, p in parts]))
        await m.start()
        while serve(a, None):
            await asyncio.sleep(0.1)
        await m.close()
    asyncio.run(run())


def serve(a, commit) -> bool:
    """Carry out a command from stdin, if any; False once told to close."""
    try:
        line = commands.get_nowait().split()
    except queue.Empty:
        return True
    if line[:1] == ["commit"]:
        commit(int(line[1]), int(line[2]))
        say(a.name, "committed", [int(line[1])])
        return True
    return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("client", choices=["confluent", "kafka-python", "rebalance"])
    p.add_argument("name")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--instance-id")
    p.add_argument("--session-ms", type=int, default=6000)
    a = p.parse_args()
    threading.Thread(target=lambda: [commands.put(line) for line in sys.stdin], daemon=True).start()
    {"confluent": confluent, "kafka-python": kafka_python, "rebalance": rebalance}[a.client](a)
    say(a.name, "closed")


if __name__ == "__main__":
    main()
