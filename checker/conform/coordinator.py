"""The coordinator side of ``rebalance conform``: is every response in the trace one
the model's coordinator (model/coordinator.py ``handle``) could give, from the
state the trace has reached?

Requests are fed to the model as impl/coordinator.py feeds them (``rebalance
serve``'s path): Kafka's member.id strings become the model's member ids, each
group.instance.id string a model instance id, a traced connection a model
connection on the client slot of its client.id, JoinGroup's protocols
``Protocols`` whose opaque metadata is the canonical JSON of the decoded
metadata (so the coordinator compares them as bytes, as Kafka does), SyncGroup's
assignments the same, and a JoinGroup v4+ requires a known member id (KIP-394).

Ids match up to renaming: a traced member.id string is bound to the model's
member id at the first response that hands it out (a bijection); a string never
handed out is unknown, as in impl/ (``UNKNOWN_ID``).

Nondeterminism is resolved by a bounded search (trace checking as constrained
model checking: Cirstea, Kuppe, Loillier, Merz 2024). The records are the
observations; between them the coordinator takes silent steps:

* it processes a received request: one connection's requests in order, the next
  only once the previous one's response is produced (Kafka's SocketServer mutes
  a channel while a request is in flight), connections in any order (behind a
  proxy, the broker may have processed them in another order than recorded);
* a timer fires (SessionTimeout, RebalanceTimeout, SyncTimeout,
  InitialRebalanceDelay, PendingMemberTimeout): only if the model has it armed
  and its deadline minus ``slack_ms`` has passed at the record's ``t_ms``; and it
  must have fired before any step later than its deadline plus ``slack_ms``.
  Deadlines are model/timing.py's (``rearm``, ``duration_ms``,
  ``joined_timeouts``, the header's group_initial_rebalance_delay_ms), exactly as
  impl/ arms its asyncio timers.

A frontier of candidate states (deduplicated) is kept per group; those that
cannot produce a response as recorded are dropped. A group whose first request
names a member.id (or that a restart loaded) existed before the trace began: a
divergence there is INCOMPLETE, its starting state being unknown. A response no
candidate matches is a divergence, with the rule that decides it
(``RULES``, spec/SPEC.md section 10). The side then resynchronises: the candidates
that had this response ready go on with the model's own answer in its place, and
the group's responses the model cannot give are skipped, not reported, until one
matches again; every divergence found so is reported. A group with no candidate
to go on from (the model held the request, or an expiry or injected input no
candidate could take) is judged no further. A ``restart`` record resumes each group
from what the model stored last (``stored``, R37), every session timer
restarted. OffsetFetch and DescribeGroups read state the model does not keep
(offsets, descriptions): they are counted, not judged. KIP-848's ConsumerGroupDescribe
is judged per consumer group (checker/conform/consumer_coordinator.py ``describe``).
"""
from __future__ import annotations

import json
from typing import NamedTuple

from rebalance.model import protocol as P
from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import EMPTY_GROUP, find, handle, session_refreshed, stored
from rebalance.model.protocol import (
    EMPTY_ASSIGNMENT, MAX_SLOTS, NO_GENERATION, NO_INSTANCE_ID, NO_MEMBER_ID, Error, ForceRebalance, Heartbeat,
    InitialRebalanceDelay, JoinGroup, JoinGroupResponse, LeaveGroup, OffsetCommit, OffsetCommitResponse,
    PendingMemberTimeout, Phase, Protocols, RebalanceTimeout, Receive,
    SessionTimeout, SyncGroup, SyncTimeout, connection,
)
from rebalance.impl.broker import Cluster
from rebalance.model.consumer_group.messages import ConsumerGroupHeartbeatResponse
from rebalance.model.timing import (
    DEFAULT_TIMEOUTS, SessionBounds, Timeouts, duration_ms, joined_timeouts, rearm, session_timeout_error,
)

from .trace import Trace

# the answer to an OffsetCommit naming no partition the broker hosts: the broker
# answers it (UNKNOWN_TOPIC_OR_PARTITION for each) and the coordinator never sees it
NOT_HOSTED = OffsetCommitResponse(Error.NONE)
from .verdict import CONFORMS, DIVERGENT, INCOMPLETE, Divergence, Verdict, divergent

SIDE = "coordinator"
UNKNOWN_ID = -1  # a member.id string the coordinator never handed out (impl/coordinator.py's UNKNOWN_ID)
DEFAULT_SLACK_MS = 1000
DEFAULT_MAX_CANDIDATES = 10_000
MAX_SILENT_STEPS = 64  # silent steps between two records, per candidate
GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit")
DELETE = "DeleteGroups"  # a DeleteGroups request awaiting its answer, judged per group (R44)
DESCRIBE = "ConsumerGroupDescribe"  # KIP-848's, judged per consumer group (consumer_coordinator.py ``describe``)
GROUP_BY_GROUP = {"DeleteGroups": DELETE, "ConsumerGroupDescribe": DESCRIBE}
NOT_JUDGED = ("OffsetFetch", "DescribeGroups")
RESPONSE_OF = {request.__name__: response for request, response in P.RESPONSE_OF.items()}
RESPONSE_OF["ConsumerGroupHeartbeat"] = ConsumerGroupHeartbeatResponse  # KIP-848 (consumer_coordinator.py)

# The rule that decides a response, by API and error (the error the model allows
# there when it differs from the recorded one, else the recorded one), spec/SPEC.md
# section 10. (api, None) is the API's rule for a field other than the error.
RULES = {
    ("JoinGroup", "MEMBER_ID_REQUIRED"): "R36", ("JoinGroup", "FENCED_INSTANCE_ID"): "R25",
    ("JoinGroup", "UNKNOWN_MEMBER_ID"): "R24", ("JoinGroup", "INCONSISTENT_GROUP_PROTOCOL"): "R35",
    ("JoinGroup", "COORDINATOR_NOT_AVAILABLE"): "R1", ("JoinGroup", "NONE"): "R2",
    ("JoinGroup", "generation_id"): "R4", ("JoinGroup", "leader"): "R5", ("JoinGroup", "members"): "R4",
    ("JoinGroup", "protocol_name"): "R35", ("JoinGroup", "skip_assignment"): "R26",
    ("JoinGroup", "member_id"): "R2", ("JoinGroup", "held"): "R4", ("JoinGroup", "INVALID_SESSION_TIMEOUT"): "R42",
    ("SyncGroup", "FENCED_INSTANCE_ID"): "R24", ("SyncGroup", "UNKNOWN_MEMBER_ID"): "R8",
    ("SyncGroup", None): "R8",
    ("Heartbeat", "FENCED_INSTANCE_ID"): "R24", ("Heartbeat", None): "R10",
    ("LeaveGroup", None): "R7",
    ("OffsetCommit", "FENCED_INSTANCE_ID"): "R24", ("OffsetCommit", None): "R9",
}
# timers: the rule each one's firing exercises
TIMER_RULES = {SessionTimeout: "R11", RebalanceTimeout: "R4", SyncTimeout: "R12", InitialRebalanceDelay: "R30",
               PendingMemberTimeout: "R36"}
TIMER_RULES_BY_NAME = {timer.__name__: rule for timer, rule in TIMER_RULES.items()}
# a consumed response exercises these rules (by API, error)
EXERCISED = {
    ("JoinGroup", "NONE"): ("R2", "R4", "R5"), ("JoinGroup", "MEMBER_ID_REQUIRED"): ("R36",),
    ("JoinGroup", "FENCED_INSTANCE_ID"): ("R24", "R25"), ("JoinGroup", "UNKNOWN_MEMBER_ID"): ("R24",),
    ("JoinGroup", "INCONSISTENT_GROUP_PROTOCOL"): ("R35",), ("JoinGroup", "INVALID_SESSION_TIMEOUT"): ("R42",),
    ("SyncGroup", None): ("R8",), ("Heartbeat", None): ("R10",), ("LeaveGroup", None): ("R7",),
    ("OffsetCommit", None): ("R9",),
}


def rule_for(api: str, key, body: dict | None = None) -> str:
    """The spec rule (R..) deciding ``api``'s response where it differs in ``key``
    (an error name or a field name); ``body``: the request's. A static member's
    JoinGroup with an empty member.id is a replacement (R25) whatever differs in
    its successful response."""
    if isinstance(key, str) and key.startswith("late:"):  # produced too long before it was recorded
        return TIMER_RULES_BY_NAME.get(key[5:]) or RULES.get((api, None)) or "R1"
    if (api == "JoinGroup" and body is not None and body["group_instance_id"] and not body["member_id"]
            and key in ("generation_id", "leader", "members", "skip_assignment", "member_id", "held")):
        return "R25"
    return RULES.get((api, key)) or RULES.get((api, None)) or "R1"


def canonical(value) -> bytes:
    """The opaque bytes conform hands the model for decoded metadata or an
    assignment: canonical JSON (sorted keys, no spaces); b"" for none."""
    if value is None:
        return b""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def error_name(code) -> str:
    """Kafka's error name for a model Error (or an int the model does not name)."""
    return code.name if isinstance(code, Error) else str(code)


class Options(NamedTuple):
    """``slack_ms``: how far a timer may fire from its deadline (ms);
    ``max_candidates``: the frontier bound (exit 3 when hit); ``mutations``: judge
    against the model with these switched on (model/mutations.py)."""

    slack_ms: float = DEFAULT_SLACK_MS
    max_candidates: int = DEFAULT_MAX_CANDIDATES
    mutations: frozenset = frozenset()


# --- the trace, prepared once -------------------------------------------------------


class Request(NamedTuple):
    """A traced group request, prepared: its line, connection, model connection,
    time, api, version, correlation id, and the body's parts that are the same in
    every candidate (metadata and assignments as canonical bytes, instance ids)."""

    line: int
    conn: str
    model_conn: int
    t_ms: float
    api: str
    version: int
    correlation_id: int
    body: dict
    iid: int
    protocols: tuple
    timeouts: Timeouts | None


class _Prepared:
    """What the trace says, independent of any candidate: model connections (a
    client slot per client.id, in order of first request), group.instance.id
    strings as model instance ids (per group, in order of first use)."""

    def __init__(self):
        self.slots: dict = {}
        self.model_conns: dict = {}
        self.conn_names: dict = {}
        self.instances: dict = {}  # group -> {name: iid}
        self.instance_names: dict = {}  # group -> {iid: name}

    def model_conn(self, conn: str, client_id) -> int:
        if conn not in self.model_conns:
            slot = self.slots.setdefault(client_id, len(self.slots) % MAX_SLOTS)
            mc = connection(slot, len(self.model_conns) + 1)
            self.model_conns[conn], self.conn_names[mc] = mc, conn
        return self.model_conns[conn]

    def iid(self, group: str, name) -> int:
        if not name:
            return NO_INSTANCE_ID
        table = self.instances.setdefault(group, {})
        if name not in table:
            table[name] = len(table) + 1
            self.instance_names.setdefault(group, {})[table[name]] = name
        return table[name]

    def instance_name(self, group: str, iid: int):
        return self.instance_names.get(group, {}).get(iid)

    def request(self, line: int, record: dict) -> Request:
        body, api, gid = record["body"], record["api"], record["body"]["group_id"]
        mc = self.model_conn(record["connection"], record.get("client_id"))
        protocols, timeouts, iid = (), None, NO_INSTANCE_ID
        if api == "JoinGroup":
            protocols = tuple((p["name"], canonical(p["metadata"])) for p in body["protocols"])
            timeouts = Timeouts(body["session_timeout_ms"], body["rebalance_timeout_ms"])
        if api == "LeaveGroup":
            for m in body["members"]:
                self.iid(gid, m["group_instance_id"])
        else:  # ConsumerGroupHeartbeat's is instance_id
            iid = self.iid(gid, body["group_instance_id"] if "group_instance_id" in body else body["instance_id"])
        return Request(line, record["connection"], mc, record["t_ms"], api, record["version"],
                       record["correlation_id"], body, iid, protocols, timeouts)


# --- candidates ---------------------------------------------------------------------


class Candidate:
    """One state the coordinator may be in after the records so far: the model's
    Group and the last group it stored (R37); member.id bindings (model id <->
    string); each member's Timeouts; armed timers (key -> (timer, deadline ms));
    per connection, the requests received and not yet processed (``queued``) and
    those processed whose responses are not yet observed (``awaiting``: [request,
    produced response or None]); ``produced``: when each produced response was
    produced and by which timer's step ((connection, correlation id) -> (ms, timer
    name or "")); ``now``: the time of its last step (ms); ``fired``: the rules of the timers
    fired since the last observation; ``loading``: a broker behind a proxy restarted
    and its timers start when it first processes a request (``_Group.restart``)."""

    __slots__ = ("group", "stored", "names", "ids", "timeouts", "timers", "queued", "awaiting", "produced", "now",
                 "fired", "closed", "loading")

    def copy(self) -> "Candidate":
        c = Candidate.__new__(Candidate)
        c.group, c.stored, c.now = self.group, self.stored, self.now
        c.names, c.ids, c.timeouts, c.timers = dict(self.names), dict(self.ids), dict(self.timeouts), dict(self.timers)
        c.queued = dict(self.queued)
        c.awaiting = {k: list(v) for k, v in self.awaiting.items()}
        c.produced = dict(self.produced)
        c.fired, c.closed, c.loading = set(self.fired), self.closed, self.loading
        return c

    def key(self) -> tuple:
        return (self.group, self.stored, tuple(sorted(self.names.items())), tuple(sorted(self.timeouts.items())),
                tuple(sorted((repr(k), v) for k, v in self.timers.items())),
                tuple(sorted((k, tuple(r.line for r in v)) for k, v in self.queued.items() if v)),
                tuple(sorted((k, tuple((r.line, resp) for r, resp in v)) for k, v in self.awaiting.items() if v)),
                tuple(sorted(self.produced.items())), self.now, self.loading)


def _initial() -> Candidate:
    c = Candidate.__new__(Candidate)
    c.group = c.stored = EMPTY_GROUP
    c.names, c.ids, c.timeouts, c.timers, c.queued, c.awaiting, c.produced = {}, {}, {}, {}, {}, {}, {}
    c.now, c.fired, c.closed, c.loading = 0.0, set(), frozenset(), False
    return c


class _Group:
    """The search over one group's candidates."""

    def __init__(self, side: "_Side", group_id: str):
        self.side, self.group_id = side, group_id
        self.frontier = [self.initial()]

    def initial(self) -> Candidate:
        """The candidate of a group not yet created."""
        return _initial()

    def refreshed(self, req) -> int:
        """The member whose session a request's step restarts (model/coordinator.py)."""
        return session_refreshed(self.side.cfg, req)

    def timer_rule(self, timer) -> str:
        """The rule a timer's firing exercises."""
        return TIMER_RULES[type(timer)]

    rule_for = staticmethod(rule_for)

    @staticmethod
    def is_empty(group) -> bool:
        """Whether the coordinator may remove ``group`` (R43)."""
        return group.phase == Phase.EMPTY

    @staticmethod
    def is_dead(group) -> bool:
        return group.phase == Phase.DEAD

    @staticmethod
    def exercised(api: str, body: dict) -> tuple:
        """The rules a consumed response exercises."""
        return _exercised(api, body)

    # --- translating a request ---------------------------------------------------
    def _mid(self, c: Candidate, name: str) -> int:
        return NO_MEMBER_ID if not name else c.ids.get(name, UNKNOWN_ID)

    def model_request(self, c: Candidate, r: Request):
        b = r.body
        if r.api == "JoinGroup":
            return JoinGroup(self._mid(c, b["member_id"]), Protocols(b["protocol_type"], r.protocols), r.iid,
                             r.version >= 4, supports_skip_assignment=r.version >= 9)
        if r.api == "SyncGroup":
            given = tuple((self._mid(c, a["member_id"]), canonical(a["assignment"])) for a in b["assignments"])
            return SyncGroup(self._mid(c, b["member_id"]), b["generation_id"], given, r.iid)
        if r.api == "Heartbeat":
            return Heartbeat(self._mid(c, b["member_id"]), b["generation_id"], r.iid)
        if r.api == "LeaveGroup":
            prep = self.side.prepared
            return LeaveGroup(tuple((self._mid(c, m["member_id"]), prep.iid(self.group_id, m["group_instance_id"]))
                                    for m in b["members"]))
        return OffsetCommit(self._mid(c, b["member_id"]), b["generation_id"], 0, r.iid)

    # --- silent steps -------------------------------------------------------------
    def _step(self, c: Candidate, event, t: float, refreshed: int, request: Request | None) -> None:
        """Apply one coordinator step to ``c`` in place (a copy), at ``t`` ms."""
        before = c.group
        c.group, outputs = handle(self.side.cfg, before, event)
        c.now = t
        if c.group is not before:
            c.timeouts = joined_timeouts(c.group, request.model_conn if request else 0,
                                         request.timeouts if request else None, c.timeouts)
            self._forget_gone(c)
            record = stored(c.group)
            if record is not None:
                c.stored = record
        self._rearm(c, before, refreshed, t)
        self._produce(c, event, outputs, t)

    def _produce(self, c: Candidate, event, outputs, t: float) -> None:
        """The responses a step produced, each to its connection's request awaiting one."""
        for out in outputs:
            name = self.side.prepared.conn_names.get(out.conn)
            waiting = c.awaiting.get(name)
            if name in c.closed or not waiting:
                continue
            entry = waiting[-1]
            if entry[1] is None and RESPONSE_OF[entry[0].api] is type(out.response):
                waiting[-1] = (entry[0], out.response)
                c.produced[(name, entry[0].correlation_id)] = (t, "" if type(event) is Receive else type(event).__name__)

    def _forget_gone(self, c: Candidate) -> None:
        """impl/ forgets the member.id strings of members the group no longer has."""
        live = {m.member_id for m in c.group.members}.union(c.group.pending)
        for mid in [mid for mid in c.names if mid not in live]:
            del c.ids[c.names.pop(mid)]

    def _rearm(self, c: Candidate, before, refreshed: int, t: float) -> None:
        """The timers a step from ``before`` to ``c.group`` at ``t`` cancels and starts,
        with their deadlines (model/timing.py, as impl/ arms its asyncio timers)."""
        cancel, start = rearm(before, c.group, c.timers, refreshed)
        for key in cancel:
            del c.timers[key]
        for key, timer in start:
            c.timers[key] = (timer, t + duration_ms(timer, c.group, lambda m: c.timeouts.get(m, DEFAULT_TIMEOUTS),
                                                    self.side.initial_delay_ms))

    def _due(self, c: Candidate, conn: str, r: Request) -> float | None:
        """By when the broker processes ``r``, the next request of ``conn`` (ms), or None
        while the connection is muted (its previous response not produced yet: Kafka's
        SocketServer reads no further request). A broker processes a request as it reads
        it, so within ``slack_ms`` of its record or of its connection's unmuting."""
        waiting = c.awaiting.get(conn)
        if waiting and waiting[-1][1] is None:
            return None
        unmuted = c.produced.get((conn, waiting[-1][0].correlation_id), (0.0,))[0] if waiting else 0.0
        return max(r.t_ms, unmuted) + self.side.options.slack_ms

    def _deadlines(self, c: Candidate) -> list:
        """((deadline ms, what), ...): each armed timer's latest firing time (its deadline
        plus ``slack_ms``) and each unmuted connection's next request's processing time."""
        slack = self.side.options.slack_ms
        out = [(d + slack, key) for key, (_, d) in c.timers.items()]
        for conn, queue in c.queued.items():
            due = self._due(c, conn, queue[0]) if queue else None
            if due is not None:
                out.append((due, conn))
        return out

    def _successors(self, c: Candidate, t: float):
        """(candidate', description) for every silent step ``c`` may take before a record
        at ``t``. A step at a time past another obligation's deadline (``_deadlines``) is
        not taken: that obligation's step comes first."""
        slack = self.side.options.slack_ms
        yield from self._elections(c)
        limit = min((d for d, _ in self._deadlines(c)), default=None)
        first = min((q[0].line for q in c.queued.values() if q), default=None) if self.side.ordered else None
        for conn, queue in c.queued.items():
            if not queue or (first is not None and queue[0].line != first):
                continue
            r = queue[0]
            due = self._due(c, conn, r)
            if due is None:
                continue  # muted: the previous request's response is not produced yet
            at = max(c.now, r.t_ms)
            if at > due or (limit is not None and limit < at and due != limit):
                continue  # processed too late, or a timer or another request must come first
            n = c.copy()
            if n.loading:  # the coordinator is loaded by now: the loaded group's timers start
                n.loading = False
                self._rearm(n, None, NO_MEMBER_ID, at)
            n.queued[conn] = queue[1:]
            n.awaiting[conn] = n.awaiting.get(conn, []) + [(r, None)]
            if r.api == "OffsetCommit" and not self.side.any_hosted(r.body):
                n.now = at  # KafkaApis.handleOffsetCommitRequest answers it alone
                n.awaiting[conn][-1] = (r, NOT_HOSTED)
                n.produced[(conn, r.correlation_id)] = (at, "")
                yield n
                continue
            req = self.model_request(n, r)
            if r.api == "JoinGroup" and session_timeout_error(r.timeouts.session_ms, self.side.bounds):
                # R42: answered before the group is looked at (GroupCoordinator.handleJoinGroup)
                n.now = at
                n.awaiting[conn][-1] = (r, JoinGroupResponse(Error.INVALID_SESSION_TIMEOUT, req.member_id,
                                                             NO_GENERATION, NO_MEMBER_ID, ()))
                n.produced[(conn, r.correlation_id)] = (at, "")
                yield n
                continue
            self._step(n, Receive(r.model_conn, req), at, self.refreshed(req), r)
            yield n
        for key, (timer, deadline) in c.timers.items():
            if deadline - slack > t:
                continue
            at = max(c.now, min(deadline, t))
            if at > deadline + slack or (limit < at and deadline + slack != limit):
                continue
            n = c.copy()
            del n.timers[key]
            self._step(n, timer, at, NO_MEMBER_ID, None)
            n.fired.add(self.timer_rule(timer))
            yield n

    def _elections(self, c: Candidate):
        """R5's choice: when the leader has not rejoined, Kafka makes the first member in
        its ClassicGroup's HashMap of members that has rejoined the leader
        (ClassicGroup.maybeElectNewJoinedLeader, Kafka 4.4.0), an order a trace does not
        show; the model takes ``first_joiner``. So each member that has rejoined may be
        the one the model took as first: a candidate per other choice."""
        g = c.group
        if g.phase != Phase.PREPARING_REBALANCE:
            return
        joined = [m.member_id for m in g.members if m.awaiting_join]
        if not joined or g.leader in joined:
            return
        for mid in joined:
            if mid != g.first_joiner:
                n = c.copy()
                n.group = g._replace(first_joiner=mid)
                yield n

    def _must_fire(self, c: Candidate, t: float) -> bool:
        """Whether a timer or a request must be stepped before a record at ``t``."""
        return any(d < t for d, _ in self._deadlines(c))

    # --- observations ---------------------------------------------------------------
    def receive(self, r: Request) -> None:
        for c in self.frontier:
            c.queued[r.conn] = c.queued.get(r.conn, ()) + (r,)

    def close(self, conn: str) -> None:
        for c in self.frontier:
            c.closed = c.closed | {conn}
            c.awaiting.pop(conn, None)
            c.produced = {k: v for k, v in c.produced.items() if k[0] != conn}

    def restart(self, t: float, loaded: bool) -> None:
        """R37: resume from the stored group (or Empty), every session timer restarted
        when the coordinator loaded it: at ``t`` for serve, which records the restart
        once loaded; behind a proxy, whose restarter records it when the broker went
        down, at the first request the coordinator processes after it (the broker
        answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS until loaded, and
        GroupMetadataManager.onLoaded restarts each member's session then)."""
        for c in self.frontier:
            c.group = c.stored if loaded else EMPTY_GROUP
            c.stored = c.group
            self._forget_gone(c)
            c.timeouts = {m: x for m, x in c.timeouts.items() if m in c.names or find(c.group, m)}
            c.queued, c.awaiting, c.produced, c.timers, c.closed = {}, {}, {}, {}, frozenset()
            c.now = max(c.now, t)
            c.loading = self.side.proxied
            if not c.loading:
                self._rearm(c, None, NO_MEMBER_ID, t)

    def _silent(self, line: int, t: float, visit) -> None:
        """Depth first over the candidates each frontier candidate reaches by silent
        steps before a record at ``t`` (at most MAX_SILENT_STEPS), calling
        ``visit(c)`` on each; one for which it returns True is not expanded. A
        candidate that several frontier candidates reach is visited once (they share
        ``visited``), and the candidate bound holds for all of them together: counted
        per frontier candidate, a trace that diverges early (a test double's) made
        thousands of candidates each search thousands, for hours on 153 records.
        Raises _Bound past the candidate bound."""
        bound = self.side.options.max_candidates
        visited: set = set()
        for start in self.frontier:
            stack = [(start, 0)]
            while stack:
                c, depth = stack.pop()
                if visit(c) or depth >= MAX_SILENT_STEPS:
                    continue
                for n in self._successors(c, t):
                    k = n.key()
                    if k not in visited:
                        visited.add(k)
                        stack.append((n, depth + 1))
                if len(visited) > bound:
                    raise _Bound(line, bound)

    def expire(self, line: int, t: float) -> bool:
        """R43: the coordinator removed the group at ``t`` (an ``expire`` record). The
        candidates that are, or through silent steps become, Empty with nothing in
        flight start over as a new group; False if none can (the model removes only
        Empty groups)."""
        def take(c: Candidate):
            if not self.is_empty(c.group) or any(c.queued.values()) or any(
                    resp is None for waiting in c.awaiting.values() for _, resp in waiting):
                return None, False
            n = self.initial()
            n.now, n.awaiting, n.closed = max(c.now, t), {k: list(v) for k, v in c.awaiting.items()}, c.closed
            n.produced = dict(c.produced)
            return n, True
        return self._resolve(line, t, take)

    def delete(self, line: int, t: float, error: str) -> bool:
        """R44: a DeleteGroups answer ``error`` for this group at ``t``. NONE: as
        ``expire`` (only an Empty group is deleted; it starts over); NON_EMPTY_GROUP: the
        candidates whose group is not Empty (the model leaves it unchanged);
        GROUP_ID_NOT_FOUND: those with no group (deleted, or never asked for). False if
        no candidate can have given it."""
        if error == "NONE":
            return self.expire(line, t)
        if error == "NON_EMPTY_GROUP":
            keep = lambda g: not self.is_empty(g) and not self.is_dead(g)  # noqa: E731
        elif error == "GROUP_ID_NOT_FOUND":
            keep = lambda g: g == self.initial().group  # noqa: E731
        else:
            return False

        def take(c: Candidate):
            return (c.copy(), True) if keep(c.group) else (None, False)
        return self._resolve(line, t, take)

    def _resolve(self, line: int, t: float, take) -> bool:
        """The frontier becomes the candidates ``take(c)`` makes of those reached by
        silent steps before ``t``: ``take`` returns (a candidate or None, whether to
        stop expanding ``c``). False, the frontier unchanged, if it makes none."""
        kept = {}

        def visit(c: Candidate) -> bool:
            n, stop = take(c)
            if n is not None:
                kept.setdefault(n.key(), n)
            return stop
        self._silent(line, t, visit)
        if kept:
            self.frontier = list(kept.values())
        return bool(kept)

    def inject(self, line: int, t: float, event_of) -> bool:
        """An injected coordinator input at ``t`` (a ``fault`` record: ``expire``, R11,
        or ``rebalance``, R56): serve steps it between two of its steps, once every
        request recorded before it is processed, so it applies to the candidates that
        have processed them all (reached by silent steps), ``event_of(c)`` giving each
        its input. False if no candidate can take it."""
        def take(c: Candidate):
            if any(c.queued.values()) or self._must_fire(c, t):
                return None, False
            n = c.copy()
            self._step(n, event_of(n), max(c.now, t), NO_MEMBER_ID, None)
            return n, False  # timers may fire before the fault too: c is expanded further
        return self._resolve(line, t, take)

    def respond(self, line: int, record: dict):
        """Match a response record. Returns (matched, expected readable responses, rule
        key, the earliest cause); when nothing matches, ``self.adopted`` holds the
        candidates that gave their own answer instead, that answer taken (the
        resynchronisation's frontier)."""
        conn, cid, t = record["connection"], record["correlation_id"], record["t_ms"]
        options = self.side.options
        matched, expected, keys, causes = [], [], [], []
        held = False
        self.adopted = {}
        why = set()  # why a candidate has no answer to compare, when none has one

        def visit(c: Candidate) -> bool:
            nonlocal held
            waiting = c.awaiting.get(conn)
            head = waiting[0] if waiting else None
            if head is None or head[0].correlation_id != cid:
                why.add("an earlier request on this connection is unanswered" if head else
                        "the request is not on its connection")
                return False
            if head[1] is None:
                held = True
                return False
            if self._must_fire(c, t):
                why.add("a timer is past its deadline and must fire first")
                return False  # a timer should have fired first: only its successors count
            n = c.copy()
            at, cause = c.produced.get((conn, cid), (t, ""))
            if cause and t - at > options.slack_ms:  # a timer's answers are sent as it fires: it fired later
                # (a request's answer may wait on the log: Kafka answers OffsetCommit and a leader's SyncGroup
                # once their records are appended)
                diff = f"late:{cause}"
                text = (f"{self.readable(c, head[0].api, head[1])}, sent at {at - t:+.0f} ms"
                        + (f" when the {cause} fired" if cause else ""))
                if text not in expected:
                    expected.append(text)
                    keys.append(diff)
                n.awaiting[conn] = n.awaiting[conn][1:]
                n.produced.pop((conn, cid), None)
                self.adopted.setdefault(n.key(), n)
                return True
            diff = self.match(n, head[0], head[1], record["body"])
            n.awaiting[conn] = n.awaiting[conn][1:]
            n.produced.pop((conn, cid), None)
            if diff is None:
                matched.append(n)
            else:
                self.adopted.setdefault(n.key(), n)
                text = self.readable(c, head[0].api, head[1])
                if text not in expected:
                    expected.append(text)
                    keys.append(diff)
                causes.extend(self._causes(c, head[0]))
            return True
        self._silent(line, t, visit)
        if matched:
            if len(matched) > 1:
                unique = {}
                for n in matched:
                    unique.setdefault(n.key(), n)
                matched = list(unique.values())
                if len(matched) > options.max_candidates:
                    raise _Bound(line, options.max_candidates)
            self.frontier = matched
            return True, (), None, None
        if not expected and held:
            expected.append(f"no {record['api']} response yet: the model holds this request")
            keys.append("held")
        elif not expected:
            expected.append(f"nothing: in no state the model's coordinator can reach before t_ms {t} is this "
                            f"{record['api']} answered ({'; '.join(sorted(why)) or 'no state reaches it'})")
        return False, tuple(expected), (keys[0] if keys else None), min(causes, default=None)

    def _causes(self, c: Candidate, target: Request) -> list:
        """Responses ``c`` has produced and not yet sent that already differ from what
        the trace records for them (it says ahead): ``[(request line, Request,
        key)]``. A divergence seen at one response is often caused by an earlier
        request the model answered otherwise (a rebalance it did not start)."""
        out = []
        for waiting in c.awaiting.values():
            for r, resp in waiting:
                body = self.side.responses.get(r.line)
                if resp is None or r is target or body is None:
                    continue
                key = self.match(c.copy(), r, resp, body)
                if key is not None:
                    out.append((r.line, r.correlation_id, r.conn, key, r))
        return out

    # --- comparing a response -------------------------------------------------------
    def _bind(self, c: Candidate, mid: int, name: str) -> bool:
        """Whether model id ``mid`` may be the traced ``name`` (binding it if both are new)."""
        if mid == NO_MEMBER_ID or mid == UNKNOWN_ID:
            return name == ""
        bound = c.names.get(mid)
        if bound is not None:
            return bound == name
        if not name or name in c.ids:
            return False
        c.names[mid], c.ids[name] = name, mid
        return True

    def _bound(self, c: Candidate, mid: int):
        """The member.id string model id ``mid`` is bound to in ``c``, or None."""
        return c.names.get(mid)

    def _handed_out(self, c: Candidate, mid: int):
        """The member.id string the trace records for model id ``mid`` in its own
        JoinGroup response, produced and not yet observed (a leader's member list
        names members whose own responses come later), or None."""
        for waiting in c.awaiting.values():
            for r, resp in waiting:
                if type(resp) is JoinGroupResponse and resp.member_id == mid:
                    body = self.side.responses.get(r.line)
                    return body["member_id"] if body else None
        return None

    def _name(self, c: Candidate, mid: int) -> str:
        if mid == NO_MEMBER_ID or mid == UNKNOWN_ID:
            return ""
        return c.names.get(mid, "<a new member.id>")

    def match(self, c: Candidate, r: Request, resp, body: dict):
        """None if the model's ``resp`` is the recorded ``body`` (binding new ids in
        ``c``), else the key of the first difference (an error name or a field)."""
        api = r.api
        if api == "JoinGroup":
            if error_name(resp.error) != body["error"]:
                if "INVALID_SESSION_TIMEOUT" in (error_name(resp.error), body["error"]):
                    return "INVALID_SESSION_TIMEOUT"  # R42 is judged before anything else
                return error_name(resp.error) if resp.error != Error.NONE else body["error"]
            if resp.generation != body["generation_id"]:
                return "generation_id"
            if (resp.protocol or None) != (body["protocol_name"] or None):
                return "protocol_name"
            if resp.skip_assignment != body["skip_assignment"]:
                return "skip_assignment"
            if resp.member_id == UNKNOWN_ID:  # the model echoes a member.id it never handed out (a stale one)
                if body["member_id"] != r.body["member_id"]:
                    return "member_id"
            elif not self._bind(c, resp.member_id, body["member_id"]):
                return "member_id"
            if not self._bind(c, resp.leader, body["leader"]):
                return "leader"
            if len(resp.members) != len(body["members"]):
                return "members"
            recorded = {m["member_id"]: m for m in body["members"]}
            for mid, iid, data in resp.members:
                name = self._bound(c, mid) or self._handed_out(c, mid)
                if name is None or not self._bind(c, mid, name):
                    return "members"
                m = recorded.get(name)
                if (m is None or self.side.prepared.instance_name(self.group_id, iid) != m["group_instance_id"]
                        or data != canonical(m["metadata"])):
                    return "members"
            return None
        if api == "SyncGroup":
            if error_name(resp.error) != body["error"]:
                return error_name(resp.error) if resp.error != Error.NONE else body["error"]
            given = b"" if resp.assignment is EMPTY_ASSIGNMENT else resp.assignment
            return None if given == canonical(body["assignment"]) else "assignment"
        if api == "Heartbeat":
            if error_name(resp.error) != body["error"]:
                return error_name(resp.error) if resp.error != Error.NONE else body["error"]
            return None
        if api == "LeaveGroup":
            results = resp.members
            top = results[0][2] if r.version < 3 and results else resp.error
            if error_name(top) != body["error"]:
                return error_name(top) if top != Error.NONE else body["error"]
            if len(results) != len(body["members"]):
                return "members"
            for (mid, _, error), m in zip(results, body["members"]):
                if error_name(error) != m["error"]:
                    return error_name(error) if error != Error.NONE else m["error"]
            return None
        for t in body["topics"]:  # OffsetCommit: the coordinator's one error for every hosted partition
            for p in t["partitions"]:
                expected = (error_name(resp.error) if self.side.cluster.hosts(t["name"], p["partition"])
                            else "UNKNOWN_TOPIC_OR_PARTITION")
                if expected != p["error"]:
                    return expected if expected != "NONE" else p["error"]
        return None

    def readable(self, c: Candidate, api: str, resp) -> str:
        """The model's response, in the trace's vocabulary, one line."""
        if api == "JoinGroup":
            text = (f"JoinGroup {error_name(resp.error)} generation {resp.generation} member_id "
                    f"{self._name(c, resp.member_id)!r} leader {self._name(c, resp.leader)!r}")
            if resp.protocol:
                text += f" protocol {resp.protocol}"
            if resp.skip_assignment:
                text += " skip_assignment"
            if resp.members:
                text += " members [" + ", ".join(repr(self._name(c, m[0])) for m in resp.members) + "]"
            return text
        if api == "SyncGroup":
            given = b"" if resp.assignment is EMPTY_ASSIGNMENT else resp.assignment
            return f"SyncGroup {error_name(resp.error)} assignment {given.decode() or 'null'}"
        if api == "LeaveGroup":
            return "LeaveGroup " + error_name(resp.error) + " members [" + ", ".join(
                f"{self._name(c, mid)!r} {error_name(e)}" for mid, _, e in resp.members) + "]"
        return f"{api} {error_name(resp.error)}"

    def last_state(self) -> dict:
        """The first candidate's coordinator state, in the trace's vocabulary."""
        c = self.frontier[0]
        g = c.group
        return {"group_id": self.group_id, "state": g.phase.name, "generation": g.generation,
                "leader": self._name(c, g.leader),
                "members": [{"member_id": self._name(c, m.member_id),
                             "flags": [f for f in ("awaiting_join", "awaiting_sync", "pending_sync") if getattr(m, f)]}
                            for m in g.members],
                "candidates": len(self.frontier)}


class _Bound(Exception):
    def __init__(self, line: int, bound: int):
        super().__init__(f"line {line}: more than {bound:,} candidate states (--max-candidates {bound})")
        self.line = line


class _Side:
    def __init__(self, trace: Trace, options: Options, ordered: bool):
        self.ordered = ordered
        self.proxied = trace.header["recorder"] == "proxy"  # a broker's own answers come with no fault record
        s = trace.settings
        self.cluster = Cluster("", 0, tuple((t["name"], t["partitions"]) for t in s["topics"]))
        topics = self.cluster.topics or (("-", 1),)
        self.initial_delay_ms = s["group_initial_rebalance_delay_ms"]
        self.cfg = GroupConfig(topics=topics, mutations=options.mutations)  # the initial delay applies at 0 ms too (R30)
        default = SessionBounds()
        self.bounds = SessionBounds(s.get("group_min_session_timeout_ms", default.min_ms),
                                    s.get("group_max_session_timeout_ms", default.max_ms))
        self.options, self.settings = options, s
        self.prepared = _Prepared()
        self.groups: dict = {}
        self.responses: dict = {}
        self.mixed: frozenset = frozenset()  # groups both protocols reach

    def any_hosted(self, body: dict) -> bool:
        """Whether an OffsetCommit request names a partition this broker hosts: only
        then does the coordinator see it (impl/broker.py ``Cluster.hosts``)."""
        return any(self.cluster.hosts(t["name"], p["partition"]) for t in body["topics"] for p in t["partitions"])

    def unlisted(self, api: str, body: dict) -> list:
        """Behind a proxy, the topics a response hands out or accepts that the trace's
        header does not list at all: a KIP-848 heartbeat's assignment, an OffsetCommit's
        partitions answered NONE. Such a response means the header is not the cluster the
        broker had: the proxy read the broker's Metadata before a topic created just then
        reached its cache (Kafka's broker forwards CreateTopics to its controller,
        KafkaApis.handle, KafkaApis.scala:190, Kafka 4.4.0, and answers Metadata from a
        cache the controller's records reach later, KRaftMetadataCachePublisher.onMetadataUpdate,
        KRaftMetadataCachePublisher.java:43). serve's header is its own cluster: none."""
        if not self.proxied:
            return []
        listed = {name for name, _ in self.cluster.topics}
        if api == "ConsumerGroupHeartbeat":
            given = [t["topic"] for t in body["assignment"] or ()]
        elif api == "OffsetCommit":
            given = [t["name"] for t in body["topics"] if any(p["error"] == "NONE" for p in t["partitions"])]
        else:
            return []
        return sorted(set(given) - listed)

    def group(self, gid: str, api: str = "") -> _Group:
        """Group ``gid``'s search, made at its first request (``api``): a consumer group's
        (KIP-848, checker/conform/consumer_coordinator.py) when that is a ConsumerGroupHeartbeat,
        a migrating group's (checker/conform/migration_coordinator.py) when the trace reaches
        it with both protocols' requests (``mixed``)."""
        if gid not in self.groups:
            if gid in self.mixed:  # both protocols reach it: KIP-848's online migration
                from .migration_coordinator import MigrationSearch
                self.groups[gid] = MigrationSearch(self, gid, api != "ConsumerGroupHeartbeat")
            elif api == "ConsumerGroupHeartbeat":
                from .consumer_coordinator import ConsumerGroupSearch
                self.groups[gid] = ConsumerGroupSearch(self, gid)
            else:
                self.groups[gid] = _Group(self, gid)
        return self.groups[gid]


def _responses(trace: Trace) -> dict:
    """Request line -> the body of its recorded response (what the trace says ahead)."""
    open_requests, out = {}, {}
    for line, record in trace.records:
        if record["type"] == "request":
            open_requests[(record["connection"], record["correlation_id"])] = line
        elif record["type"] == "response":
            out[open_requests.pop((record["connection"], record["correlation_id"]))] = record["body"]
    return out


# injected coordinator inputs (a ``fault`` record's kind): record -> (rule, candidate -> model input)
INJECTED_INPUTS = {
    "expire": lambda rec: ("R11", lambda c: SessionTimeout(c.ids.get(rec["member_id"], UNKNOWN_ID))),
    "rebalance": lambda rec: ("R56", lambda c: ForceRebalance()),
}


# answered by the broker before any group handler runs: the group's coordinator is not on this
# broker, or is still loading its partition of __consumer_offsets (CoordinatorRuntime.withActiveContextOrThrow,
# CoordinatorRuntime.java:2090, Kafka 4.4.0); a proxy's trace has no fault record for them (serve records its
# own as ``error`` faults, so in serve's trace such an answer without one is judged)
BROKER_ERRORS = frozenset(("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"))


def not_the_coordinators(body: dict | None) -> bool:
    """Whether a response (its body, None if unanswered) came from the broker, not
    the group coordinator: a top-level error of BROKER_ERRORS, or OffsetCommit's error
    of every partition."""
    if not body:
        return False
    if "topics" in body and "error" not in body:  # OffsetCommit: errors per partition
        errors = {p["error"] for t in body["topics"] for p in t["partitions"]}
        return bool(errors) and errors <= BROKER_ERRORS
    return body.get("error") in BROKER_ERRORS


def _exercised(api: str, body: dict) -> tuple:
    error = body.get("error", "NONE")
    return EXERCISED.get((api, error)) or EXERCISED.get((api, None)) or ()


def check(trace: Trace, options=None) -> Verdict:
    """Hold ``trace``'s responses against the model's coordinator. ``options``: an
    ``Options`` (or a dict with ``slack_ms``, ``max_candidates``; None: defaults).
    Returns a Verdict: CONFORMS, DIVERGENT (the first response no candidate state
    can give, with its rule, RULES) or INCOMPLETE (the frontier bound was hit).

    The broker processed requests in the order recorded when serve or a member
    recorded them (serve hands a request to the model as it reads it), and the
    search keeps that order; behind a proxy it may have processed another
    connection's request first, so a proxy's trace that diverges in recorded
    order is searched again in every order the muting allows."""
    if options is None:
        options = Options()
    elif isinstance(options, dict):
        options = Options(**{k: v for k, v in options.items() if k in Options._fields})
    verdict = _check(trace, options, ordered=True)
    if verdict.status == DIVERGENT and trace.header["recorder"] == "proxy":
        verdict = _check(trace, options, ordered=False)
    return verdict


def _check(trace: Trace, options: Options, ordered: bool) -> Verdict:
    side = _Side(trace, options, ordered)
    side.responses = _responses(trace)
    from .migration_coordinator import mixed_groups
    side.mixed = mixed_groups(trace)
    requests: dict = {}  # (connection, correlation id) -> (group id, Request)
    checked, rules, not_judged, described = 0, set(), 0, 0  # described: consumer groups a describe judged
    conn_groups: dict = {}
    context: dict = {}
    unknown_start: dict = {}  # group id -> why the coordinator side cannot know where it started
    injected: set = set()  # (connection, correlation id) of requests a fault answered (impl/faults.py)
    found: list = []  # every divergence
    last_state: dict = {}  # group id -> the last matching state before its first divergence
    group_of: dict = {}  # a divergence's line -> its group id
    resyncing: set = set()  # groups since a divergence, until a response matches again
    lost: set = set()  # groups with no candidate to go on from after a divergence: judged no further
    skipped = 0

    def stop(uninterpreted: tuple, figures: dict) -> Verdict:
        """The verdict when the search cannot go on: INCOMPLETE, or DIVERGENT with what was found."""
        if found:
            return divergent(checked, rules, found, figures | {"incomplete": list(uninterpreted)})
        return Verdict(INCOMPLETE, checked, frozenset(rules), uninterpreted=uninterpreted, figures=figures)

    def diverge(gid: str, div: Divergence, go_on: bool) -> None:
        nonlocal skipped
        if gid in resyncing:
            skipped += 1
        else:
            found.append(div)
            group_of[div.line] = gid
        resyncing.add(gid)
        if not go_on:
            lost.add(gid)
    for line, record in trace.records:
        kind = record["type"]
        if kind == "request":
            api = record["api"]
            if api in GROUP_BY_GROUP:  # judged group by group when answered (R44; KIP-848's describe)
                requests[(record["connection"], record["correlation_id"])] = GROUP_BY_GROUP[api]
                continue
            if api in NOT_JUDGED or (record["connection"], record["correlation_id"]) in injected \
                    or (side.proxied and not_the_coordinators(side.responses.get(line))):
                requests[(record["connection"], record["correlation_id"])] = None
                continue
            r = side.prepared.request(line, record)
            gid = r.body["group_id"]
            if gid in lost:
                requests[(r.conn, r.correlation_id)] = None
                continue
            if gid not in side.groups:
                named = [r.body["member_id"]] if "member_id" in r.body else [m["member_id"] for m in r.body["members"]]
                if api == "ConsumerGroupHeartbeat":  # KIP-848: the client names itself; a group starts with a join
                    named = named if r.body["member_epoch"] > 0 else []
                if any(named):  # the group's first request names a member this trace never saw handed out
                    unknown_start[gid] = f"line {line}: group {gid!r} existed before the trace began " \
                                         f"(member.id {next(filter(None, named))!r}): its state then is unknown"
            requests[(r.conn, r.correlation_id)] = (gid, r)
            conn_groups.setdefault(r.conn, set()).add(gid)
            side.group(gid, api).receive(r)
            context.setdefault(gid, []).append((line, record))
            checked += 1
        elif kind == "response":
            entry = requests.pop((record["connection"], record["correlation_id"]))
            if entry is None:
                not_judged += 1
                continue
            if entry is DESCRIBE:
                for entry_body in record["body"]["groups"]:
                    gid = entry_body["group_id"]
                    g = side.groups.get(gid)
                    if entry_body["error"] != "NONE" or not hasattr(g, "describe") or gid in lost:
                        continue  # a group this trace never saw, or not a consumer group's (not judged)
                    context[gid].append((line, record))
                    try:
                        found_at = g.describe(line, record["t_ms"], entry_body)
                    except _Bound as e:
                        return stop((str(e),), {"not_judged": not_judged, "bound": options.max_candidates})
                    described += 1
                    rules.add("K17")
                    if found_at is not None:
                        rule, field, expected = found_at
                        diverge(gid, Divergence(line, record, SIDE, rule, expected,
                                                f"the model's consumer group {gid!r} is not the one described "
                                                f"(it differs in {field}; {rule})", tuple(context[gid])), True)
                checked += 1
                continue
            if entry is DELETE:
                rules.add("R44")
                for result in record["body"]["results"]:
                    gid, error = result["group_id"], result["error"]
                    g = side.groups.get(gid)
                    if g is None:  # a group this trace never saw: nothing to hold it to
                        continue
                    context[gid].append((line, record))
                    if gid in lost:
                        continue
                    try:
                        ok = g.delete(line, record["t_ms"], error)
                    except _Bound as e:
                        return stop((str(e),), {"not_judged": not_judged, "bound": options.max_candidates})
                    if not ok:
                        diverge(gid, Divergence(
                            line, record, SIDE, "R44", (f"group {gid!r}: only an Empty group is deleted, and "
                                                        "a known one is never GROUP_ID_NOT_FOUND",),
                            f"the coordinator answered DeleteGroups of {gid!r} with {error}, which the model's "
                            "group there cannot give (R44)", tuple(context[gid])), False)
                checked += 1
                continue
            gid, r = entry
            g = side.group(gid)
            context[gid].append((line, record))
            try:
                ok, expected, key, cause = g.respond(line, record)
            except _Bound as e:
                return stop((str(e),), {"not_judged": not_judged, "bound": options.max_candidates})
            if not ok and gid in unknown_start:
                return stop((unknown_start[gid], f"line {line}: so this {r.api} response cannot be judged"),
                            {"not_judged": not_judged})
            unlisted = [] if ok else side.unlisted(r.api, record["body"])
            if unlisted:  # the header is not the broker's cluster: nothing after it can be judged
                return stop((f"line {line}: the {r.api} response gives partitions of {', '.join(map(repr, unlisted))}, "
                             "which the trace's header does not list: the proxy read the broker's topics before "
                             "it showed them, so the model cannot know them",), {"not_judged": not_judged})
            if not ok:
                rule = g.rule_for(r.api, key, r.body)
                reason = (f"the model's coordinator cannot give this {r.api} response here "
                          f"(it differs in {key or 'everything'}; {rule})")
                if cause is not None:
                    _, _, _, ckey, cr = cause
                    rule = g.rule_for(cr.api, ckey, cr.body)
                    reason += (f"; the cause is earlier: the model answers the {cr.api} request of line {cr.line} "
                               f"otherwise (it differs in {ckey}; {rule})")
                if gid not in resyncing:
                    last_state[gid] = g.last_state()
                diverge(gid, Divergence(line, record, SIDE, rule, expected, reason, tuple(context[gid])),
                        bool(g.adopted))
                if g.adopted:
                    g.frontier = list(g.adopted.values())
                continue
            resyncing.discard(gid)
            checked += 1
            rules.update(g.exercised(r.api, record["body"]))
            for c in g.frontier:
                rules.update(c.fired)
                c.fired = set()
        elif kind == "close":
            for gid in conn_groups.get(record["connection"], ()):
                side.group(gid).close(record["connection"])
                context[gid].append((line, record))
        elif kind == "expire":
            rules.add("R43")
            for gid in record["groups"]:
                g = side.groups.get(gid)
                if g is None:
                    continue
                context[gid].append((line, record))
                if gid in lost:
                    continue
                try:
                    removable = g.expire(line, record["t_ms"])
                except _Bound as e:
                    return stop((str(e),), {"not_judged": not_judged, "bound": options.max_candidates})
                if not removable:
                    diverge(gid, Divergence(
                        line, record, SIDE, "R43", (f"group {gid!r} stays: the model removes only an Empty group",),
                        f"the coordinator removed group {gid!r}, which the model says is not Empty (R43)",
                        tuple(context[gid])), False)
            checked += 1
        elif kind == "fault":
            fault = record["fault"]
            if fault == "error":  # the fault layer answered the request after this record: not the model
                injected.add((record["connection"], record["correlation_id"]))
            elif fault in INJECTED_INPUTS and record["group"] in side.groups and record["group"] not in lost:
                gid = record["group"]
                rule, event_of = INJECTED_INPUTS[fault](record)
                context[gid].append((line, record))
                try:
                    taken = side.groups[gid].inject(line, record["t_ms"], event_of)
                except _Bound as e:
                    return stop((str(e),), {"not_judged": not_judged, "bound": options.max_candidates})
                if not taken:
                    diverge(gid, Divergence(
                        line, record, SIDE, rule, ("nothing: no state that has processed every request before it "
                                                   "can take it",),
                        f"the injected {fault} cannot follow the requests recorded before it ({rule})",
                        tuple(context[gid])), False)
                    continue
                rules.add(rule)
                checked += 1
            # delay, drop, coordinator_away/back, pause, resume: the network's and the handler's,
            # not the model's (a dropped response is recorded as the coordinator gave it)
        elif kind == "topics":  # hosted partitions from here on (KafkaApis answers others before the coordinator)
            side.cluster = side.cluster._replace(topics=tuple((t["name"], t["partitions"]) for t in record["topics"]))
            checked += 1
        elif kind == "restart":
            rules.add("R37")
            loaded = set(record["groups"])
            for gid, g in side.groups.items():
                g.restart(record["t_ms"], gid in loaded)
            for gid in loaded - set(side.groups):  # loaded from a store this trace never saw written
                side.group(gid)
                unknown_start[gid] = f"line {line}: group {gid!r} was loaded from a store this trace did not " \
                                     "record: its state then is unknown"
            checked += 1
    figures = {"not_judged": not_judged, "groups": len(side.groups), "described": described}
    if found:
        first = min(d.line for d in found)
        return divergent(checked, rules, found, figures | {"last_state": last_state.get(group_of[first]),
                                                            "skipped_resynchronising": skipped})
    return Verdict(CONFORMS, checked, frozenset(rules), figures=figures)
