"""Hypothesis strategies for fuzzing group rebalancing: your own assignor, your own
coordinator, or the model itself (``rebalance.strategies``; issue 20 item 3).

Assignors::

    from hypothesis import given
    from rebalance.strategies import group_configs, subscriptions

    @given(st.data())
    def test_my_assignor(data):
        cfg = data.draw(group_configs(protocols=("cooperative",)))
        members = data.draw(subscriptions(cfg))
        out = my_assign(cfg, members)       # ((member_id, Assignment), ...)
        ...                                 # every partition once, loads within one, ...

``members`` is what the leader's assignor receives (model/assignors.py ``assign``):
``((member_id, group_instance_id, Subscription(owned, generation)), ...)``, owned
partitions a bitmask over ``cfg``'s partitions (``cfg.partition_name(i)``), each
claim with the generation it was assigned in (KIP-792), claims overlapping as after
a missed rebalance (stale generations) or a zombie (equal generations: contested).

Scenarios: ``group_events(...)`` draws ``[{"action": "join", "member": "D"}, ...]``,
the ``[[events]]`` of a ``rebalance replay`` scenario (checker/replay.py).

The model: ``walks(system, names, max_steps)`` draws an execution of a
``checker.system.System`` step by step (each step one of the enabled transitions,
as ``check --walks`` chooses them, but chosen by hypothesis, so a failure shrinks
to a short execution) with every safety property in ``names`` checked at each step;
its value is a ``Walk`` (the path and the first violation, or None).

Coordinators: ``CoordinatorMachine`` is a stateful test (RuleBasedStateMachine)
speaking Kafka's wire protocol on real sockets to a coordinator recording a trace
(``rebalance serve --trace``, or any broker behind ``rebalance proxy --trace``); at
the end of each example it holds the example's trace against the model's
coordinator (checker/conform/coordinator.py: member ids matched up to renaming,
timers with ``slack_ms``), failing with the first divergent response and its rule.
Make one with ``coordinator_machine(port, trace_path)``.
"""
from __future__ import annotations

import json
import select
import socket
import struct
import uuid
from pathlib import Path
from typing import NamedTuple

from rebalance.extras import require

require("fuzz", "rebalance.strategies")

from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from rebalance.checker.conform import coordinator as conform
from rebalance.checker.conform.trace import parse
from rebalance.checker.conform.verdict import CONFORMS
from rebalance.checker.engines.walks import Checks, run
from rebalance.checker.render import lane
from rebalance.checker.system import FAULTS, System
from rebalance.impl.consumer_protocol import encode_assignment, encode_subscription
from rebalance.impl.wire import Api, read_response, request_frame
from rebalance.model.config import ASSIGNORS, PROTOCOLS, GroupConfig
from rebalance.model.protocol import NO_GENERATION, NO_INSTANCE_ID, Assignment, Subscription, member_id

__all__ = ["group_configs", "subscriptions", "group_events", "walks", "Walk", "CoordinatorMachine",
           "coordinator_machine"]


def group_configs(protocols=PROTOCOLS, assignors=None, max_topics: int = 2, max_partitions: int = 8):
    """GroupConfig values: a protocol of ``protocols``, an assignor of ``assignors``
    (default: those the protocol accepts, model/config.py), 1..``max_topics`` topics
    ``t0``, ``t1``, ... of 1..``max_partitions`` partitions each."""
    @st.composite
    def build(draw):
        protocol = draw(st.sampled_from(protocols))
        choices = [a for a in (assignors or ASSIGNORS) if _accepts(protocol, a)]
        topics = draw(st.lists(st.integers(1, max_partitions), min_size=1, max_size=max_topics))
        return GroupConfig(topics=tuple((f"t{i}", n) for i, n in enumerate(topics)), protocol=protocol,
                           assignor=draw(st.sampled_from(choices)))
    return build()


def _accepts(protocol: str, assignor: str) -> bool:
    try:
        GroupConfig(protocol=protocol, assignor=assignor)
    except ValueError:
        return False
    return True


def subscriptions(cfg: GroupConfig, min_members: int = 1, max_members: int = 6, max_generation: int = 8,
                  static: bool = False):
    """The leader's view of the group for ``cfg``'s assignor: ``((member_id,
    group_instance_id, Subscription), ...)`` of ``min_members``..``max_members``
    members (member ids as the model numbers them: slot ``i``'s first id; static
    members get group.instance.ids with ``static``). Each member claims any subset
    of the partitions (overlaps included) with a generation in 0..``max_generation``,
    or nothing (``NO_GENERATION``)."""
    everything = cfg.all_partitions

    @st.composite
    def build(draw):
        count = draw(st.integers(min_members, max_members))
        members = []
        for slot in range(count):
            owned = draw(st.integers(0, everything))
            generation = draw(st.integers(0, max_generation)) if owned else NO_GENERATION
            iid = slot + 1 if static else NO_INSTANCE_ID
            members.append((member_id(slot, 1), iid, Subscription(owned, generation)))
        return tuple(members)
    return build()


def group_events(slots: int = 4, min_size: int = 1, max_size: int = 12, actions=FAULTS + ("resume",)):
    """A ``rebalance replay`` scenario's events: ``[{"action": ..., "member": "A"}, ...]``
    over lanes ``A``.. of ``slots`` client slots, actions of ``actions`` (join, leave,
    crash, restart, pause, resume). Not every sequence is possible from every group
    (a join of a running member is refused, replay exit 2): filter with your scenario."""
    event = st.fixed_dictionaries({"action": st.sampled_from(actions),
                                   "member": st.integers(0, slots - 1).map(lane)})
    return st.lists(event, min_size=min_size, max_size=max_size)


class Walk(NamedTuple):
    """One drawn execution: ``path`` ``[(Action | None, State), ...]`` from the
    initial state, and ``violation`` ``(property, reason)`` at its last state, or None."""

    path: list
    violation: tuple | None

    def __repr__(self) -> str:  # hypothesis prints it for a failing example: the actions, not the states
        steps = " ".join(f"{a.kind}:{'coordinator' if a.slot < 0 else lane(a.slot)}" for a, _ in self.path[1:])
        return f"Walk({len(self.path) - 1} steps: {steps}; violation={self.violation!r})"


def walks(system: System, names, max_steps: int = 200):
    """Executions of ``system`` (checker/system.py) of up to ``max_steps`` steps, each
    step drawn among ``system.successors`` of the state reached, with the safety
    properties ``names`` (checker/properties.py; liveness ones are skipped) checked
    on every state and step as ``check --walks`` checks them
    (checker/engines/walks.py ``run``), the walk cut at the first violation. The
    length is drawn first and each step's choice after, so hypothesis shrinks a
    violating walk to fewer steps and to the first-listed transitions."""
    checks = Checks(names)

    @st.composite
    def build(draw):
        length = draw(st.integers(0, max_steps))
        pick = lambda i, succ: draw(st.integers(0, len(succ) - 1))  # noqa: E731
        path, _, violation, _ = run(system, checks, system.initial(), pick, length)
        return Walk(path, violation)
    return build()


# --- a coordinator on the wire, against the model --------------------------------------------------


class Connection:
    """One client connection speaking Kafka's wire protocol without blocking on a
    response: ``send`` a request, ``poll`` for the responses that arrived."""

    def __init__(self, port: int, client_id: str, host: str = "127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.client_id, self.correlation, self.waiting, self.buffer = client_id, 0, {}, b""

    def send(self, api: int, version: int, **fields) -> None:
        self.correlation += 1
        self.waiting[self.correlation] = (api, version)
        self.sock.sendall(request_frame(api, version, self.correlation, self.client_id, fields))

    def poll(self, timeout_s: float) -> list:
        """The ``(api, body)`` of every response complete within ``timeout_s`` seconds."""
        out = []
        while self.waiting:
            frame = self._frame()
            if frame is None:
                if not select.select([self.sock], [], [], timeout_s)[0]:
                    break
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed by the coordinator")
                self.buffer += data
                continue
            correlation = struct.unpack(">i", frame[:4])[0]
            api, version = self.waiting.pop(correlation)
            out.append((api, read_response(frame, api, version)[1]))
        return out

    def _frame(self) -> bytes | None:
        if len(self.buffer) < 4:
            return None
        size = struct.unpack(">i", self.buffer[:4])[0]
        if len(self.buffer) < 4 + size:
            return None
        frame, self.buffer = self.buffer[4:4 + size], self.buffer[4 + size:]
        return frame

    def close(self) -> None:
        self.sock.close()


class Slot:
    """What a fuzzed client knows: its connection, member id, generation and, when it
    leads, the members it was told of."""

    def __init__(self, conn: Connection):
        self.conn, self.member_id, self.generation, self.members = conn, "", -1, ()
        self.required = False  # the last JoinGroup was answered MEMBER_ID_REQUIRED
        self.joined = False  # a JoinGroup succeeded: a client sends SyncGroup next
        self.instance = None  # group.instance.id (KIP-345), or None: a dynamic member
        self.previous = ""  # the member id before the last one handed out (a zombie's, a replaced static member's)


RESPONSE_WAIT_S = 0.05  # how long a rule waits for its response before leaving it pending (a held JoinGroup)


class CoordinatorMachine(RuleBasedStateMachine):
    """Clients of one fresh group (``group-<uuid>``) on up to ``SLOTS`` connections
    send JoinGroup (v9: KIP-394's MEMBER_ID_REQUIRED first, then with the id; dynamic
    or static, KIP-345), SyncGroup (a leader assigns the members it was told of, round
    robin), Heartbeat, LeaveGroup, OffsetCommit (at the current or a stale generation,
    under the current member id or the previous one, as a zombie would) and close their
    connections, one request in flight per connection (Kafka's SocketServer mutes
    a channel while one is), in an order hypothesis chooses; ``settle`` waits for
    held responses and timers (session and rebalance timeouts ``TIMEOUT_MS``). At
    teardown the example's trace (the records of its connections) is checked against
    the model's coordinator (checker/conform/coordinator.py ``check``); a divergence
    fails the example with the record and the spec rule. Class attributes ``port``,
    ``trace`` (the coordinator's trace file) and ``model_mutations`` (the model
    checked against; None: the trace header's) are set by ``coordinator_machine``."""

    SLOTS = 3
    TIMEOUT_MS = 1000
    # How far a timer may fire from its deadline when the trace is judged (conform's
    # slack_ms, default 1000 ms). At the default, equal to the timeouts, any timer may
    # fire anywhere from 0 to 2 s after it started: the timers constrain nothing and the
    # candidate frontier grew past its bound in a long barrier (``conform: incomplete``
    # on 3 clients' joins, closes and leaves; tests/test_fuzz.py). serve on loopback
    # fires its timers within milliseconds; half the timeouts leaves room for a loaded
    # machine and keeps the order of the timers meaningful.
    SLACK_MS = TIMEOUT_MS // 2
    port: int = 0
    trace: Path = Path()
    model_mutations: tuple | None = None
    topics = (("t", 4),)

    @initialize()
    def begin(self):
        self.group = f"group-{uuid.uuid4().hex[:8]}"
        self.mark = self.trace.stat().st_size
        self.cfg = GroupConfig(topics=self.topics)
        self.slots: list[Slot | None] = [None] * self.SLOTS

    def _slot(self, i: int) -> Slot | None:
        """Slot ``i``, connected if it was not, or None while its request is in flight."""
        if self.slots[i] is None:
            self.slots[i] = Slot(Connection(self.port, f"client-{lane(i)}"))
        s = self.slots[i]
        self._absorb(s, RESPONSE_WAIT_S if s.conn.waiting else 0)
        self._follow(s)
        return None if s.conn.waiting else s

    def _absorb(self, s: Slot, timeout_s: float) -> None:
        for api, body in s.conn.poll(timeout_s):
            if api == Api.JOIN_GROUP and body.error_code in (0, 79):  # NONE, MEMBER_ID_REQUIRED
                if body.member_id != s.member_id:
                    s.previous = s.member_id
                s.member_id, s.required = body.member_id, body.error_code == 79
                if body.error_code == 0:
                    s.generation, s.joined = body.generation_id, True
                    s.members = tuple(m.member_id for m in body.members) if body.leader == body.member_id else ()

    def _send(self, s: Slot, api: int, version: int, **fields) -> None:
        s.conn.send(api, version, group_id=self.group, **fields)
        self._absorb(s, RESPONSE_WAIT_S)
        self._follow(s)

    def _follow(self, s: Slot) -> None:
        """What a client sends next without being asked (AbstractCoordinator's
        JoinGroupResponseHandler): after MEMBER_ID_REQUIRED, JoinGroup with the id
        (KIP-394); after a successful JoinGroup, SyncGroup. The ``join`` and ``sync``
        rules add fresh, stale and repeated ones."""
        if s.conn.waiting:
            return
        if s.required:
            s.required = False
            self.join_of(s, s.member_id)
        elif s.joined:
            s.joined = False
            self.sync_of(s)

    @rule(i=st.integers(0, SLOTS - 1), fresh=st.booleans(), static=st.booleans())
    def join(self, i, fresh, static):
        """JoinGroup, with the member id known (or none: ``fresh``), as a static member
        (KIP-345: group.instance.id ``instance-<lane>``, one per slot) or not."""
        s = self._slot(i)
        if s is not None:
            s.instance = f"instance-{lane(i)}" if static else None
            self.join_of(s, "" if fresh else s.member_id)

    def join_of(self, s: Slot, member: str) -> None:
        sub = encode_subscription(self.cfg, Subscription(0, NO_GENERATION))
        self._send(s, Api.JOIN_GROUP, 9, session_timeout=self.TIMEOUT_MS, rebalance_timeout=self.TIMEOUT_MS,
                   member_id=member, group_instance_id=s.instance, protocol_type="consumer",
                   protocols=[{"name": "range", "metadata": sub}], reason=None)

    @rule(i=st.integers(0, SLOTS - 1))
    def sync(self, i):
        s = self._slot(i)
        if s is not None:
            self.sync_of(s)

    def sync_of(self, s: Slot) -> None:
        n = self.cfg.num_partitions
        assignments = [{"member_id": m, "assignment": encode_assignment(
            self.cfg, Assignment(sum(1 << p for p in range(k, n, len(s.members)))))}
            for k, m in enumerate(s.members)]
        self._send(s, Api.SYNC_GROUP, 5, generation_id=s.generation, member_id=s.member_id, group_instance_id=s.instance,
                   protocol_type="consumer", protocol_name="range", assignments=assignments)

    @rule(i=st.integers(0, SLOTS - 1), old=st.booleans())
    def heartbeat(self, i, old):
        """Heartbeat, under the current member id or (``old``) the one before it, as a
        zombie would (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID for a replaced static member)."""
        s = self._slot(i)
        if s is not None:
            self._send(s, Api.HEARTBEAT, 4, generation_id=s.generation, member_id=s.previous if old else s.member_id,
                       group_instance_id=s.instance)

    @rule(i=st.integers(0, SLOTS - 1))
    def leave(self, i):
        s = self._slot(i)
        if s is not None:
            self._send(s, Api.LEAVE_GROUP, 3, members=[{"member_id": s.member_id, "group_instance_id": s.instance}])

    @rule(i=st.integers(0, SLOTS - 1), stale=st.integers(0, 2), old=st.booleans())
    def commit(self, i, stale, old):
        """OffsetCommit at the current generation or ``stale`` before it, under the
        current member id or (``old``) the one before it."""
        s = self._slot(i)
        if s is not None:
            self._send(s, Api.OFFSET_COMMIT, 8, generation_id_or_member_epoch=s.generation - stale,
                       member_id=s.previous if old else s.member_id, group_instance_id=s.instance, topics=[{"name": "t", "partitions": [
                           {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                            "committed_metadata": None}]}])

    @rule(i=st.integers(0, SLOTS - 1))
    def close(self, i):
        if self.slots[i] is not None:
            self.slots[i].conn.close()
            self.slots[i] = None

    @rule()
    def settle(self):
        """Let held responses come and timers fire: wait up to a little past ``TIMEOUT_MS``."""
        busy = [s for s in self.slots if s is not None and s.conn.waiting]
        if busy:
            select.select([s.conn.sock for s in busy], [], [], self.TIMEOUT_MS * 1.2 / 1000)
            for s in busy:
                self._absorb(s, 0)
                self._follow(s)

    def teardown(self):
        for s in filter(None, getattr(self, "slots", ())):
            s.conn.close()
        if hasattr(self, "mark"):
            verdict = check_since(self.trace, self.mark, self.model_mutations, self.SLACK_MS)
            assert verdict.status == CONFORMS, divergence_text(verdict)


def check_since(trace: Path, mark: int, mutations=None, slack_ms: float | None = None):
    """The conform verdict (checker/conform/coordinator.py) of the records of ``trace``
    from byte ``mark`` on, on connections opened there (complete lines only), under
    the header's settings, its mutations replaced by ``mutations`` unless None, timers
    judged with ``slack_ms`` (ms; None: conform's default)."""
    data = trace.read_bytes()
    header = json.loads(data[:data.index(b"\n")])
    if mutations is not None:
        header["settings"]["mutations"] = list(mutations)
    lines, mine = [json.dumps(header)], set()
    for raw in data[mark:].split(b"\n")[:-1]:
        record = json.loads(raw)
        if record["type"] == "open":
            mine.add(record["connection"])
        if record.get("connection") in mine:
            lines.append(raw.decode())
    return conform.check(parse(lines, str(trace)), None if slack_ms is None else {"slack_ms": slack_ms})


def divergence_text(verdict) -> str:
    d = verdict.divergence
    if d is None:
        return f"conform: {verdict.status}"
    return (f"the coordinator and the model part at trace line {d.line} ({d.rule}): {d.reason}\n"
            f"  recorded: {json.dumps(d.record)}\n" + "".join(f"  the model allows: {e}\n" for e in d.expected))


def coordinator_machine(port: int, trace: str | Path, model_mutations=None) -> type:
    """A ``CoordinatorMachine`` subclass for the coordinator on ``port`` (localhost)
    whose trace goes to ``trace``; ``model_mutations``: the model's mutations (None:
    as the trace header says, i.e. the coordinator's own). Run it with
    ``hypothesis.stateful.run_state_machine_as_test`` or as ``TestX = m.TestCase``."""
    return type("Coordinator", (CoordinatorMachine,), {
        "port": port, "trace": Path(trace), "model_mutations": model_mutations})
