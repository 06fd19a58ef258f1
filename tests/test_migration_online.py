"""KIP-848's online migration run by real clients (issue 39 item 7): a classic group of two
consumers (the cooperative-sticky assignor, whose partitions a consumer group can take over)
rolled one by one to group.protocol=consumer (the upgrade), then rolled back one by one (the
downgrade), on the real Kafka 4.4.0 broker, recorded through
``rebalance proxy``; ``conform`` judges the coordinator side (the migration model's
handlers: model/consumer_group/migration.py) and the clients side (no partition owned twice
across the conversions). Each run prints how long each step took to settle."""
import time
from types import SimpleNamespace

import pytest

from interop.harness import Group, conform, wait_for

from test_interop_kip848 import SESSION_MS, pytestmark  # noqa: F401  its broker: new targets at once, 3 s sessions

PARTITIONS = 4
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
            "clients": conform("clients", group.observed)[1]}


def _held(out: dict) -> None:
    print(out["settled_s"])
    for side in ("coordinator", "clients"):
        assert out[side]["verdict"] == "conforms", out[side]
    assert {"M1", "M2", "M3"} <= set(out["coordinator"]["rules"]), out["coordinator"]["rules"]


@pytest.mark.kafka
def test_migration_conforms_on_kafka(kafka_broker, tmp_path):
    """The Java consumer 4.4.0 upgraded and downgraded on the real Kafka 4.4.0 broker."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "migrate-java"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(20)
    _held(migration("java", ("127.0.0.1", kafka_broker.port), topic, tmp_path))
