"""The oracle's real Apache Kafka 4.4.0 broker (rebalance.oracle.broker): it starts,
serves a librdkafka consumer group through ``rebalance proxy``, restarts on its storage,
and the launcher refuses what it owns. Run with ``pytest -m kafka``; the last tests need
no Java and run in the default suite."""
import json
import subprocess
import time

import pytest

from conftest import run_cli
from rebalance.oracle.broker import KafkaBroker, api_versions_answered


@pytest.mark.kafka
def test_broker_answers_and_serves_a_group(kafka_broker):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    assert api_versions_answered(kafka_broker.host, kafka_broker.port)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic("serves-a-group", 2, 1)])["serves-a-group"].result(10)
    c = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "serves-a-group",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    got = []
    c.subscribe(["serves-a-group"], on_assign=lambda _, parts: got.extend(p.partition for p in parts))
    end = time.monotonic() + 30
    while not got and time.monotonic() < end:
        c.poll(0.1)
    c.close()
    assert sorted(got) == [0, 1]


@pytest.mark.kafka
def test_describe_groups_in_a_rebalance_shows_the_kept_assignments(kafka_broker):
    """R3 held to Kafka: a rebalance started from Stable keeps the stored assignments, which
    DescribeGroups shows (the same run as on serve, tests/test_serve.py)."""
    from interop.harness import wait_for
    from test_serve import Client, described_while_rebalancing

    from rebalance.impl.wire import Api

    finder = Client(kafka_broker.port, "finder")  # __consumer_offsets is created on the first lookup, then loaded
    wait_for(lambda: finder.call(Api.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["kept"])
             .coordinators[0].error_code == 0 and finder.call(
                 Api.DESCRIBE_GROUPS, 5, groups=["kept"], include_authorized_operations=False).groups[0]
             .error_code == 0, 30, "the group coordinator")
    described_while_rebalancing(kafka_broker.port, "kept")


@pytest.mark.kafka
def test_a_crashed_broker_restarts_on_its_storage(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    with KafkaBroker(directory=tmp_path / "k") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("kept", 3, 1)])["kept"].result(10)
        broker.kill9()
        assert not api_versions_answered(broker.host, broker.port)
        broker.start()  # same ports, same storage (benchmarks/startup.py measures how fast)
        topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
        assert len(topics["kept"].partitions) == 3


@pytest.mark.kafka
def test_cli_prints_the_bootstrap_and_stops_cleanly(tmp_path):
    p = subprocess.Popen([*__import__("rebalance.pytest_plugin", fromlist=["command"]).command(), "kafka",
                          "--port", "0", "--dir", str(tmp_path), "--json"], stdout=subprocess.PIPE, text=True)
    line = json.loads(p.stdout.readline())
    host, port = line["bootstrap"].split(":")
    assert api_versions_answered(host, int(port))
    p.terminate()
    assert p.wait(60) == 0
    assert not api_versions_answered(host, int(port))


def test_the_launcher_refuses_the_settings_it_owns():
    with pytest.raises(ValueError, match="listeners"):
        KafkaBroker({"listeners": "PLAINTEXT://0.0.0.0:9092"}, start=False)


def test_cli_refuses_a_setting_that_is_not_key_value():
    code, out, err = run_cli("kafka", "--set", "group.initial.rebalance.delay.ms", "--json")
    assert code == 2
    assert "KEY=VALUE" in err


@pytest.mark.kafka
def test_a_cluster_id_starting_with_a_dash_formats(monkeypatch):
    """A random base64url cluster id begins with '-' one time in 64; kafka-storage's
    parser read it as an option and the broker never started."""
    import uuid

    import rebalance.oracle.broker as launcher
    real = uuid.uuid4
    monkeypatch.setattr(launcher.uuid, "uuid4", lambda: uuid.UUID(bytes=b"\xfb" + real().bytes[1:]))
    with KafkaBroker() as broker:
        assert api_versions_answered(broker.host, broker.port)
