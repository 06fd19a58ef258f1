"""Real Kafka clients through ``rebalance proxy`` to ``rebalance serve``: librdkafka
(confluent-kafka) and kafka-python join, scale up to 3 and one closes; the
proxy's trace validates against spec/trace.schema.json and records what serve
recorded, and no client ever reached serve but through the proxy. Run with
``pytest -m interop``."""
from types import SimpleNamespace

import pytest

from interop.harness import Group, Server
from traces import ProxyProcess, group_records, read_trace, responses

pytestmark = pytest.mark.interop
TOPIC, PARTITIONS = "t", 6


def test_librdkafka_and_kafka_python_through_the_proxy(tmp_path):
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}")
    proxy = ProxyProcess(tmp_path, server.port, initial_delay_ms=server.initial_delay_ms)
    group = Group(SimpleNamespace(port=proxy.port, tmp=tmp_path), "g", TOPIC, PARTITIONS)
    try:
        group.start("confluent", "A")
        group.start("kafka-python", "B")
        group.wait_balanced()
        group.start("confluent", "C")
        owned = group.wait_balanced()
        assert sorted(len(owned[m]) for m in "ABC") == [2, 2, 2]
        group.close("B")
        group.wait_balanced()
        assert group.double_ownership() == []
    finally:
        group.stop_all()
        proxy.stop()
        server.stop()

    records, upstream = read_trace(proxy.trace), read_trace(server.trace)
    clients = {r["client_id"] for r in records if r["type"] == "request"}
    assert {"A", "B", "C"} <= clients
    leaves = [r for r in records if r["type"] == "request" and r["api"] == "LeaveGroup"]
    assert [m["member_id"][:1] for r in leaves for m in r["body"]["members"]] == ["B"]
    assert any(r["body"]["error"] == "NONE" and r["body"]["generation_id"] >= 3 for r in responses(records, "JoinGroup"))
    # serve saw only the proxy: its own Metadata at start and one connection per client connection
    count = lambda rs: sum(r["type"] == "open" for r in rs)  # noqa: E731
    assert count(upstream) == count(records) + 1
    # every group request the proxy forwarded, serve received, in the same order per connection
    requests = lambda rs: sorted(str([x for x in seq if x[0] == "request"]) for seq in group_records(rs).values())  # noqa: E731
    assert requests(records) == requests(upstream)
