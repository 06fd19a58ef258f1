"""KIP-848's online migration run by real clients (issue 39 item 7): a classic group of two
consumers (the cooperative-sticky assignor, whose partitions a consumer group can take over)
rolled one by one to group.protocol=consumer (the upgrade), then rolled back one by one (the
downgrade), on the real Kafka 4.4.0 broker and on ``rebalance serve``, recorded through
``rebalance proxy``; ``conform`` judges the coordinator side (the migration model's
handlers: model/consumer_group/migration.py) and the clients side (no partition owned twice
across the conversions), and the offsets committed in the classic group must be the ones
fetched after each conversion. Each run prints how long each step took to settle."""
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from interop.harness import Group, conform, wait_for

# its broker: new targets at once, 3 s sessions
from test_interop_kip848 import SESSION_MS, on_serve as kip848_on_serve, pytestmark  # noqa: F401

PARTITIONS = 4
RECORDS = 5  # per partition, produced before the group starts: the members commit offset 5 for each
CLASSIC = ("--group-protocol", "classic", "--strategy", "cooperative-sticky")
CONSUMER = ("--group-protocol", "consumer")
# (what, the member stopped, the member started in its place, its protocol's arguments, who then shares)
ROLL = (("upgrade A", "A", "C", CONSUMER, "BC"), ("upgrade B", "B", "D", CONSUMER, "CD"),
        ("downgrade C", "C", "E", CLASSIC, "DE"), ("downgrade D", "D", "F", CLASSIC, "EF"))
STEPS = ("A and B share (classic)",) + tuple(what for what, *_ in ROLL)


def migration(client: str, upstream: tuple, topic: str, tmp) -> dict:
    """Two classic consumers of ``client`` (A, B) share ``topic``'s partitions through a
    recording proxy in front of ``upstream``; each is closed in turn and replaced by a
    consumer-protocol one (C, D: the group converts to a consumer group at C's join), then
    each of those by a classic one (E, F: the group converts back when D, the last
    consumer-protocol member, leaves). Returns each side's conform verdict and the seconds
    each step took to settle (every partition owned once among the running members)."""
    from catalogue.targets import RecordingProxy
    from rebalance.model.timing import SessionBounds

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": "%s:%d" % upstream})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, b"%d" % i, partition=p)
    assert producer.flush(30) == 0
    proxy = RecordingProxy(upstream, tmp / "proxy.jsonl", 0, SessionBounds(), SESSION_MS)
    group = Group(SimpleNamespace(port=proxy.port, tmp=tmp), f"{topic}-g", topic, PARTITIONS)
    settled = {}

    def step(what: str, names, action):
        started = time.monotonic()
        action()
        wait_for(lambda: group.balanced_among(list(names), 1.0), 60,
                 f"{what}: {names} to balance; owned {group.owned()}")
        settled[what] = round(time.monotonic() - started, 1)
    try:
        step(STEPS[0], "AB", lambda: [group.start(client, n, args=CLASSIC) for n in "AB"])
        for what, old, new, args, sharing in ROLL:
            step(what, sharing, lambda: (group.close(old), group.start(client, new, args=args)))
        for name in "EF":
            group.close(name)
    finally:
        group.stop_all()
        proxy.close()
    return {"settled_s": settled, "trace": proxy.trace, "coordinator": conform("coordinator", proxy.trace)[1],
            "clients": conform("clients", group.observed)[1], "offsets": offsets_fetched(proxy.trace)}


def offsets_fetched(path) -> dict:
    """The committed offsets the group's members fetched, by the kind of group it was then:
    ``classic`` before the first ConsumerGroupHeartbeat, ``consumer`` from it, ``classic again``
    from the first JoinGroup answered with a leader after it (a consumer group names none, M3):
    {kind: sorted offsets}, -1 for none committed."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines()[1:]]
    requests, kind, fetched = {}, "classic", {}
    for r in records:
        key = (r.get("connection"), r.get("correlation_id"))
        if r["type"] == "request":
            requests[key] = r
            if r["api"] == "ConsumerGroupHeartbeat" and kind == "classic":
                kind = "consumer"
        elif r["type"] == "response":
            api = requests.get(key, {}).get("api")
            if api == "JoinGroup" and kind == "consumer" and r["body"]["leader"]:
                kind = "classic again"
            for g in r["body"]["groups"] if api == "OffsetFetch" else ():
                for t in g["topics"] or ():
                    fetched.setdefault(kind, []).extend(p["offset"] for p in t["partitions"])
    return {k: sorted(v) for k, v in fetched.items()}


def _held(out: dict) -> None:
    print(out["settled_s"], out["offsets"])
    for side in ("coordinator", "clients"):
        assert out[side]["verdict"] == "conforms", out[side]
    assert {"M1", "M2", "M3"} <= set(out["coordinator"]["rules"]), out["coordinator"]["rules"]
    # the offsets committed in the classic group are fetched in the consumer group and after the downgrade
    assert set(out["offsets"]["consumer"]) == set(out["offsets"]["classic again"]) == {RECORDS}, out["offsets"]


def on_serve(client: str, tmp) -> dict:
    """``migration`` on ``rebalance serve`` (the broker's group.consumer settings of this module's)."""
    return kip848_on_serve(client, tmp, migration, "migrate", PARTITIONS)


@pytest.mark.interop
def test_migration_conforms_on_serve(tmp_path):
    """The same on ``rebalance serve``: the migration through the model's own handlers."""
    _held(on_serve("java", tmp_path))


@pytest.mark.kafka
def test_migration_conforms_on_kafka(kafka_broker, tmp_path):
    """The Java consumer 4.4.0 upgraded and downgraded on the real Kafka 4.4.0 broker."""
    from catalogue.targets import create_topic

    topic = "migrate-java"
    create_topic("127.0.0.1", kafka_broker.port, topic, PARTITIONS)
    _held(migration("java", ("127.0.0.1", kafka_broker.port), topic, tmp_path))
