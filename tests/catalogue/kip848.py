"""The catalogue's KIP-848 variants (group.protocol=consumer, the Java consumer 4.4.0 and
librdkafka 2.16): the broker settings they run under and the claims of their situations,
read off the recorded ConsumerGroupHeartbeats (facts.Facts.heartbeats) where the classic
variants read JoinGroup and SyncGroup. ``python -m catalogue --protocol consumer`` plays
only these (make catalogue-kip848).
"""
from __future__ import annotations

from test_interop_kip848 import pytestmark as kip848_broker

from .runner import Variant

# tests/test_interop_kip848.py's broker: a 3 s group.consumer.session.timeout.ms, 500 ms heartbeats, and a new
# target assignment at every group epoch bump (group.consumer.assignment.interval.ms 0, as the model computes it)
SETTINGS = tuple(sorted(kip848_broker.kwargs.items()))
SESSION_MS = dict(SETTINGS)["group.consumer.session.timeout.ms"]
# librdkafka asks for no server assignor (the broker's default, uniform); the Java consumer names it. Not range:
# serve has one server assignor, uniform, and answers UNSUPPORTED_ASSIGNOR to a client asking for another
# (docs/kip848.md), as conform's coordinator side does
CONFLUENT = Variant("confluent", "uniform", protocol="consumer", settings=SETTINGS)
JAVA = Variant("java", "uniform", protocol="consumer", settings=SETTINGS)
# a static member's restart must fit in its session: 10 s, as the classic static variants' (a JVM starts in seconds)
STATIC_SESSION_MS = 10_000
JAVA_STATIC = Variant("java", "uniform", static=True, protocol="consumer", settings=tuple(sorted(
    {**dict(SETTINGS), "group.consumer.session.timeout.ms": STATIC_SESSION_MS}.items())))


def consumer_only(f) -> tuple:
    return ("the group spoke the consumer protocol only (ConsumerGroupHeartbeat, no JoinGroup)",
            bool(f.of("ConsumerGroupHeartbeat")) and not f.of("JoinGroup"))


def everything(run, given: dict, names) -> bool:
    """``names`` hold every partition of the scenario's topic once in ``given`` ({client: partitions})."""
    return sorted(p for n in names for p in given.get(n, ())) == list(range(run.scenario.partitions))


def left(f, client: str, epoch: int, after: float) -> bool:
    """``client`` left with a heartbeat at ``epoch`` (-1, or a static member's -2) answered NONE."""
    return any(h[2] == epoch and h[3] == "NONE" for h in f.heartbeats(after, client))


def reassigned(f, names, after: float, before: float = float("inf")) -> list:
    """When ``names`` were answered a new assignment between ``after`` and ``before`` (t_ms)."""
    return [t for t, c, _, e, _, a in f.heartbeats(after)
            if c in names and e == "NONE" and a is not None and t < before]


def scale_up(run, f):
    after = run.marks["join"]
    yield consumer_only(f)
    before = f.given(before=after)
    yield "A, B and C shared every partition", sorted(before) == ["A", "B", "C"] and everything(run, before, "ABC")
    yield "D joined (epoch 0) after that", f.joined("D", after) is not None
    now = f.given()
    yield "one of A, B and C revoked partitions for D, who was given them", bool(now.get("D")) and any(
        len(now.get(c, ())) < len(before[c]) for c in before) and everything(run, now, "ABCD")


def scale_down(run, f):
    after = run.marks["leave"]
    yield consumer_only(f)
    yield "four members shared the partitions", len(f.given(before=after)) == 4
    yield "C and D left (epoch -1)", all(left(f, c, -1, after) for c in "CD")
    yield "A and B were given everything after", everything(run, f.given(after), "AB")


def session_timeout(run, f):
    paused, resumed = run.marks["pause"], run.marks["resume"]
    yield consumer_only(f)
    moved = reassigned(f, "AB", paused, resumed)
    yield "A and B were given C's partitions while C was stopped", everything(run, f.given(paused, resumed), "AB")
    yield f"not before C's session ({SESSION_MS} ms) could expire", bool(moved) and min(moved) - paused > 2000
    yield "C learned it was fenced and rejoined at epoch 0", any(
        h[3] in ("UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH") for h in f.heartbeats(resumed, "C")) and \
        f.joined("C", resumed) is not None


def member_crash(run, f):
    killed = run.marks["kill"]
    yield consumer_only(f)
    moved = reassigned(f, "AC", killed)
    yield "A and C were given B's partitions", everything(run, f.given(killed), "AC")
    yield f"not before B's session ({SESSION_MS} ms) could expire", bool(moved) and min(moved) - killed > 2000
    yield "B never left (no heartbeat at epoch -1)", not left(f, "B", -1, 0)


def static_rolling_bounce(run, f):
    after = run.marks["bounce"]
    yield consumer_only(f)
    yield "A, B and C each left for now (epoch -2, a static member's leave)", all(left(f, c, -2, after) for c in "ABC")
    rejoined = {f.client(q) for q, _ in f.of("ConsumerGroupHeartbeat", "NONE", after)
                if q["body"]["member_epoch"] == 0 and q["body"]["instance_id"] == f"i-{f.client(q)}"}
    yield "each rejoined at epoch 0 with its group.instance.id", rejoined == {"A", "B", "C"}
    before = {h[4] for h in f.heartbeats() if h[0] < after and h[3] == "NONE"}
    yield "at the member epochs of before (no rebalance)", set(f.epochs(after)) <= before
