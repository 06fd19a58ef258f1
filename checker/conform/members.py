"""The member side of ``rebalance conform``: every client's group requests held
against the model's member handler (model/member.py ``handle``, with
model/assignors.py), given the responses that client received.

``check(trace, options) -> Verdict`` (checker/conform/verdict.py). ``trace`` has
``.header`` (dict) and ``.records`` ([(1-based line, record dict), ...]),
schema-valid (spec/TRACE.md, format v2). ``options``: None or a mapping;
``max_candidates`` (default 256) bounds the states kept per client.

Method (trace checking as constrained model checking). A *client* is a traced
connection of one group, followed across reconnects by its member.id and
group.instance.id. Per client the side keeps the set of candidate model states
(``Candidate``: a ``Consumer``, the responses received but not yet processed,
the requests the model sent that the wire has not shown yet, and the one
unanswered). A response is an input to the handler, processed lazily: a real
client acts on a response some time after it arrives, so the side searches how
many of the queued responses the client had processed when it sent each
request. Local commands are silent steps searched to produce the observed
request: ``Start`` for a new client's first JoinGroup, ``Leave`` for a
LeaveGroup, and for a new connection of a known static client a restart (a new
process: ``NEW_CONSUMER``), followed as a client of its own, so that a replaced
process still running on its old connection is judged as itself (R28). Kafka's member.id and group.instance.id strings are
renamed to the model's ints once per trace (the model only copies the ids it is
given, so the renaming is a bijection).

What is compared (what the protocol fixes):

* JoinGroup: member.id, group.instance.id, and the claim, owned_partitions and
  (with an owned partition, subscription v2+) its generation (R13, KIP-792);
  after membership is lost the model claims nothing (R15), an eager member
  claims nothing (R14), a cooperative member's claim excludes what a SyncGroup
  revoked (R18) and keeps the joined generation after REBALANCE_IN_PROGRESS (R17).
* SyncGroup: member.id and generation of the last JoinGroupResponse (R8), and
  whether it carries assignments (the leader's, R16). The leader's assignments
  are not compared with the model's assignor (a real client's sticky choice is
  free) but held to the properties of an assignor case (checker/vectors_run.py
  ``check_assignment``) against the claims in the leader's JoinGroupResponse:
  exclusive, complete but for partitions it may withhold (claimed ones, when
  cooperative), and, cooperative, no partition given to a member while another
  still claims it (R23; claims resolved by generation, R22), nor a contested one
  (claimed by two at the highest generation) to anyone in that round (R23).
* Heartbeat and OffsetCommit: the member.id and generation the client was last
  given (R10, R41); an OffsetCommit commits only partitions the member owns (R41).
* LeaveGroup: the member.id the client holds (R20); static members send none (R27)
  unless the application asks them to leave (KIP-1092).

What is abstracted, because the protocol allows it (and why; spec/SPEC.md,
"Member-side conformance"):

* Pipelining. The model has one request in flight; Kafka's clients send a
  Heartbeat or an OffsetCommit while another request is in flight
  (AbstractCoordinator's HeartbeatThread; ConsumerCoordinator.commitOffsetsAsync).
  Heartbeat and OffsetCommit are checked beside the JoinGroup / SyncGroup /
  LeaveGroup line, against any state the client may be in.
* Heartbeats outside Stable. The Java client heartbeats in COMPLETING_REBALANCE
  (HeartbeatThread stops only while MemberState.hasNotJoinedGroup: UNJOINED or
  PREPARING_REBALANCE), librdkafka while a
  cooperative revocation completes; the coordinator answers them by member.id and
  generation alone (GroupCoordinator.handleHeartbeat), so those are what is
  compared.
* Commits during a rebalance and subsets. KIP-429's members keep processing, and
  committing, what they own while rejoining, and the coordinator accepts commits
  in PreparingRebalance (GroupCoordinator.handleCommitOffsets); an application
  commits the partitions it has positions for, a subset of what it owns.
* Commit errors. The model ignores an OffsetCommit's error and learns it from the
  next Heartbeat (R41, R19); Kafka's clients may act on it at once
  (ConsumerCoordinator.OffsetCommitResponseHandler: resetStateOnResponseError on
  UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION, requestRejoin on REBALANCE_IN_PROGRESS).
  Such an error is an optional Heartbeat response: processed or not.
* The rebalance protocol is the client's, not the selected name's: cooperative
  only when every protocol it lists is ``cooperative-sticky`` or Kafka Streams'
  ``stream`` (the Java client
  uses the highest RebalanceProtocol all its assignors support,
  ConsumerCoordinator's constructor; librdkafka requires one protocol type for
  all its assignors).
* Kafka Streams' followup rebalances: a member whose AssignmentInfo (the decoded
  ``streams`` of its assignment, impl/streams_info.py) names a ``next_rebalance_ms``
  rejoins on its own later (the probing rebalance, or at once for tasks withheld for
  their revocation; StreamsPartitionAssignor.maybeScheduleFollowupRebalance): the
  model's scheduled rejoin (R60), one tick then due; when it rejoins is not judged.
* Reconnection: a new connection of a known client may resend the request left
  unanswered on the old one.
* Leaving and joining again: a member that left (a LeaveGroup, or silently if
  static) may join again as a new member on the same connection, as the Java
  consumer does after its poll timeout (KIP-62, AbstractCoordinator.maybeLeaveGroup)
  and an application that unsubscribes and subscribes again.

* The broker's own answers: NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS
  (coordinator.BROKER_ERRORS, given before any group handler runs, as a fresh broker
  answers the first JoinGroups while its __consumer_offsets partition loads) are a lost
  response, as on the coordinator side: a JoinGroup or SyncGroup so answered is the
  model's ``CoordinatorLost`` (R72), after which the member joins again under its member.id
  (``_Checker._not_the_coordinators``, with the Java consumer's lines).

Opaque consumer-protocol bytes (another protocol_type, unparseable metadata or
assignment), errors the model does not know and topics not in the header make a
client uninterpretable: it is dropped and the verdict is INCOMPLETE, naming the
line, unless another client diverges.
"""
from __future__ import annotations

from typing import NamedTuple

from rebalance.impl.ids import Ids
from rebalance.impl.streams_info import NO_REBALANCE_MS
from rebalance.model.assignors import contested_claims, resolve_claims
from rebalance.model.config import ASSIGNORS, GroupConfig
from rebalance.model.member import NEW_CONSUMER, Consumer, MemberPhase, handle
from rebalance.model.protocol import (
    EMPTY_ASSIGNMENT, NO_GENERATION, NO_INSTANCE_ID, NO_MEMBER_ID, NOT_SCHEDULED, Assignment, CoordinatorLost, Error,
    HeartbeatResponse, JoinGroup, JoinGroupResponse, Leave, LeaveGroup, ScheduledRebalanceDue, Send, Start,
    Subscription, SyncGroup, SyncGroupResponse, Tick, partitions_of, union,
)

from ..kafka_json import Codec
from ..render import bracket
from ..vectors_run import check_assignment
from . import connect, consumer_members
from .coordinator import BROKER_ERRORS, not_the_coordinators
from .verdict import CONFORMS, INCOMPLETE, Divergence, Verdict, divergent, option

# the assignors whose only RebalanceProtocol is COOPERATIVE: the consumer's cooperative-sticky, and Kafka
# Streams' "stream" (StreamsPartitionAssignor.supportedProtocols, StreamsPartitionAssignor.java:277, Kafka 4.4.0)
COOPERATIVE_PROTOCOLS = frozenset({"cooperative-sticky", "stream"})
MAIN_LINE = ("JoinGroup", "SyncGroup", "LeaveGroup")
SIDE = ("Heartbeat", "OffsetCommit")
LOSS_ERRORS = frozenset({Error.UNKNOWN_MEMBER_ID, Error.ILLEGAL_GENERATION, Error.FENCED_INSTANCE_ID})
# errors an OffsetCommitResponse may carry that a client may act on as a Heartbeat's
COMMIT_SIGNALS = LOSS_ERRORS | {Error.REBALANCE_IN_PROGRESS}
# check_assignment's failure prefix -> the rule it breaks
ASSIGNMENT_RULES = {"exclusive": "R16", "complete": "R16", "cooperative": "R23"}
# (api, error) of the response a rejoin follows -> the rule the rejoin exercises
SIGNAL_RULES = {("JoinGroup", "MEMBER_ID_REQUIRED"): "R36", ("SyncGroup", "REBALANCE_IN_PROGRESS"): "R17",
                ("Heartbeat", "REBALANCE_IN_PROGRESS"): "R19"}
SIGNAL_RULES.update({(api, e.name): "R28" if e == Error.FENCED_INSTANCE_ID else "R15"
                     for api in MAIN_LINE + SIDE for e in LOSS_ERRORS})
SIGNAL_RULES.update({(api, e): "R72" for api in ("JoinGroup", "SyncGroup") for e in BROKER_ERRORS})


class Uninterpretable(Exception):
    """A record the side cannot read (opaque bytes, an unknown error or topic)."""


class Candidate(NamedTuple):
    """One state the client may be in. ``queue``: responses received and not yet
    processed, ``((response, optional), ...)`` in arrival order; ``pending``: the
    requests the model sent that the trace has not shown yet; ``inflight``: the
    JoinGroup / SyncGroup / LeaveGroup sent and unanswered, ``()`` for none."""

    consumer: Consumer
    queue: tuple = ()
    pending: tuple = ()
    inflight: tuple = ()


class Client:
    """One client of one group: its candidates, its configuration (from its first
    JoinGroup), the records seen (the divergence's context) and what the leader
    check needs (its last JoinGroupResponse's members)."""

    def __init__(self, group: str):
        self.group = group
        self.cfg = None
        self.candidates = {Candidate(NEW_CONSUMER)}
        self.records: list = []
        self.round_members = ()
        self.signal = None  # (api, error) of the last error response: what the next JoinGroup answers
        # since a divergence, until the model can send a request of this client again: the client's requests
        # the model cannot send are skipped, not reported (they follow from the divergence)
        self.resyncing = False


def check(trace, options=None) -> Verdict:
    """Hold every client's requests in ``trace`` against the model's member handler.
    Returns a Verdict: DIVERGENT with every request no candidate state could send
    (its line, the rule, what the model would have sent, or why nothing), each
    client resynchronised after a divergence (``_resync``), INCOMPLETE naming what
    could not be read, CONFORMS otherwise. Sources: see the module docstring.
    Kafka Connect's groups (protocol type ``connect``) are held to the Connect rules
    instead (checker/conform/connect.py), and KIP-848 clients (those sending ConsumerGroupHeartbeat)
    to the model's client (checker/conform/consumer_members.py), the verdicts combined; the
    classic members of a group in an online migration stay here."""
    groups = connect.connect_groups(trace.records)
    kip848 = consumer_members.groups_of(trace.records)
    kip848_members = consumer_members.members_of(trace.records)
    records = tuple((line, r) for line, r in trace.records
                    if not (r["type"] == "request" and (r["body"].get("group_id") in groups
                                                        or consumer_members.theirs(r, kip848_members))))
    verdict = _Checker(trace.header, option(options, "max_candidates", 256)).run(records)
    if groups:
        verdict = connect.combine(verdict, connect.check(trace, options, groups))
    return connect.combine(verdict, consumer_members.check(trace, options, kip848)) if kip848 else verdict


def rec_key(rec: dict) -> tuple:
    """A request's or response's (connection, correlation_id)."""
    return rec["connection"], rec["correlation_id"]


class _Checker:
    def __init__(self, header: dict, max_candidates: int):
        self.topics = {t["name"]: t["partitions"] for t in header["settings"]["topics"]}
        self.max_candidates = max_candidates
        self.ids = Ids()
        self.clients: list = []
        self.by_conn: dict = {}      # (connection, group) -> Client
        self.by_member: dict = {}    # (group, member.id string) -> Client
        self.by_instance: dict = {}  # (group, group.instance.id) -> Client
        self.requests: dict = {}     # (connection, correlation_id) -> (Client, api)
        self.dropped: set = set()
        self.uninterpreted: list = []
        self.rules: set = set()
        self.checked = 0
        self.figures = {"clients": 0, "requests": 0, "abstracted_heartbeats": 0, "leader_assignments": 0,
                        "skipped_resynchronising": 0}
        self.divergences: list = []

    # --- the walk -------------------------------------------------------------------
    def run(self, records) -> Verdict:
        for line, rec in records:
            kind = rec["type"]
            owner = self._owner(rec) if kind == "response" and rec_key(rec) in self.requests else None
            try:
                if kind == "request" and rec["api"] in MAIN_LINE + SIDE:
                    divergence = self._request(line, rec)
                elif kind == "response" and rec_key(rec) in self.requests:
                    divergence = self._response(line, rec)
                else:
                    continue
            except Uninterpretable as e:
                client = owner or self._owner(rec)  # a response's owner, taken before _response let go of it
                self.dropped.add(id(client))
                self.uninterpreted.append(f"line {line}: {e}")
                continue
            if divergence is not None:
                self.divergences.append(divergence)
        self.figures["clients"] = len(self.clients)
        if self.divergences:
            return divergent(self.checked, self.rules, self.divergences, dict(self.figures))
        return Verdict(INCOMPLETE if self.uninterpreted else CONFORMS, self.checked, frozenset(self.rules), None,
                       tuple(self.uninterpreted), dict(self.figures))

    def _owner(self, rec):
        if rec["type"] == "response":
            return self.requests[rec_key(rec)][0]
        return self.by_conn.get((rec["connection"], _group_of(rec)))

    def _request(self, line: int, rec: dict):
        api, body = rec["api"], rec["body"]
        key = (rec["connection"], _group_of(rec))
        if api == "OffsetCommit" and key not in self.by_conn and (body["member_id"], body["generation_id"]) == ("", -1):
            return None  # a client outside group management commits (KafkaConsumer.assign): no member to judge
        client = self._route(rec)
        if id(client) in self.dropped:
            return None
        client.records.append((line, rec))
        if api == "JoinGroup" and client.cfg is None:
            client.cfg = self._config(body)
        if client.cfg is None:
            raise Uninterpretable(f"{api} before the client's first JoinGroup: its protocol is unknown")
        observed = self._observed(client.cfg, api, body)
        self.requests[(rec["connection"], rec["correlation_id"])] = (client, api)
        self.checked += 1
        self.figures["requests"] += 1
        if api in SIDE:
            return self._side(client, line, rec, observed)
        return self._main(client, line, rec, observed)

    def _response(self, line: int, rec: dict):
        key = (rec["connection"], rec["correlation_id"])
        client, api = self.requests[key]
        if id(client) in self.dropped:
            return None
        del self.requests[key]  # a second response to it is malformed (the reader's to refuse)
        client.records.append((line, rec))
        self.checked += 1
        body = rec["body"]
        if not_the_coordinators(body):
            return self._not_the_coordinators(client, api, body)
        error = body.get("error", "NONE") if api != "OffsetCommit" else _commit_error(body).name
        if error != "NONE":
            client.signal = (api, error)
        if api in MAIN_LINE:
            entry = (self._model_response(client, api, body), False) if api != "LeaveGroup" else None
            client.candidates = {c._replace(inflight=(), queue=c.queue + ((entry,) if entry else ()))
                                 for c in client.candidates}
            if api == "JoinGroup":
                self.by_member[(client.group, body["member_id"])] = client
                if body["members"]:
                    client.round_members = body["members"]
            return None
        error = _error(body["error"]) if api == "Heartbeat" else _commit_error(body)
        if api == "Heartbeat" and error != Error.NONE:
            entry = (HeartbeatResponse(error), False)
        elif api == "OffsetCommit" and error in COMMIT_SIGNALS:
            entry = (HeartbeatResponse(error), True)  # a client may act on it at once, or not
        else:
            return None
        client.candidates = {c._replace(queue=c.queue + (entry,)) for c in client.candidates}
        return None

    @staticmethod
    def _not_the_coordinators(client: Client, api: str, body: dict) -> None:
        """A response the broker gave before any group handler ran (coordinator.BROKER_ERRORS:
        the group's coordinator is elsewhere, or its __consumer_offsets partition still loads),
        taken as the coordinator side takes it: the request was lost. A JoinGroup or SyncGroup
        in flight is the model's ``CoordinatorLost`` (R72): JoinGroup again under the member's
        member.id. The Java consumer's JoinGroupResponseHandler.handle fails the join future
        with COORDINATOR_LOAD_IN_PROGRESS (AbstractCoordinator.java:686-689, Kafka 4.4.0), or
        marks the coordinator unknown on NOT_COORDINATOR (:699-702), both retriable, and
        joinGroupIfNeeded finds the coordinator and sends JoinGroup again after
        retry.backoff.ms (:549, :558, :467, :488); SyncGroupResponseHandler marks it unknown on
        NOT_COORDINATOR (:894-898), and raises any other such error to poll (:901), whose next
        call joins again (requestRejoin, :540). A Heartbeat, OffsetCommit or LeaveGroup so
        answered changes nothing."""
        if api in ("JoinGroup", "SyncGroup"):
            client.signal = (api, body["error"])
            client.candidates = {c._replace(inflight=(), queue=c.queue + ((CoordinatorLost(), False),))
                                 for c in client.candidates}
        elif api == "LeaveGroup":
            client.candidates = {c._replace(inflight=()) for c in client.candidates}
        return None

    # --- clients --------------------------------------------------------------------
    def _route(self, rec: dict) -> Client:
        """The client a request belongs to: the connection's, or, on a connection's
        first request of a group, the known client its member.id or group.instance.id
        names (a reconnect or a restart), or a new one."""
        body, group = rec["body"], _group_of(rec)
        key = (rec["connection"], group)
        if key in self.by_conn:
            return self.by_conn[key]
        named = (body["members"] or [{"member_id": "", "group_instance_id": None}])[0] \
            if rec["api"] == "LeaveGroup" else body
        member_id, instance = named["member_id"], named["group_instance_id"]
        client = self.by_member.get((group, member_id)) if member_id else None
        if client is None and instance is not None:
            client = self.by_instance.get((group, instance))
        if client is not None and member_id:
            self._reconnect(client)
        else:
            client = self._successor(client, group)
            self.clients.append(client)
        if instance is not None:
            self.by_instance[(group, instance)] = client
        self.by_conn[key] = client
        return client

    def _reconnect(self, client: Client) -> None:
        """A known client on a new connection: what was in flight on the old one may
        be sent again; the responses it received there stay queued (received, maybe
        not yet processed: the Java client drops the coordinator's connection when its
        own session times out, AbstractCoordinator.HeartbeatThread.run
        (AbstractCoordinator.java:1526, Kafka 4.4.0), long after it installed the
        SyncGroup's assignment)."""
        client.candidates = _resent(client.candidates)

    def _successor(self, known: Client | None, group: str) -> Client:
        """The client of a new connection that names no known member.id: a new one, or,
        when its group.instance.id is ``known``'s, a new process for that instance (a
        restart, or a second process given the same group.instance.id: R24, R25, R28)
        or ``known``'s own process rejoining without its member.id (a reconnect as
        ``_reconnect``'s). ``known`` keeps its connections: a replaced process still
        running is judged as itself there (its requests answered FENCED_INSTANCE_ID)."""
        client = Client(group)
        if known is not None:
            client.candidates = _resent(known.candidates) | {Candidate(NEW_CONSUMER)}
            client.cfg, client.records = known.cfg, list(known.records)
        return client

    def _config(self, body: dict) -> GroupConfig:
        """The client's GroupConfig: its rebalance protocol from the protocols it
        lists (see the module docstring), the topics it subscribes to in the
        header's order."""
        names = [p["name"] for p in body["protocols"]]
        topics = set()
        for p in body["protocols"]:
            topics.update(_subscription_dict(p["metadata"])["topics"])
        unknown = sorted(t for t in topics if t not in self.topics)
        if unknown:
            raise Uninterpretable(f"JoinGroup subscribes to {', '.join(unknown)}, not in the header's topics")
        ordered = tuple((t, n) for t, n in self.topics.items() if t in topics)
        if names and all(n in COOPERATIVE_PROTOCOLS for n in names):
            return GroupConfig(topics=ordered, protocol="cooperative", assignor="cooperative-sticky")
        eager = next((n for n in names if n in ASSIGNORS and n != "cooperative-sticky"), "range")
        return GroupConfig(topics=ordered, protocol="eager", assignor=eager)

    # --- the Kafka-level records as model values ----------------------------------
    def _mask(self, cfg: GroupConfig, topic_partitions) -> int:
        """The model's bitmask of ``[{topic, partitions}]``; Uninterpretable for a
        partition outside the client's topics."""
        names = [f"{tp['topic']}-{p}" for tp in topic_partitions for p in tp["partitions"]]
        try:
            return Codec(cfg).mask(names)
        except KeyError as e:
            raise Uninterpretable(f"partition {e.args[0]} is not one of the client's topics' partitions") from None

    def _claim(self, cfg: GroupConfig, metadata) -> tuple:
        """``(owned mask, generation or None)``: the generation is compared only
        when something is claimed and the subscription (v2+) carries one."""
        sub = _subscription_dict(metadata)
        owned = self._mask(cfg, sub["owned_partitions"])
        return owned, (sub["generation"] if owned and sub["version"] >= 2 else None)

    def _observed(self, cfg: GroupConfig, api: str, body: dict) -> tuple:
        """The request as the model would write it: ``(api, member_id, ...)``."""
        ids = self.ids
        if api == "JoinGroup":
            claims = {self._claim(cfg, p["metadata"]) for p in body["protocols"]}
            if len(claims) != 1:
                raise Uninterpretable("JoinGroup's protocols claim different partitions")
            owned, generation = claims.pop()
            return api, ids.member(body["member_id"]), ids.instance(body["group_instance_id"]), owned, generation
        if api == "SyncGroup":
            assignments = tuple((ids.member(a["member_id"]), self._assignment(cfg, a["assignment"]))
                                for a in body["assignments"])
            return api, ids.member(body["member_id"]), body["generation_id"], assignments
        if api == "LeaveGroup":
            return api, frozenset(ids.member(m["member_id"]) for m in body["members"])
        if api == "Heartbeat":
            return api, ids.member(body["member_id"]), body["generation_id"]
        parts = [{"topic": t["name"], "partitions": [p["partition"] for p in t["partitions"]]}
                 for t in body["topics"]]
        return api, ids.member(body["member_id"]), body["generation_id"], self._mask(cfg, parts)

    def _assignment(self, cfg: GroupConfig, a) -> int:
        if a is None:
            return 0
        if "assigned_partitions" not in a:
            raise Uninterpretable(f"the assignment is {'opaque bytes' if 'opaque' in a else 'decoded'} "
                                  "(not the consumer protocol)")
        return self._mask(cfg, a["assigned_partitions"])

    def _model_response(self, client: Client, api: str, body: dict):
        cfg, ids = client.cfg, self.ids
        error = _error(body["error"])
        if api == "JoinGroup":
            members = tuple((ids.member(m["member_id"]), ids.instance(m["group_instance_id"]),
                             Subscription(*self._subscription(cfg, m["metadata"]))) for m in body["members"])
            return JoinGroupResponse(error, ids.member(body["member_id"]), body["generation_id"],
                                     ids.member(body["leader"]), members, body["skip_assignment"],
                                     body["protocol_name"] or "")
        a = body["assignment"]
        return SyncGroupResponse(error, Assignment(self._assignment(cfg, a), _followup(a)) if a else EMPTY_ASSIGNMENT)

    def _subscription(self, cfg: GroupConfig, metadata) -> tuple:
        owned, _ = self._claim(cfg, metadata)
        sub = _subscription_dict(metadata)
        return owned, (sub["generation"] if owned else NO_GENERATION)

    # --- the search -------------------------------------------------------------------
    def _silent(self, client: Client, cand: Candidate, api: str):
        """Successors of ``cand`` by one silent step: processing the next queued
        response (or dropping an optional one); for a JoinGroup, ``Start``, or, once the
        member left (``_left``), ``Start`` as a new member; for a LeaveGroup, and for a
        static member's JoinGroup, ``Leave``."""
        cfg = client.cfg
        if cand.queue:
            (response, optional), rest = cand.queue[0], cand.queue[1:]
            yield self._step(cfg, cand._replace(queue=rest), response)
            if optional:
                yield cand._replace(queue=rest)
        c = cand.consumer
        if api == "JoinGroup" and c.phase == MemberPhase.UNJOINED and not cand.pending:
            yield self._step(cfg, cand, Start(self._instance_of(client)))
        if api == "JoinGroup" and _left(c) and not cand.pending:  # joins again, as a new member
            yield self._step(cfg, Candidate(NEW_CONSUMER), Start(self._instance_of(client)))
        if api == "JoinGroup" and c.scheduled != NOT_SCHEDULED and not cand.pending:  # a followup rebalance (R60)
            yield self._step(cfg, cand, Tick() if c.scheduled > 0 else ScheduledRebalanceDue())
        # a static member sends LeaveGroup only when told to (R27, KIP-1092), so its Leave
        # may also be silent, before a JoinGroup
        static = c.group_instance_id != NO_INSTANCE_ID
        if api == "LeaveGroup" and c.phase != MemberPhase.LEFT and not cand.pending:
            yield self._step(cfg, cand, Leave(leave_group=True))
        if api == "JoinGroup" and static and c.phase != MemberPhase.LEFT and not cand.pending:
            yield self._step(cfg, cand, Leave())

    def _instance_of(self, client: Client) -> int:
        for (group, instance), known in self.by_instance.items():
            if known is client:
                return self.ids.instance(instance)
        return NO_INSTANCE_ID

    def _step(self, cfg: GroupConfig, cand: Candidate, event) -> Candidate:
        c, outputs = handle(cfg, cand.consumer, event)
        sends = tuple(o.request for o in outputs if type(o) is Send)
        return cand._replace(consumer=c._replace(heartbeat_inflight=False), pending=cand.pending + sends)

    def _search(self, client: Client, api: str, accept):
        """Breadth first over silent steps from every candidate, bounded by the
        queue's length and two local commands; ``accept(cand)`` returns the
        successor when ``cand`` can send the observed request, else None. Returns
        (accepted successors, every candidate visited)."""
        frontier = list(client.candidates)
        seen = set(frontier)
        accepted = set()
        while frontier:
            nxt = []
            for cand in frontier:
                succ = accept(cand)
                if succ is not None:
                    accepted.add(succ)
                    continue
                for s in self._silent(client, cand, api):
                    if s not in seen:
                        seen.add(s)
                        nxt.append(s)
            if len(seen) > 64 * self.max_candidates:
                raise Uninterpretable(f"the search for this {api} visited more than {64 * self.max_candidates} "
                                      "states (raise max_candidates)")
            frontier = nxt
        if len(accepted) > self.max_candidates:
            raise Uninterpretable(f"more than {self.max_candidates} candidate states for one client")
        return accepted, seen

    def _main(self, client: Client, line: int, rec: dict, observed: tuple):
        api = observed[0]

        def accept(cand):
            if cand.pending and _matches(cand.pending[0], observed):
                return cand._replace(pending=cand.pending[1:], inflight=(cand.pending[0],))
            return None

        accepted, seen = self._search(client, api, accept)
        if not accepted:
            expected = sorted({self._text(client.cfg, c.pending[0]) for c in seen
                               if c.pending and _api(c.pending[0]) == api})
            divergence = None if client.resyncing else self._diverge(client, line, rec, observed, expected, seen)
            # the model's own request of this API taken as the one sent (a JoinGroup's member owning what the
            # client claimed: the client's word for what it owns); failing that, the observed request sent
            # from every state reached (a JoinGroup or SyncGroup), or every state reached
            self._resync(client, {self._as_sent(c, observed) for c in seen
                                  if c.pending and _api(c.pending[0]) == api}
                         or {self._forced(c, observed) for c in seen if api != "LeaveGroup"} or seen)
            return divergence
        client.resyncing = False
        client.candidates = accepted
        self._exercised(client, observed, accepted)
        if api == "SyncGroup" and observed[3]:
            return self._leader(client, line, rec, observed, {c.inflight[0] for c in accepted})
        return None

    def _side(self, client: Client, line: int, rec: dict, observed: tuple):
        api, member_id, generation = observed[:3]

        def accept(cand):
            c = cand.consumer
            if (c.member_id, c.generation) != (member_id, generation) or member_id == NO_MEMBER_ID \
                    or c.generation == NO_GENERATION or c.phase == MemberPhase.LEFT:
                return None
            if api == "OffsetCommit" and observed[3] & ~c.owned:
                return None
            return cand

        accepted, seen = self._search(client, api, accept)
        if not accepted:
            expected = sorted({self._identity_text(client.cfg, api, c.consumer) for c in seen})
            divergence = None if client.resyncing else self._diverge(client, line, rec, observed, expected, seen)
            self._resync(client, client.candidates)  # a Heartbeat or OffsetCommit changes no state
            return divergence
        client.resyncing = False
        if api == "Heartbeat" and not any(self._stable_after(client.cfg, c, member_id, generation) for c in accepted):
            self.figures["abstracted_heartbeats"] += 1
        client.candidates = accepted
        self.rules.add("R41" if api == "OffsetCommit" else "R10")
        return None

    def _stable_after(self, cfg: GroupConfig, cand: Candidate, member_id: int, generation: int) -> bool:
        """Whether the model's member itself could heartbeat here: Stable under this
        member.id and generation once some of the queued responses are processed."""
        while True:
            c = cand.consumer
            if c.phase == MemberPhase.STABLE and (c.member_id, c.generation) == (member_id, generation):
                return True
            if not cand.queue:
                return False
            cand = self._step(cfg, cand._replace(queue=cand.queue[1:]), cand.queue[0][0])

    def _leader(self, client: Client, line: int, rec: dict, observed: tuple, model_syncs):
        """R16, R23: the leader's assignments against the claims it was given;
        ``model_syncs``: the SyncGroups the model's leader sent instead (its own
        assignor's choice, one of those the properties allow)."""
        cfg = client.cfg
        self.figures["leader_assignments"] += 1
        members = tuple((self.ids.member(m["member_id"]), self.ids.instance(m["group_instance_id"]),
                         Subscription(*self._subscription(cfg, m["metadata"]))) for m in client.round_members)
        names = self.ids.member_names
        round_ids = {mid for mid, _, _ in members}
        strangers = sorted(names[m] for m, _ in observed[3] if m not in round_ids)
        failures = [f"exclusive: assigns to {', '.join(map(repr, strangers))}, not in the round"] if strangers else []
        owners = resolve_claims(cfg, members)
        claimed = union(sub.owned for _, _, sub in members)
        contested = contested_claims(cfg, members) if cfg.cooperative else 0
        expect = {"may_withhold": [cfg.partition_name(p) for p in partitions_of(claimed)] if cfg.cooperative else [],
                  "owners": {cfg.partition_name(p): names[m] for p, m in owners.items()} if cfg.cooperative else {},
                  "contested": [cfg.partition_name(p) for p in partitions_of(contested)]}
        got = {names[m]: [cfg.partition_name(p) for p in partitions_of(mask)] for m, mask in observed[3]}
        failures += check_assignment(expect, [cfg.partition_name(p) for p in range(cfg.num_partitions)], got)
        self.rules.add("R16")
        if cfg.cooperative:
            self.rules.update(("R22", "R23"))
        if not failures:
            return None
        rule = ASSIGNMENT_RULES[failures[0].partition(":")[0]]
        expected = tuple(sorted(self._text(cfg, req) for req in model_syncs))
        return Divergence(line, rec, "members", rule, expected,
                          f"the leader's assignments break {rule}: {'; '.join(failures)}", tuple(client.records))

    @staticmethod
    def _as_sent(cand: Candidate, observed: tuple) -> Candidate:
        """``cand`` having sent its next request in the observed one's place: a
        JoinGroup's claim (owned partitions, their generation) becomes what the
        member owns."""
        cand = cand._replace(pending=cand.pending[1:], inflight=(cand.pending[0],))
        if observed[0] != "JoinGroup":
            return cand
        owned, generation = observed[3], observed[4]
        c = cand.consumer
        return cand._replace(consumer=c._replace(owned=owned, owned_generation=(
            NO_GENERATION if not owned else c.owned_generation if generation is None else generation)))

    @staticmethod
    def _forced(cand: Candidate, observed: tuple) -> Candidate:
        """``cand`` having sent the observed JoinGroup or SyncGroup, which the model's
        member would not have: joining (owning what it claims) or syncing under the
        member.id and generation it names."""
        c = cand.consumer._replace(heartbeat_inflight=False)
        if observed[0] == "JoinGroup":
            _, member_id, instance, owned, generation = observed
            generation = NO_GENERATION if not owned else c.owned_generation if generation is None else generation
            sent = JoinGroup(member_id, Subscription(owned, generation), instance)
            c = c._replace(phase=MemberPhase.JOINING, member_id=member_id, leader=False, owned=owned,
                           owned_generation=generation)
        else:
            _, member_id, generation, assignments = observed
            sent = SyncGroup(member_id, generation, tuple((m, Assignment(a)) for m, a in assignments))
            c = c._replace(phase=MemberPhase.SYNCING, member_id=member_id, generation=generation)
        return cand._replace(consumer=c, pending=(), inflight=(sent,))

    def _resync(self, client: Client, candidates) -> None:
        """After a request the model cannot send (reported, or skipped while the client
        resynchronises): the client goes on from ``candidates``, and its requests are
        skipped until the model can send one of them again."""
        if not client.resyncing:
            client.resyncing = True
        else:
            self.figures["skipped_resynchronising"] += 1
        client.candidates = set(candidates)

    # --- reporting ---------------------------------------------------------------------
    def _exercised(self, client: Client, observed: tuple, accepted) -> None:
        api = observed[0]
        if api == "JoinGroup":
            self.rules.update(("R13", "R18" if client.cfg.cooperative else "R14"))
            if client.signal is not None:
                self.rules.add(SIGNAL_RULES.get(client.signal, "R13"))
            client.signal = None
        elif api == "LeaveGroup":
            self.rules.add("R20")
        else:
            self.rules.add("R8")

    def _diverge(self, client: Client, line: int, rec: dict, observed: tuple, expected, seen) -> Divergence:
        api = observed[0]
        rule = {"SyncGroup": "R8", "LeaveGroup": "R20", "Heartbeat": "R10", "OffsetCommit": "R41"}.get(api, "R13")
        lost = client.signal is not None and SIGNAL_RULES.get(client.signal) in ("R15", "R28")
        if api == "JoinGroup":
            owned = observed[3]
            if owned and lost and any(_api(c.pending[0]) == "JoinGroup" and not c.pending[0].subscription.owned
                                      for c in seen if c.pending):
                rule = "R15"
            elif owned and not client.cfg.cooperative:
                rule = "R14"
            elif any(owned & ~c.consumer.owned for c in seen if c.consumer.phase != MemberPhase.UNJOINED):
                rule = "R18"  # claims a partition it was told to revoke
            elif any(c.consumer.phase == MemberPhase.STABLE and owned == c.consumer.owned for c in seen):
                rule = "R18"  # rejoins though its last assignment revoked nothing
        if not expected:
            expected = [self._nothing(client, api, seen)]
        reason = f"no state of the model's member could send this {api}" + (
            " after membership was lost (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID)"
            if rule == "R15" else "")
        return Divergence(line, rec, "members", rule, tuple(expected), reason, tuple(client.records))

    def _nothing(self, client: Client, api: str, seen) -> str:
        """Why the model's member sends no ``api`` here: the states it can be in,
        what each waits for or would send next (a few, sorted)."""
        states = sorted({self._state_text(client.cfg, c) for c in seen})
        more = f"; and {len(states) - 4} more" if len(states) > 4 else ""
        return (f"nothing: in none of the {len(states)} states the model's member can be in here does it send a "
                f"{api}: " + "; ".join(states[:4]) + more)

    def _state_text(self, cfg: GroupConfig, cand: Candidate) -> str:
        c = cand.consumer
        who = "" if c.member_id == NO_MEMBER_ID else \
            f" as {self.ids.member_names.get(c.member_id)!r} at generation {c.generation}"
        owns = bracket(cfg.partition_name(p) for p in partitions_of(c.owned))
        if cand.inflight:
            doing = f"waits for its {_api(cand.inflight[0])} response"
        elif cand.pending:
            doing = f"sends {_api(cand.pending[0])} next"
        elif cand.queue:
            doing = f"{len(cand.queue)} response(s) unread"
        else:
            doing = "has nothing to send (no error, revocation or rebalance asks it to rejoin)"
        return f"{c.phase.name}{who} owning {owns}, {doing}"

    def _text(self, cfg: GroupConfig, req) -> str:
        """A model request in Kafka's terms, one line."""
        name = self.ids.member_names.get
        kind = type(req)
        if kind is JoinGroup:
            sub = req.subscription
            return (f"JoinGroup member_id={name(req.member_id)!r} "
                    f"group_instance_id={self.ids.instance_names.get(req.group_instance_id)!r} "
                    f"owned_partitions={bracket(cfg.partition_name(p) for p in partitions_of(sub.owned))} "
                    f"generation={sub.generation}")
        if kind is SyncGroup:
            given = ", ".join(f"{name(m)!r}: {bracket(cfg.partition_name(p) for p in partitions_of(a.partitions))}"
                              for m, a in req.assignments)
            return f"SyncGroup member_id={name(req.member_id)!r} generation_id={req.generation} assignments={{{given}}}"
        if kind is LeaveGroup:
            return f"LeaveGroup members={[name(m) for m, _ in req.members]}"
        return repr(req)

    def _identity_text(self, cfg: GroupConfig, api: str, c: Consumer) -> str:
        if c.member_id == NO_MEMBER_ID or c.generation == NO_GENERATION or c.phase == MemberPhase.LEFT:
            return f"no {api}: the member holds no member.id and generation"
        text = f"{api} member_id={self.ids.member_names[c.member_id]!r} generation_id={c.generation}"
        if api == "OffsetCommit":
            text += f" of partitions within {bracket(cfg.partition_name(p) for p in partitions_of(c.owned))}"
        return text


# --- helpers --------------------------------------------------------------------------
def _resent(candidates) -> set:
    """``candidates`` on a new connection: the request unanswered on the old one is to be
    sent again; responses already received stay queued."""
    return {c._replace(inflight=(), pending=c.inflight + c.pending) for c in candidates}


def _left(c: Consumer) -> bool:
    """Whether the member left of its own accord (Leave: LEFT under the member.id and
    generation it had), not by a fatal error (R28's FENCED_INSTANCE_ID resets the
    member.id, R35 and R42 the generation): such a process may join again as a new
    member, as the Java consumer does after its poll timeout (KIP-62:
    AbstractCoordinator.maybeLeaveGroup, AbstractCoordinator.java:1171 and :1183, Kafka
    4.4.0, sends LeaveGroup unless static and resets the member.id; the next poll
    rejoins) or an application that unsubscribes and subscribes again."""
    return c.phase == MemberPhase.LEFT and c.member_id != NO_MEMBER_ID and c.generation != NO_GENERATION


def _group_of(rec: dict) -> str:
    return rec["body"]["group_id"]


def _api(req) -> str:
    return type(req).__name__


def _followup(assignment: dict) -> int:
    """The model's ``Assignment.scheduled`` (ticks) of a decoded assignment: 1 when Kafka
    Streams' AssignmentInfo asks this member for a followup rebalance (``next_rebalance_ms``
    0: at once, for tasks waiting on their revocation; or the probing rebalance's time,
    R60; StreamsPartitionAssignor.maybeScheduleFollowupRebalance), else 0. The member
    rejoins once its one tick passed: when is not judged here."""
    streams = assignment.get("streams")
    return 1 if streams and streams["next_rebalance_ms"] != NO_REBALANCE_MS else 0


def _subscription_dict(metadata) -> dict:
    if "topics" not in metadata:  # opaque bytes, or another protocol's (Connect's, impl/connect_protocol.py)
        raise Uninterpretable(f"the JoinGroup metadata is {'opaque bytes' if 'opaque' in metadata else 'decoded'} "
                              "(not the consumer protocol)")
    return metadata


def _error(name) -> Error:
    try:
        return Error[name] if isinstance(name, str) else Error(name)
    except (KeyError, ValueError):
        raise Uninterpretable(f"error {name} is outside the model") from None


def _commit_error(body: dict) -> Error:
    """The first partition error of an OffsetCommitResponse other than NONE."""
    for t in body["topics"]:
        for p in t["partitions"]:
            if p["error"] != "NONE":
                return _error(p["error"])
    return Error.NONE


def _matches(req, observed: tuple) -> bool:
    """Whether the model's request ``req`` is the observed one in what the protocol
    fixes (see the module docstring)."""
    api = observed[0]
    kind = type(req)
    if api == "JoinGroup" and kind is JoinGroup:
        _, member_id, instance, owned, generation = observed
        sub = req.subscription
        return (req.member_id, req.group_instance_id, sub.owned) == (member_id, instance, owned) and \
            (generation is None or generation == sub.generation)
    if api == "SyncGroup" and kind is SyncGroup:
        return (req.member_id, req.generation, bool(req.assignments)) == (observed[1], observed[2], bool(observed[3]))
    if api == "LeaveGroup" and kind is LeaveGroup:
        return frozenset(m for m, _ in req.members) == observed[1]
    return False
