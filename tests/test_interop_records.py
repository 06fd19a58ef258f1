"""Records and admin APIs of ``rebalance serve`` with real clients (issue 19):
for librdkafka (confluent-kafka), kafka-python, aiokafka and kafkajs, a producer
then a consumer group end to end with every record verified (offsets, keys,
values, headers), each client's "list all topics" call, and ListGroups,
DeleteGroups and CreateTopics through the admin APIs of those that have them.
Run with ``pytest -m interop``."""
import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from interop.harness import Server

pytestmark = pytest.mark.interop
COUNT = 200
HERE = Path(__file__).parent / "interop"


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path, "t:2", initial_delay_ms=0)
    yield s
    s.stop()


def expected() -> set:
    """(partition, offset, key, value) of the COUNT records each client produces: record i
    to partition i % 2, so at offset i // 2."""
    return {(i % 2, i // 2, f"k{i}", str(i)) for i in range(COUNT)}


def bootstrap(server) -> str:
    return f"127.0.0.1:{server.port}"


def test_librdkafka_produces_consumes_and_administers(server):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    conf = {"bootstrap.servers": bootstrap(server)}
    admin = AdminClient(conf)
    assert admin.create_topics([NewTopic("rd", 2, 1)])["rd"].result(10) is None
    assert sorted(admin.list_topics(timeout=10).topics) == ["rd", "t"]  # Metadata v12, null topics (issue 19)
    errors = []
    for codec in ("lz4", "zstd"):
        p = Producer({**conf, "enable.idempotence": True, "compression.type": codec, "linger.ms": 5})
        for n in range(COUNT // 2) if codec == "lz4" else range(COUNT // 2, COUNT):
            p.produce("rd", key=f"k{n}", value=str(n), partition=n % 2, headers={"h": b"v"},
                      on_delivery=lambda e, m: errors.append(e) if e else None)
        assert p.flush(10) == 0
    assert errors == []
    c = Consumer({**conf, "group.id": "rd-group", "auto.offset.reset": "earliest"})
    c.subscribe(["rd"])
    got, deadline = set(), time.monotonic() + 30
    while len(got) < COUNT and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            assert m.headers() == [("h", b"v")]
            got.add((m.partition(), m.offset(), m.key().decode(), m.value().decode()))
    assert got == expected()
    groups = admin.list_consumer_groups().result(10)
    assert [g.group_id for g in groups.valid] == ["rd-group"]
    c.close()
    assert admin.delete_consumer_groups(["rd-group"])["rd-group"].result(10) is None
    assert admin.list_consumer_groups().result(10).valid == []


def test_kafka_python_produces_consumes_and_administers(server):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(server))
    admin.create_topics([NewTopic("kp", 2, 1)])
    assert sorted(admin.list_topics()) == ["kp", "t"]
    p = KafkaProducer(bootstrap_servers=bootstrap(server), compression_type="gzip", acks="all")
    futures = [p.send("kp", key=f"k{i}".encode(), value=str(i).encode(), partition=i % 2, headers=[("h", b"v")])
               for i in range(COUNT)]
    p.flush(10)
    assert [f.get(10).offset for f in futures] == [i // 2 for i in range(COUNT)]
    p.close()
    c = KafkaConsumer("kp", bootstrap_servers=bootstrap(server), group_id="kp-group",
                      auto_offset_reset="earliest", consumer_timeout_ms=15000)
    got = set()
    for m in c:
        assert m.headers == [("h", b"v")]
        got.add((m.partition, m.offset, m.key.decode(), m.value.decode()))
        if len(got) == COUNT:
            break
    assert got == expected()
    groups = admin.list_groups()
    assert [g["group_id"] if isinstance(g, dict) else g[0] for g in groups] == ["kp-group"], groups
    c.close()
    result = admin.delete_groups(["kp-group"])
    assert admin.list_groups() == [], result
    admin.close()


def test_aiokafka_produces_consumes_and_lists_topics(server):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap(server))
        await admin.start()
        await admin.create_topics([NewTopic("aio", 2, 1)])
        topics = sorted(await admin.list_topics())
        p = AIOKafkaProducer(bootstrap_servers=bootstrap(server), enable_idempotence=True, compression_type="gzip")
        await p.start()
        offsets = [(await p.send_and_wait("aio", key=f"k{i}".encode(), value=str(i).encode(), partition=i % 2,
                                          headers=[("h", b"v")])).offset for i in range(COUNT)]
        await p.stop()
        c = AIOKafkaConsumer("aio", bootstrap_servers=bootstrap(server), group_id="aio-group",
                             auto_offset_reset="earliest")
        await c.start()
        got = set()
        try:
            async with asyncio.timeout(30):
                async for m in c:
                    assert m.headers == (("h", b"v"),)
                    got.add((m.partition, m.offset, m.key.decode(), m.value.decode()))
                    if len(got) == COUNT:
                        break
            groups = [g[0] for g in await admin.list_consumer_groups()]
        finally:
            await c.stop()
            await admin.close()
        return topics, offsets, got, groups
    topics, offsets, got, groups = asyncio.run(run())
    assert topics == ["aio", "t"] and offsets == [i // 2 for i in range(COUNT)]
    assert got == expected() and groups == ["aio-group"]


def test_kafkajs_produces_consumes_and_administers(server):
    out = subprocess.run(["node", str(HERE / "records.js"), bootstrap(server), "js", str(COUNT), "js-group"],
                         capture_output=True, text=True, timeout=90, cwd=HERE)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["topics"] == ["js", "t"] and r["groups"] == ["js-group"] and r["deleted"] == [["js-group", 0]]
    assert {(m["partition"], m["offset"], m["key"], m["value"]) for m in r["consumed"]} == expected()
    assert {m["header"] for m in r["consumed"]} == {"v"}
