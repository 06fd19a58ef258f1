"""One real Kafka consumer process for the interop tests.

``python agent.py CLIENT NAME --bootstrap HOST:PORT --group G --topic T
[--instance-id ID] [--session-ms MS] [--strategy S]`` with CLIENT ``confluent`` (librdkafka
through confluent-kafka), ``kafka-python``, ``aiokafka`` or ``rebalance`` (our
member runtime, impl/member.py); the cooperative-sticky assignor where the client
has one (aiokafka has none: eager, roundrobin), or for confluent ``--strategy``. agent.js is the same for kafkajs.

Prints the records of an observed log (spec/OBSERVED.md, without the header,
which the harness writes), one JSON line each: every rebalance callback, taken on
entry to an assignment and on exit from a revocation or loss, so that intervals
of ownership are never shorter than the real ones; every commit with its outcome;
``closed`` once closed. Reads commands on stdin: ``close`` (close the consumer
gracefully) and ``commit PARTITION OFFSET`` (commit that offset synchronously, if
the callbacks so far say the partition is owned, as a correct application
commits only what it owns: a zombie that has not yet learned of its loss does).
"""
from __future__ import annotations

import argparse
import asyncio
import queue
import sys
import threading

from rebalance.impl.observed import ObservedLog, now_ms

commands: queue.Queue = queue.Queue()
log: ObservedLog
owned: set = set()  # partition numbers, from the callbacks


def track(kind, partitions):
    """Keep ``owned`` from a callback's [(topic, partition)]."""
    mine = {p for _, p in partitions}
    owned.update(mine) if kind == "assigned" else owned.difference_update(mine)


def callback(kind, partitions):
    track(kind, [(p.topic, p.partition) for p in partitions])
    log.callback(kind, [(p.topic, p.partition) for p in partitions])


def committed(topic, p, offset, sent, error=None):
    log.commit([(topic, p, offset)], "error" if error else "ok", sent, error and str(error))


def confluent(a):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": a.name,
            "enable.auto.commit": True, "auto.commit.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000, "max.poll.interval.ms": a.max_poll_ms}
    if a.group_protocol == "consumer":  # KIP-848: the broker owns the session, heartbeat and assignor settings
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"partition.assignment.strategy": a.strategy, "session.timeout.ms": a.session_ms,
                     "heartbeat.interval.ms": 300})
    if a.instance_id:
        conf["group.instance.id"] = a.instance_id
    c = Consumer(conf)
    c.subscribe([a.topic], on_assign=lambda _, parts: callback("assigned", parts),
                on_revoke=lambda _, parts: callback("revoked", parts),
                on_lost=lambda _, parts: callback("lost", parts))

    def commit(p, offset):
        sent = now_ms()
        try:
            (tp,) = c.commit(offsets=[TopicPartition(a.topic, p, offset)], asynchronous=False)
            committed(a.topic, p, offset, sent, tp.error and tp.error.name())
        except KafkaException as e:
            committed(a.topic, p, offset, sent, e.args[0].name())

    while serve(commit):
        c.poll(0.1)
    c.close()


def kafka_python(a):
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            callback("assigned", assigned)

        def on_partitions_revoked(self, revoked):
            callback("revoked", revoked)

        def on_partitions_lost(self, lost):
            callback("lost", lost)

    c = KafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.name,
                      group_instance_id=a.instance_id or None, session_timeout_ms=a.session_ms,
                      heartbeat_interval_ms=300, partition_assignment_strategy=[CooperativeStickyAssignor],
                      enable_auto_commit=True, auto_commit_interval_ms=500, metadata_max_age_ms=1000)
    c.subscribe([a.topic], listener=Listener())

    def commit(p, offset):
        sent = now_ms()
        try:
            c.commit({TopicPartition(a.topic, p): OffsetAndMetadata(offset, "", -1)})
            committed(a.topic, p, offset, sent)
        except KafkaError as e:
            committed(a.topic, p, offset, sent, type(e).__name__)

    while serve(commit):
        c.poll(timeout_ms=100)
    c.close()


def aiokafka(a):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.abc import ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # aiokafka has no on_partitions_lost: a loss is a revocation
        def on_partitions_revoked(self, revoked):
            callback("revoked", revoked)

        def on_partitions_assigned(self, assigned):
            callback("assigned", assigned)

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.name,
                             group_instance_id=a.instance_id or None, session_timeout_ms=a.session_ms,
                             heartbeat_interval_ms=300, partition_assignment_strategy=(RoundRobinPartitionAssignor,),
                             enable_auto_commit=True, auto_commit_interval_ms=500, metadata_max_age_ms=1000)
        await c.start()
        c.subscribe([a.topic], listener=Listener())
        pending = []

        def commit(p, offset):
            async def go():
                sent = now_ms()
                try:
                    await c.commit({TopicPartition(a.topic, p): offset})
                    committed(a.topic, p, offset, sent)
                except KafkaError as e:
                    committed(a.topic, p, offset, sent, type(e).__name__)
            pending.append(asyncio.ensure_future(go()))

        while serve(commit):
            await c.getmany(timeout_ms=100)
        await asyncio.gather(*pending)
        await c.stop()
    asyncio.run(run())


def rebalance(a):
    from rebalance.impl.member import MemberRuntime

    async def run():
        m = MemberRuntime(a.bootstrap, a.group, [a.topic], instance_id=a.instance_id, client_id=a.name,
                          session_ms=a.session_ms, heartbeat_ms=300, listener=track, observe=log)
        await m.start()
        pending = []
        while serve(lambda p, offset: pending.append(asyncio.ensure_future(m.commit({(a.topic, p): offset})))):
            await asyncio.sleep(0.1)
        await asyncio.gather(*pending)
        await m.close()
    asyncio.run(run())


def serve(commit) -> bool:
    """Carry out a command from stdin, if any; False once told to close."""
    try:
        line = commands.get_nowait().split()
    except queue.Empty:
        return True
    if line[:1] == ["commit"]:
        if int(line[1]) in owned:
            commit(int(line[1]), int(line[2]))
        return True
    return False


CLIENTS = {"confluent": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka, "rebalance": rebalance}


def main():
    global log
    p = argparse.ArgumentParser()
    p.add_argument("client", choices=list(CLIENTS))
    p.add_argument("name")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--instance-id")
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--max-poll-ms", type=int, default=300_000,
                   help="confluent: max.poll.interval.ms, which is also the JoinGroup's rebalance timeout")
    p.add_argument("--strategy", default="cooperative-sticky",
                   help="confluent: partition.assignment.strategy (a rolling upgrade changes it between restarts)")
    p.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                   help="confluent: group.protocol (consumer: KIP-848, which ignores --session-ms and --strategy)")
    a = p.parse_args()
    log = ObservedLog(sys.stdout, a.name, a.instance_id or None)
    threading.Thread(target=lambda: [commands.put(line) for line in sys.stdin], daemon=True).start()
    CLIENTS[a.client](a)
    log.marker("closed")


if __name__ == "__main__":
    main()
