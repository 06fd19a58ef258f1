"""An at-least-once consume-process-commit application, the kind a user of
``rebalance.testing`` tests (issue 19 item 5; examples/app/test_app.py).

Each ``step`` polls a batch, processes every record (``process(record)``: here,
appending ``(partition, offset, value)`` to a sink), and only then commits the
batch's next offsets synchronously. A rebalance or an expiry between processing
and commit makes the commit fail (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
REBALANCE_IN_PROGRESS: generation fencing, R9) and the new owner of those
partitions reads them again from the last committed offset: records are
re-delivered, never lost. The same loop runs on librdkafka (confluent-kafka) and
kafka-python (``CLIENTS``).
"""
from __future__ import annotations


class Confluent:
    """librdkafka through confluent-kafka."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str):
        from confluent_kafka import Consumer
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
                                  "socket.timeout.ms": 3000})
        self.consumer.subscribe([topic])

    def poll(self) -> list:
        return [(m.partition(), m.offset(), m.value()) for m in self.consumer.consume(50, 0.2) if not m.error()]

    def commit(self, offsets: dict) -> str | None:
        from confluent_kafka import KafkaException, TopicPartition
        topic = self.consumer.assignment()[0].topic if self.consumer.assignment() else None
        if topic is None:
            return "NO_ASSIGNMENT"
        try:
            self.consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                                 asynchronous=False)
            return None
        except KafkaException as e:
            return e.args[0].name()

    def close(self) -> None:
        self.consumer.close()


class KafkaPython:
    """kafka-python."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str):
        from kafka import KafkaConsumer
        self.topic = topic
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                                      enable_auto_commit=False, auto_offset_reset="earliest",
                                      session_timeout_ms=6000, heartbeat_interval_ms=200)

    def poll(self) -> list:
        batches = self.consumer.poll(timeout_ms=200, max_records=50)
        return [(r.partition, r.offset, r.value) for records in batches.values() for r in records]

    def commit(self, offsets: dict) -> str | None:
        from kafka import TopicPartition
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata
        try:
            self.consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                                  for p, o in offsets.items()})
            return None
        except KafkaError as e:
            return type(e).__name__

    def close(self) -> None:
        self.consumer.close()


CLIENTS = {"confluent": Confluent, "kafka-python": KafkaPython}


class App:
    """One instance of the application on ``client`` (a CLIENTS name). ``sink``: where
    processed records go, (partition, offset, value) each; ``failed_commits``: the
    errors of commits refused (each one a batch that will be re-delivered)."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, name: str, sink: list):
        self.client = CLIENTS[client](bootstrap, group, topic, name)
        self.sink, self.failed_commits = sink, []

    def step(self) -> int:
        """Poll, process, commit: the number of records processed."""
        batch = self.client.poll()
        if not batch:
            return 0
        nxt = {}
        for partition, offset, value in batch:
            self.sink.append((partition, offset, value))  # process
            nxt[partition] = max(nxt.get(partition, 0), offset + 1)
        error = self.client.commit(nxt)
        if error is not None:
            self.failed_commits.append(error)
        return len(batch)

    def close(self) -> None:
        self.client.close()
