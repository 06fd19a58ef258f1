"""The member side of ``rebalance conform`` (checker/conform/members.py): traces
recorded by a real ``rebalance serve`` with our member runtime conform, and a
wrong member, run for real with a mutation, is caught naming the rule."""
import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from interop.harness import REBALANCE, Group, Server, wait_for, wait_until
from rebalance.checker.conform import members
from rebalance.checker.conform.emit import emit
from rebalance.checker.conform.trace import Trace, parse, read
from rebalance.model.config import GroupConfig
from rebalance.checker.conform.verdict import CONFORMS, DIVERGENT, INCOMPLETE
from rebalance.impl.member import MemberRuntime
from test_findings import departs_as_recorded

TOPIC, PARTITIONS = "t", 4


async def join(bootstrap: str, name: str, **kw) -> MemberRuntime:
    m = MemberRuntime(bootstrap, "g", [TOPIC], client_id=name, heartbeat_ms=100, session_ms=1000, **kw)
    await m.start()
    return m


def settled(ms) -> bool:
    owned = [p for m in ms for p in m.owned]
    return len(owned) == PARTITIONS == len(set(owned)) and all(m.owned for m in ms)


def kill(m: MemberRuntime) -> None:
    """The process dies: no LeaveGroup, the socket just closes."""
    m._beat.cancel()
    m.wire.writer.transport.abort()


def recorded(tmp_path, scenario) -> Trace:
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    try:
        asyncio.run(scenario(f"127.0.0.1:{server.port}"))
        time.sleep(0.2)
    finally:
        server.stop()
    return read(server.trace)


# the model's own timed runs (checker/conform/emit.py): a pause past the session
# timeout (UNKNOWN_MEMBER_ID), a crash and a restart, a graceful stop, a scale-up
SCRIPT = ((20_000, "pause", 1), (90_000, "resume", 1), (60_000, "crash", 2), (70_000, "start", 2),
          (90_000, "stop", 0), (150_000, "start", 3))


# an eager member owns nothing when it rejoins: both mutations change nothing there
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("protocol, mutation, rule", [
    ("eager", None, None), ("cooperative", None, None), ("cooperative", "keep-owned-on-unknown-member-id", "R15"),
    ("cooperative", "assign-before-revoke", "R23")])
def test_model_runs_conform_and_mutated_ones_diverge(tmp_path, protocol, static, mutation, rule):
    cfg = GroupConfig(protocol=protocol, assignor="range" if protocol == "eager" else "cooperative-sticky",
                      mutations=frozenset([mutation] if mutation else []))
    emit(tmp_path / "t.jsonl", cfg, 3, static, SCRIPT, seed=3, until_ms=300_000)
    verdict = members.check(read(tmp_path / "t.jsonl"), None)
    if mutation is None:
        assert verdict.status == CONFORMS, verdict.divergence
        assert {"R13", "R15", "R16", "R19", "R41", "R14" if protocol == "eager" else "R23"} <= verdict.rules
    else:
        assert verdict.status == DIVERGENT and verdict.divergence.rule == rule


@pytest.mark.spec("R13", "R16", "R18", "R20", "R23")
def test_real_members_conform(tmp_path):
    """Scale-up A, B, C; C closes gracefully; B is killed; A takes everything back."""
    async def scenario(bootstrap):
        a = await join(bootstrap, "A")
        await wait_until(lambda: settled([a]), "A to own everything")
        b = await join(bootstrap, "B")
        c = await join(bootstrap, "C")
        await wait_until(lambda: settled([a, b, c]), "A, B, C to share the partitions")
        await c.close()
        await wait_until(lambda: settled([a, b]), "A and B to share after C left")
        kill(b)
        await wait_until(lambda: settled([a]), "A to own everything after B died")
        await a.close()

    trace = recorded(tmp_path, scenario)
    verdict = members.check(trace, None)
    assert verdict.status == CONFORMS, verdict.divergence
    assert {"R13", "R16", "R18", "R20", "R23", "R10", "R8"} <= verdict.rules
    assert verdict.figures["clients"] == 3 and verdict.figures["leader_assignments"] >= 3
    assert verdict.records_checked > 20


def member_process(server: Server, name: str, *mutations) -> subprocess.Popen:
    """``rebalance member`` in its own process (1 s session, 100 ms heartbeats)."""
    cmd = [str(REBALANCE), "member", "--bootstrap", f"127.0.0.1:{server.port}", "--group", "g", "--topic", TOPIC,
           "--client-id", name, "--session-timeout-ms", "1000", "--heartbeat-interval-ms", "100"]
    for m in mutations:
        cmd += ["--mutation", m]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def joins(server: Server, client: str) -> list:
    """The JoinGroup requests ``client`` sent, as serve recorded them so far (its
    complete records, ``Server.records``)."""
    return [r["body"] for r in server.records("request") if r["api"] == "JoinGroup" and r["client_id"] == client]


@pytest.mark.spec("R15")
def test_zombie_process_keeping_partitions_diverges(tmp_path):
    """KAFKA-12983 with a real zombie: ``rebalance member --mutation
    keep-owned-on-unknown-member-id`` is stopped (SIGSTOP) past its session
    timeout while B takes over, resumed, answered UNKNOWN_MEMBER_ID, and rejoins
    with an empty member.id still claiming its partitions."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    a = member_process(server, "A", "keep-owned-on-unknown-member-id")
    b = None
    try:
        owned = lambda body: body["protocols"][0]["metadata"]["owned_partitions"]  # noqa: E731
        # A alone (1), B joins (2, revoking), the follow-up round (3); then B alone (4)
        wait_for(lambda: server.generations(), 20, "A to form the group")
        b = member_process(server, "B")
        wait_for(lambda: max(server.generations(), default=0) >= 3, 20, "A and B to share the partitions")
        time.sleep(0.5)
        a.send_signal(signal.SIGSTOP)
        wait_for(lambda: max(server.generations()) >= 4, 20, "a round without A")
        a.send_signal(signal.SIGCONT)
        wait_for(lambda: any(j["member_id"] == "" and owned(j) for j in joins(server, "A")), 20,
                 "A's rejoin claiming")
    finally:
        for p in filter(None, (a, b)):
            p.send_signal(signal.SIGCONT)
            p.terminate()
            p.wait(10)
        server.stop()
    d = members.check(read(server.trace), None).divergence
    assert d.rule == "R15" and d.record["client_id"] == "A" and d.record["body"]["member_id"] == ""
    assert d.expected == ("JoinGroup member_id='' group_instance_id=None owned_partitions=[] generation=-1",)
    assert any(r["type"] == "response" and r["body"].get("error") == "UNKNOWN_MEMBER_ID" for _, r in d.context)
    assert d.context[-1] == (d.line, d.record)


@pytest.mark.spec("R23")
def test_leader_assigning_a_claimed_partition_diverges(tmp_path):
    """assign-before-revoke, run for real: A, the leader, owns everything and hands
    B partitions A still claims in the same round."""
    async def scenario(bootstrap):
        a = await join(bootstrap, "A", mutations=("assign-before-revoke",))
        await wait_until(lambda: settled([a]), "A to own everything")
        b = await join(bootstrap, "B")
        await wait_until(lambda: b.owned, "B to be given partitions")

    trace = recorded(tmp_path, scenario)
    verdict = members.check(trace, None)
    assert verdict.status == DIVERGENT
    d = verdict.divergence
    assert d.rule == "R23" and d.record["api"] == "SyncGroup" and d.record["body"]["assignments"]
    assert "still owns it" in d.reason


@pytest.mark.spec("R22", "R23")
def test_leader_giving_a_contested_partition_diverges(monkeypatch):
    """kafka-python 3.0.12's leader on Kafka 4.4.0 (tests/test_findings.py, CONTESTED): B and
    C both claim t-5 at generation -1, and B's SyncGroup gives it to C in that round; R23
    withholds a contested partition from everyone. Without the contested check the leader's
    assignments pass."""
    path = Path(__file__).parent / "findings" / "kafka-python-3.0.12-assigns-contested-partition.jsonl"
    d = members.check(read(path), None).divergences[-1]
    assert (d.rule, d.line, d.record["api"]) == ("R23", 242, "SyncGroup"), d
    assert "-5 assigned to C-" in d.reason and "two members claim it" in d.reason
    monkeypatch.setattr(members, "contested_claims", lambda cfg, claims: 0)
    assert [d.rule for d in members.check(read(path), None).divergences] == ["R15"]


@pytest.mark.spec("R18")
def test_claiming_revoked_partitions_diverges(tmp_path):
    """keep-revoked (test-only), run for real: A is told to give up two partitions
    for B, keeps them, and rejoins claiming all four."""
    async def scenario(bootstrap):
        a = await join(bootstrap, "A", mutations=("keep-revoked",))
        await wait_until(lambda: settled([a]), "A to own everything")
        await join(bootstrap, "B")
        await wait_until(lambda: a.state.generation >= 3, "A's rejoin after revoking")

    d = members.check(recorded(tmp_path, scenario), None).divergence
    assert d.rule == "R18" and d.record["api"] == "JoinGroup"
    assert len(d.record["body"]["protocols"][0]["metadata"]["owned_partitions"][0]["partitions"]) == PARTITIONS
    assert d.expected[0].endswith("owned_partitions=[t-0, t-1] generation=2")


@pytest.mark.interop
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_real_clients_conform(tmp_path, client):
    """librdkafka and kafka-python (cooperative-sticky, auto-commit) through a
    scale-up, a graceful close and a kill, as serve recorded them."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}")
    group = Group(server, "g", TOPIC, PARTITIONS)
    try:
        for name in "ABC":
            group.start(client, name)
        owned = group.wait_balanced()
        for name in "ABC":  # commit one partition each: OffsetCommit under its member.id and generation
            group.tell(name, f"commit {min(owned[name])} 1")
        wait_for(lambda: sum(e["event"] == "commit" and e["outcome"] == "ok" for e in group.snapshot()) == 3, 30,
                 "the commits")
        group.close("B")
        group.wait_balanced()
        group.kill9("C")
        group.wait_balanced(timeout=60)
    finally:
        group.stop_all()
        server.stop()
    verdict = members.check(read(server.trace), None)
    d = verdict.divergence
    if d is not None and departs_as_recorded(client, {"side": d.side, "rule": d.rule, "record": d.record}):
        # one of the client's recorded departures (tests/test_findings.py), timing-dependent: named, not hidden
        print(f"{client} departed as recorded: {d.rule} {d.reason} at trace line {d.line}")
        return
    assert verdict.status == CONFORMS, verdict.divergence
    assert {"R13", "R16", "R18", "R20", "R23", "R10", "R41"} <= verdict.rules


# --- hand-built traces: what a real run of our clients does not produce ------------------
class Build:
    """A v2 trace written record by record (spec/TRACE.md), one connection per client."""

    def __init__(self, protocols=("cooperative-sticky",), instance=None):
        self.protocols, self.instance = protocols, instance  # instance: every request's group.instance.id
        self.lines = [{"type": "header", "format": "rebalance-trace", "version": 2, "recorder": "serve",
                       "recorded_at": "2026-11-24T10:00:00Z", "settings": {
                           "topics": [{"name": TOPIC, "partitions": PARTITIONS}],
                           "group_initial_rebalance_delay_ms": 0, "mutations": []}}]
        self.t, self.correlation = 1.0, 0

    def _add(self, record: dict) -> dict:
        self.t += 1
        self.lines.append({"t_ms": self.t, **record})
        return self.lines[-1]

    def open(self, conn: str):
        self._add({"type": "open", "connection": conn, "host": "127.0.0.1"})

    def call(self, conn: str, api: str, body: dict, response: dict | None):
        self.correlation += 1
        version = {"JoinGroup": 7, "SyncGroup": 5, "Heartbeat": 4, "LeaveGroup": 4, "OffsetCommit": 8}[api]
        if "group_instance_id" in body:
            body = {**body, "group_instance_id": self.instance}
        self._add({"type": "request", "connection": conn, "correlation_id": self.correlation, "client_id": conn,
                   "api": api, "version": version, "body": {"group_id": "g", **body}})
        if response is not None:
            self._add({"type": "response", "connection": conn, "correlation_id": self.correlation, "api": api,
                       "version": version, "body": response})

    @staticmethod
    def sub(owned=(), generation=-1):
        return {"version": 2, "topics": [TOPIC], "owned_partitions": [{"topic": TOPIC, "partitions": list(owned)}]
                if owned else [], "generation": generation, "rack": None, "user_data": None}

    @staticmethod
    def assignment(parts):
        return {"version": 1, "assigned_partitions": [{"topic": TOPIC, "partitions": list(parts)}],
                "user_data": None}

    def join(self, conn, member, owned=(), generation=-1, response=None, metadata=None):
        body = {"member_id": member, "group_instance_id": None, "session_timeout_ms": 1000,
                "rebalance_timeout_ms": 1000, "protocol_type": "consumer", "reason": None,
                "protocols": [{"name": n, "metadata": metadata or self.sub(owned, generation)}
                              for n in self.protocols]}
        self.call(conn, "JoinGroup", body, response)

    def joined(self, member, generation, leader, members=(), error="NONE"):
        return {"error": error, "generation_id": generation, "protocol_type": "consumer",
                "protocol_name": self.protocols[-1], "leader": leader, "skip_assignment": False,
                "member_id": member, "members": [{"member_id": m, "group_instance_id": self.instance,
                                                  "metadata": self.sub(o, g)} for m, o, g in members]}

    def sync(self, conn, member, generation, assignments=(), given=None):
        body = {"generation_id": generation, "member_id": member, "group_instance_id": None,
                "protocol_type": "consumer", "protocol_name": self.protocols[-1],
                "assignments": [{"member_id": m, "assignment": self.assignment(ps)} for m, ps in assignments]}
        self.call(conn, "SyncGroup", body, None if given is None else {
            "error": "NONE", "protocol_type": "consumer", "protocol_name": self.protocols[-1],
            "assignment": self.assignment(given)})

    def heartbeat(self, conn, member, generation, error="NONE"):
        self.call(conn, "Heartbeat", {"generation_id": generation, "member_id": member, "group_instance_id": None},
                  {"error": error})

    def commit(self, conn, member, generation, parts, error="NONE"):
        self.call(conn, "OffsetCommit", {
            "generation_id": generation, "member_id": member, "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [{"partition": p, "offset": 1, "metadata": None}
                                                      for p in parts]}]},
            {"topics": [{"name": TOPIC, "partitions": [{"partition": p, "error": error} for p in parts]}]})

    def alone(self, conn="c1", member="A-1", sync_heartbeat=False):
        """A lone member joins (KIP-394's two JoinGroups) and is given everything in generation 1."""
        self.open(conn)
        self.join(conn, "", response=self.joined(member, -1, "", error="MEMBER_ID_REQUIRED"))
        self.join(conn, member, response=self.joined(member, 1, member, [(member, (), -1)]))
        if sync_heartbeat:  # the Java client heartbeats in COMPLETING_REBALANCE, its SyncGroup in flight
            self.correlation += 1
            self.heartbeat(conn, member, 1)
        self.sync(conn, member, 1, [(member, range(PARTITIONS))], given=range(PARTITIONS))
        return self

    def trace(self) -> Trace:
        """Through the trace reader: schema-valid, ordered, paired."""
        return parse(json.dumps(r) for r in self.lines)


def test_hand_built_lone_member_conforms_with_pipelined_heartbeat():
    b = Build().alone(sync_heartbeat=True)
    b.heartbeat("c1", "A-1", 1)
    b.commit("c1", "A-1", 1, [0, 2])
    verdict = members.check(b.trace(), None)
    assert verdict.status == CONFORMS, verdict.divergence
    assert verdict.figures["abstracted_heartbeats"] == 1 and {"R36", "R16", "R10", "R41"} <= verdict.rules


@pytest.mark.spec("R10", "R41")
@pytest.mark.parametrize("wrong, rule", [("heartbeat", "R10"), ("commit", "R41"), ("commit-unowned", "R41")])
def test_stale_generation_or_unowned_commit_diverges(wrong, rule):
    b = Build().alone()
    b.open("c2")
    b.join("c2", "", response=b.joined("B-1", -1, "", error="MEMBER_ID_REQUIRED"))
    b.join("c2", "B-1", response=None)
    b.heartbeat("c1", "A-1", 1, error="REBALANCE_IN_PROGRESS")
    b.join("c1", "A-1", owned=range(PARTITIONS), generation=1,
           response=b.joined("A-1", 2, "A-1", [("A-1", range(PARTITIONS), 1), ("B-1", (), -1)]))
    b.sync("c1", "A-1", 2, [("A-1", [0, 1]), ("B-1", [])], given=[0, 1])
    b.join("c1", "A-1", owned=[0, 1], generation=2, response=None)  # R18: revoked t-2, t-3, rejoins at once
    {"heartbeat": lambda: b.heartbeat("c1", "A-1", 1), "commit": lambda: b.commit("c1", "A-1", 1, [0]),
     "commit-unowned": lambda: b.commit("c1", "A-1", 2, [3])}[wrong]()
    d = members.check(b.trace(), None).divergence
    assert d.rule == rule and d.line == len(b.lines) - 1
    assert d.expected[0].startswith(("Heartbeat" if wrong == "heartbeat" else "OffsetCommit") +
                                    " member_id='A-1' generation_id=2")


def test_commit_error_may_reset_the_generation():
    """ConsumerCoordinator resets the generation on an OffsetCommit answered
    ILLEGAL_GENERATION and rejoins claiming nothing (R15); the model learns it from
    the next Heartbeat: the side takes the commit's error as that Heartbeat's."""
    b = Build().alone()
    b.commit("c1", "A-1", 1, [0], error="ILLEGAL_GENERATION")
    b.join("c1", "A-1", response=None)
    verdict = members.check(b.trace(), None)
    assert verdict.status == CONFORMS, verdict.divergence
    assert "R15" in verdict.rules


def test_java_zombie_commit_on_a_new_connection_then_rejoin_conforms():
    """Kafka 4.4.0's Java consumer, resumed after a SIGSTOP past its session timeout
    (tests/test_interop_faults.py, java): its heartbeat thread finds the session expired
    and drops the coordinator's connection (AbstractCoordinator.HeartbeatThread.run,
    AbstractCoordinator.java:1526, Kafka 4.4.0); its commit then goes out on a new one,
    is answered UNKNOWN_MEMBER_ID, and it rejoins with an empty member.id at once
    (ConsumerCoordinator.OffsetCommitResponseHandler.handle, ConsumerCoordinator.java:1451; R15). The
    SyncGroup response it received on the old connection still counts: a reconnect
    re-sends what was unanswered, it does not forget what was answered."""
    b = Build().alone()
    b.heartbeat("c1", "A-1", 1)
    b._add({"type": "close", "connection": "c1"})
    b.open("c2")
    b.commit("c2", "A-1", 1, [0], error="UNKNOWN_MEMBER_ID")
    b.join("c2", "", response=None)
    verdict = members.check(b.trace(), None)
    assert verdict.status == CONFORMS, verdict.divergence
    assert "R15" in verdict.rules


def test_replaced_static_process_still_running_is_judged_as_itself():
    """A second process with a running member's group.instance.id (tests/test_interop_java.py):
    it takes the member's place under a new member.id, in the same generation, and leads
    without assigning (R25, R26, KIP-814); the first process, still running on its own
    connection, heartbeats and commits under its old member.id and is answered
    FENCED_INSTANCE_ID (R24, R28). A group.instance.id names one member at a time, not one
    process: the old connection's requests are the old process's."""
    b = Build(instance="static-A").alone()
    b.open("c2")
    rejoined = b.joined("A-2", 1, "A-2", [("A-2", (), -1)])
    b.join("c2", "", response={**rejoined, "skip_assignment": True})
    b.sync("c2", "A-2", 1, given=range(PARTITIONS))
    b.heartbeat("c1", "A-1", 1, error="FENCED_INSTANCE_ID")
    b.commit("c1", "A-1", 1, [0, 2], error="FENCED_INSTANCE_ID")
    b.heartbeat("c2", "A-2", 1)
    verdict = members.check(b.trace(), None)
    assert verdict.status == CONFORMS, verdict.divergence
    assert verdict.figures["clients"] == 2


def test_java_poll_timeout_leave_then_rejoin_conforms():
    """Kafka 4.4.0's Java consumer whose application stops polling past
    max.poll.interval.ms (tests/test_interop_java.py): its heartbeat thread sends
    LeaveGroup (KIP-62; AbstractCoordinator.maybeLeaveGroup, "consumer poll timeout has
    expired") and resets its member.id; the next poll rejoins on the same connection as a
    new member; a static one sends no LeaveGroup and rejoins with its group.instance.id.
    A member that left may join again as a new one, as a new process would; one fenced
    (R28) may not."""
    b = Build(instance="static-A").alone()
    b.join("c1", "", response=None)
    verdict = members.check(b.trace(), None)
    assert verdict.status == CONFORMS, verdict.divergence
    for error, status in (("NONE", CONFORMS), ("FENCED_INSTANCE_ID", DIVERGENT)):
        b = Build().alone()
        if error == "NONE":
            b.call("c1", "LeaveGroup", {"members": [{"member_id": "A-1", "group_instance_id": None,
                                                     "reason": "consumer poll timeout has expired."}]},
                   {"error": "NONE", "members": [{"member_id": "A-1", "group_instance_id": None, "error": "NONE"}]})
        else:
            b.heartbeat("c1", "A-1", 1, error=error)
        b.join("c1", "", response=None)
        verdict = members.check(b.trace(), None)
        assert verdict.status == status, (error, verdict.divergence)
    assert verdict.divergence.rule == "R13"


def test_java_static_member_leaving_on_close_conforms():
    """Kafka 4.4.0's consumer closed with CloseOptions LEAVE_GROUP (KIP-1092; the agent's
    ``close leave``): a static member sends LeaveGroup naming only its member.id (R27)."""
    b = Build(instance="static-A").alone()
    b.call("c1", "LeaveGroup", {"members": [{"member_id": "A-1", "group_instance_id": None,
                                             "reason": "the consumer is being closed"}]},
           {"error": "NONE", "members": [{"member_id": "A-1", "group_instance_id": None, "error": "NONE"}]})
    verdict = members.check(b.trace(), None)
    assert verdict.status == CONFORMS, verdict.divergence
    assert "R20" in verdict.rules


@pytest.mark.spec("R14")
def test_eager_member_claiming_diverges():
    """The Java client's default [range, cooperative-sticky] is eager whatever is
    selected (ConsumerCoordinator: the protocol all assignors support): it rejoins
    claiming nothing."""
    for owned, status in (((), CONFORMS), (range(PARTITIONS), DIVERGENT)):
        b = Build(protocols=("range", "cooperative-sticky")).alone()
        b.heartbeat("c1", "A-1", 1, error="REBALANCE_IN_PROGRESS")
        b.join("c1", "A-1", owned=owned, generation=1, response=None)
        verdict = members.check(b.trace(), None)
        assert verdict.status == status
    assert verdict.divergence.rule == "R14"
    assert verdict.divergence.expected == (
        "JoinGroup member_id='A-1' group_instance_id=None owned_partitions=[] generation=-1",)


def test_opaque_metadata_is_incomplete():
    b = Build()
    b.open("c1")
    b.join("c1", "", metadata={"opaque": "AAE="}, response=None)
    verdict = members.check(b.trace(), None)
    assert verdict.status == INCOMPLETE
    assert verdict.uninterpreted == ("line 3: the JoinGroup metadata is opaque bytes (not the consumer protocol)",)


KAFKA_TRACES = Path(__file__).parent / "kafka_traces"


@pytest.mark.spec("R72")
@pytest.mark.parametrize("name", [
    # KIP-848's online migration, the Java consumer 4.4.0 (benchmarks/kip848_runs.py of 12:43 UTC): A's and B's
    # first, classic JoinGroups COORDINATOR_LOAD_IN_PROGRESS
    "kip848_migration_coordinator_loading_java",
    "f2_stale_subscription",  # the Java consumer 4.4.0: its first JoinGroup COORDINATOR_LOAD_IN_PROGRESS
    "join_leave_while_the_coordinator_loads",  # librdkafka 2.16: NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS
    "broker_restart_clients_rejoin_as_new_members",  # librdkafka: NOT_COORDINATOR while the broker restarts
])
def test_joins_the_broker_answered_are_sent_again(name, monkeypatch):
    """A fresh or restarted Kafka 4.4.0 broker answers the first JoinGroups NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS (CoordinatorRuntime, its __consumer_offsets partition not yet
    loaded): the broker's answer, not the group's, after which the client joins again as if the
    response were lost (the model's CoordinatorLost, R72; AbstractCoordinator's JoinGroupResponseHandler
    and joinGroupIfNeeded). These Kafka traces' member sides conform; they were incomplete ('error
    ... is outside the model') while the side did not interpret the answers."""
    trace = read(KAFKA_TRACES / f"{name}.jsonl")
    verdict = members.check(trace)
    assert verdict.status == CONFORMS and "R72" in verdict.rules, verdict.divergence or verdict.uninterpreted
    monkeypatch.setattr(members, "not_the_coordinators", lambda body: False)
    assert members.check(trace).status == INCOMPLETE


def _edited(path: Path, line: int, edit) -> Trace:
    lines = path.read_text().splitlines()
    rec = json.loads(lines[line - 1])
    edit(rec["body"])
    lines[line - 1] = json.dumps(rec)
    return parse(lines)


@pytest.mark.parametrize("edit, rule", [
    (lambda b: b.update(member_id="i-B-never-given"), "R13"),  # a member.id the broker never gave
    (lambda b: b["protocols"][0]["metadata"].update(  # a partition it never owned
        owned_partitions=[{"topic": b["protocols"][0]["metadata"]["topics"][0], "partitions": [0]}], generation=1),
     "R18"),
], ids=["member-id-never-given", "claims-unowned"])
def test_a_wrong_join_after_the_brokers_answer_still_diverges(edit, rule):
    """The Java consumer's JoinGroup sent again after COORDINATOR_LOAD_IN_PROGRESS (B's, line 11 of
    the migration's trace) is held to the model's: under a member.id it was never given (R13), or
    claiming a partition it does not own (R18), it diverges there."""
    verdict = members.check(_edited(KAFKA_TRACES / "kip848_migration_coordinator_loading_java.jsonl", 11, edit))
    assert verdict.status == DIVERGENT and (verdict.divergence.line, verdict.divergence.rule) == (11, rule), \
        verdict.divergence


@pytest.mark.spec("R72")
@pytest.mark.parametrize("retry, status", [("join", CONFORMS), ("sync", DIVERGENT)])
def test_a_sync_the_broker_answered_is_a_join_again(retry, status):
    """SyncGroup answered NOT_COORDINATOR: the Java consumer marks the coordinator unknown and
    its join future fails (SyncGroupResponseHandler), so it sends JoinGroup again under its
    member.id (R72), not the SyncGroup."""
    b = Build()
    b.open("c1")
    b.join("c1", "", response=b.joined("", -1, "", error="COORDINATOR_LOAD_IN_PROGRESS"))
    b.join("c1", "", response=b.joined("A-1", -1, "", error="MEMBER_ID_REQUIRED"))
    b.join("c1", "A-1", response=b.joined("A-1", 1, "A-1", [("A-1", (), -1)]))
    b.call("c1", "SyncGroup", {"generation_id": 1, "member_id": "A-1", "group_instance_id": None,
                               "protocol_type": "consumer", "protocol_name": "cooperative-sticky",
                               "assignments": [{"member_id": "A-1", "assignment": b.assignment(range(PARTITIONS))}]},
           {"error": "NOT_COORDINATOR", "protocol_type": None, "protocol_name": None, "assignment": None})
    if retry == "join":
        b.join("c1", "A-1", response=b.joined("A-1", 2, "A-1", [("A-1", (), -1)]))
        b.sync("c1", "A-1", 2, [("A-1", range(PARTITIONS))], given=range(PARTITIONS))
    else:
        b.sync("c1", "A-1", 1, [("A-1", range(PARTITIONS))], given=range(PARTITIONS))
    verdict = members.check(b.trace(), None)
    assert verdict.status == status, verdict.divergence
    if status == CONFORMS:
        assert "R72" in verdict.rules
    else:
        assert verdict.divergence.rule == "R8" and verdict.divergence.record["api"] == "SyncGroup"


@pytest.mark.spec("R15", "R22", "R23")
def test_a_stale_claim_does_not_hide_the_double_assignment_behind_it():
    """Issue 43: conform reports every divergence. A, expelled while paused, rejoins
    still claiming what it lost (R15); the side resynchronises on the model's own
    JoinGroup, A owning what it claimed (its next JoinGroup, under the new member.id,
    then matches), and goes on, so the leader's assignment to A of partitions B
    claims at a newer generation (R23, claims weighed by generation, R22) is
    reported too: what kafka-python's stale claim could lead to (docs/explanation/findings.md)."""
    b = Build().alone()  # A-1 owns t-0..t-3 at generation 1
    b.open("c2")
    b.join("c2", "", response=b.joined("B-1", -1, "", error="MEMBER_ID_REQUIRED"))
    b.join("c2", "B-1", response=b.joined("B-1", 2, "B-1", [("B-1", (), -1)]))  # A paused and expelled
    b.sync("c2", "B-1", 2, [("B-1", range(PARTITIONS))], given=range(PARTITIONS))
    b.heartbeat("c1", "A-1", 1, error="UNKNOWN_MEMBER_ID")  # A resumes
    stale = len(b.lines) + 1
    b.join("c1", "", owned=range(PARTITIONS), generation=1,
           response=b.joined("A-2", -1, "", error="MEMBER_ID_REQUIRED"))
    b.join("c1", "A-2", owned=range(PARTITIONS), generation=1, response=None)
    b.heartbeat("c2", "B-1", 2, error="REBALANCE_IN_PROGRESS")
    b.join("c2", "B-1", owned=range(PARTITIONS), generation=2, response=b.joined(
        "B-1", 3, "B-1", [("A-2", range(PARTITIONS), 1), ("B-1", range(PARTITIONS), 2)]))
    double = len(b.lines) + 1
    b.sync("c2", "B-1", 3, [("A-2", [0, 1]), ("B-1", [2, 3])], given=[2, 3])
    verdict = members.check(b.trace(), None)
    assert verdict.status == DIVERGENT
    assert [(d.line, d.rule) for d in verdict.divergences] == [(stale, "R15"), (double, "R23")]
    assert verdict.divergence == verdict.divergences[0] and verdict.figures["skipped_resynchronising"] == 0
    assert verdict.divergences[1].record["api"] == "SyncGroup"


def test_a_request_the_model_sends_nothing_for_says_why():
    """Issue 43: "the model allows nothing" names the states the member can be in."""
    b = Build().alone()
    b.join("c1", "A-1", owned=range(PARTITIONS), generation=1,  # nothing asked it to rejoin
           response=b.joined("A-1", 2, "A-1", [("A-1", range(PARTITIONS), 1)]))
    verdict = members.check(b.trace(), None)
    (why,) = verdict.divergence.expected
    assert why.startswith("nothing: in none of the") and "STABLE as 'A-1' at generation 1" in why
    assert "nothing to send (no error, revocation or rebalance asks it to rejoin)" in why
    # the side takes the JoinGroup as sent and goes on: the round it began conforms
    b.sync("c1", "A-1", 2, [("A-1", range(PARTITIONS))], given=range(PARTITIONS))
    b.heartbeat("c1", "A-1", 2)
    b.commit("c1", "A-1", 2, [0])
    verdict = members.check(b.trace(), None)
    assert len(verdict.divergences) == 1 and verdict.figures["skipped_resynchronising"] == 0
