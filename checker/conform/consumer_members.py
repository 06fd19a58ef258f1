"""The member side of ``rebalance conform`` for KIP-848 consumer groups: every client's
ConsumerGroupHeartbeat and OffsetCommit held against the model's client
(model/consumer_group/membership.py ``handle``, after the Java consumer's
ConsumerMembershipManager), given the heartbeat responses that client received.

``check(trace, options, groups) -> Verdict`` for the records of ``groups`` (the group ids
a ConsumerGroupHeartbeat names, ``groups_of``); checker/conform/members.py hands them
over and combines the verdicts.

Method: as members.py does for classic clients, trace checking as constrained model
checking. A *client* is a member.id string of one group (a client names itself, KIP-1082;
a v0 join's empty one is the connection's until the response names it). Per client the
side keeps the set of candidate states (``Candidate``: a ``Membership``, the responses
received and not yet processed, and the client's ownership report, below). A response
is processed lazily: the client acts on it some time after it arrives, and its
application thread reconciles (``Reconcile``, each stage) when it polls. So for each
request the side searches the silent steps (processing the next queued response, a
reconciliation stage, the lost response of a heartbeat still unanswered, ``RequestTimeout``)
for a state whose next step sends it: ``HeartbeatDue`` for a heartbeat, ``Start`` for a
new client's join at epoch 0, ``Release`` for a fenced client's rejoin, ``Leave`` for a
leave at −1 (−2 static), ``CommitDue`` for an OffsetCommit.

What is compared (spec/KIP848.md, "Client"; the rule named where it differs):

* a heartbeat's member id and epoch (K12: the epoch last received; a join at 0 only when
  starting or once fenced and released, K14; a leave at −1, −2 for a static member, K14);
* its SubscribedTopicNames (K12: when changed, and in every full heartbeat);
* its TopicPartitions (K12: when its current assignment changed since last reported, and in
  every full heartbeat; K13: what it reports owned is reached by revoking first, then
  assigning; K15: a full heartbeat after a lost response);
* an OffsetCommit's member id and epoch and its partitions, within what the member owns
  (K11's member side: a member commits at its epoch what it processes).

What is abstracted, because the protocol allows it:

* a full heartbeat (the subscription, the owned partitions and the rebalance timeout) sent
  when the model's client would send only what changed: a client may send one at any time,
  as it does after an error, and the coordinator reads an unchanged field as none
  (librdkafka sends full heartbeats until it is given a non-empty assignment); it must
  still carry the model's subscription and owned partitions;
* the owned partitions a client reports: the model's rule (K12) or the Java consumer's,
  its current assignment only (finding K-F1, the mutation ``report-current-assignment``).
  Each client is judged with both until its reports tell them apart; the figure
  ``reports_current_assignment`` counts the clients only the Java consumer's rule explains.
* commits in flight: a commit is judged against the epoch and partitions of any state the
  client may be in when it built it (the response that moved it on may be unprocessed).

A client the side cannot read (a partition of a topic not in the header, an unknown
error) is dropped and the verdict is INCOMPLETE, naming the line.
"""
from __future__ import annotations

from typing import NamedTuple

from rebalance.impl.consumer_group import subscription
from rebalance.impl.consumer_protocol import mask_of_topics, topic_partitions
from rebalance.model.config import KIP848, GroupConfig, rule
from rebalance.model.consumer_group.membership import (
    IN_GROUP, NEW_MEMBERSHIP, Membership, handle, may_commit, reconcilable, reported_ownership,
)
from rebalance.model.consumer_group.messages import (
    JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ClientState, ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse,
    Reconcile, Release, RequestTimeout, Start,
)
from rebalance.model.protocol import NO_INSTANCE_ID, Error, HeartbeatDue, Leave, Send

from ..render import bracket
from .coordinator import not_the_coordinators
from .verdict import CONFORMS, INCOMPLETE, Divergence, Verdict, divergent, option

JAVA_REPORT = "report-current-assignment"  # finding K-F1: the Java consumer's ownership report
# a heartbeat field that differs -> the rule it breaks
FIELD_RULES = {"member_id": "K12", "member_epoch": "K12", "instance_id": "K12", "topics": "K12", "owned": "K13",
               "owned_missing": "K12"}


class Uninterpretable(Exception):
    """A record the side cannot read."""


class Candidate(NamedTuple):
    """One state a client may be in: ``member``; ``queue``: the heartbeat responses received
    and not processed, in arrival order; ``java``: judged by the Java consumer's ownership
    report (K-F1) rather than the model's."""

    member: Membership
    queue: tuple = ()
    java: bool = False


class Client:
    """One client: its candidates, its records (the divergence's context), whether its last
    heartbeat is unanswered in the trace so far (its response may be lost, K15), and whether
    it diverged (its requests are then skipped until the model can send one again)."""

    def __init__(self, name: str):
        self.name = name
        self.candidates = {Candidate(NEW_MEMBERSHIP, java=False), Candidate(NEW_MEMBERSHIP, java=True)}
        self.records: list = []
        self.unanswered = False
        self.resyncing = False


def groups_of(records) -> set:
    """The group ids a ConsumerGroupHeartbeat request names."""
    return {r["body"]["group_id"] for _, r in records
            if r["type"] == "request" and r.get("api") == "ConsumerGroupHeartbeat"}


def members_of(records) -> set:
    """``(group id, member.id)`` of every KIP-848 client: named in a ConsumerGroupHeartbeat request,
    or by the coordinator in its response to a v0 join."""
    out, joins = set(), {}
    for _, r in records:
        if r.get("api") != "ConsumerGroupHeartbeat":
            continue
        if r["type"] == "request":
            out.add((r["body"]["group_id"], r["body"]["member_id"]))
            joins[(r["connection"], r["correlation_id"])] = r["body"]["group_id"]
        elif (r["connection"], r["correlation_id"]) in joins and r["body"]["member_id"]:
            out.add((joins[(r["connection"], r["correlation_id"])], r["body"]["member_id"]))
    return out


def theirs(request: dict, members: set) -> bool:
    """Whether ``request`` is a KIP-848 client's (``members``: ``members_of``): a
    ConsumerGroupHeartbeat, or an OffsetCommit under such a member.id."""
    api = request["api"]
    return api == "ConsumerGroupHeartbeat" or (
        api == "OffsetCommit" and (request["body"]["group_id"], request["body"]["member_id"]) in members)


def check(trace, options, groups) -> Verdict:
    """Hold every KIP-848 client of ``groups`` in ``trace`` to the model's client. Returns a
    Verdict: DIVERGENT with every request no candidate could send (its line, the rule, what
    the model's client would have sent), INCOMPLETE naming what could not be read, CONFORMS
    otherwise. Sources: see the module docstring."""
    topics = tuple((t["name"], t["partitions"]) for t in trace.header["settings"]["topics"]) or (("", 1),)
    mutations = frozenset(option(options, "mutations", frozenset()))
    return _Checker(topics, mutations, groups).run(trace.records)


class _Checker:
    def __init__(self, topics: tuple, mutations: frozenset, groups: set):
        self.cfgs = {java: GroupConfig(topics=topics, protocol=KIP848, assignor="uniform",
                                       mutations=mutations | ({JAVA_REPORT} if java else frozenset()))
                     for java in (False, True)}
        self.cfg = self.cfgs[False]
        self.groups = groups
        self.clients: dict = {}      # (group, member.id string, or ("", connection)) -> Client
        self.ids: dict = {}          # (group, member.id string) -> model member id
        self.instances: dict = {None: NO_INSTANCE_ID}
        self.requests: dict = {}     # (connection, correlation id) -> (Client, api, key)
        self.dropped: set = set()
        self.uninterpreted: list = []
        self.divergences: list = []
        self.rules: set = set()
        self.checked = 0
        self.figures = {"kip848_clients": 0, "heartbeats": 0, "commits": 0, "skipped_resynchronising": 0}

    def run(self, records) -> Verdict:
        for line, rec in records:
            if rec["type"] == "request" and rec["api"] in ("ConsumerGroupHeartbeat", "OffsetCommit") \
                    and rec["body"]["group_id"] in self.groups:
                self._request(line, rec)
            elif rec["type"] == "response" and (rec["connection"], rec["correlation_id"]) in self.requests:
                self._response(line, rec)
        javas = sum(1 for c in self.clients.values() if id(c) not in self.dropped and c.candidates
                    and all(x.java for x in c.candidates))
        self.figures["kip848_clients"] = len({id(c) for c in self.clients.values()})
        self.figures["reports_current_assignment"] = javas
        if self.divergences:
            return divergent(self.checked, self.rules, self.divergences, dict(self.figures))
        return Verdict(INCOMPLETE if self.uninterpreted else CONFORMS, self.checked, frozenset(self.rules), None,
                       tuple(self.uninterpreted), dict(self.figures))

    # --- records -----------------------------------------------------------------------
    def _request(self, line: int, rec: dict) -> None:
        body, group = rec["body"], rec["body"]["group_id"]
        if rec["api"] == "OffsetCommit":
            key = (group, body["member_id"])
            if key not in self.clients:
                return  # an admin client's, or a member this trace never saw join: none of the members' to judge
        else:
            key = (group, body["member_id"] or ("", rec["connection"]))
            if key not in self.clients:
                self.clients[key] = Client(body["member_id"])
        client = self.clients[key]
        if id(client) in self.dropped:
            return
        client.records.append((line, rec))
        self.requests[(rec["connection"], rec["correlation_id"])] = (client, rec["api"], key)
        self.checked += 1
        try:
            if rec["api"] == "OffsetCommit":
                self.figures["commits"] += 1
                divergence = self._commit(client, line, rec)
            else:
                self.figures["heartbeats"] += 1
                divergence = self._heartbeat(client, line, rec, key)
        except Uninterpretable as e:
            self.dropped.add(id(client))
            self.uninterpreted.append(f"line {line}: {e}")
            return
        if divergence is not None:
            self.divergences.append(divergence)

    def _response(self, line: int, rec: dict) -> None:
        client, api, key = self.requests.pop((rec["connection"], rec["correlation_id"]))
        if id(client) in self.dropped or api != "ConsumerGroupHeartbeat":
            return
        body = rec["body"]
        if not_the_coordinators(body):  # the broker's, not the coordinator's: as if lost (coordinator.py)
            return
        client.records.append((line, rec))
        self.checked += 1
        try:
            error = Error[body["error"]]
        except KeyError:
            self.dropped.add(id(client))
            self.uninterpreted.append(f"line {line}: error {body['error']} is outside the model")
            return
        if key[1] == ("", rec["connection"]) and body["member_id"]:  # v0: the coordinator named it
            named = (key[0], body["member_id"])
            self.clients[named] = client
            self.ids[named] = self._member(key)
        try:
            assignment = None if body["assignment"] is None else self._mask(
                (tp["topic"], tp["partitions"]) for tp in body["assignment"])
        except Uninterpretable as e:
            self.dropped.add(id(client))
            self.uninterpreted.append(f"line {line}: {e}")
            return
        response = ConsumerGroupHeartbeatResponse(error, self._member(key), body["member_epoch"], assignment)
        client.unanswered = False
        client.candidates = {c._replace(queue=c.queue + (response,)) for c in client.candidates}

    # --- the model's values --------------------------------------------------------------
    def _member(self, key) -> int:
        return self.ids.setdefault(key, len(self.ids) + 1)

    def _mask(self, pairs) -> int:
        pairs = list(pairs)
        known = {name for name, _ in self.cfg.topics}
        for topic, _ in pairs:
            if topic not in known:
                raise Uninterpretable(f"topic {topic!r} is not in the header's topics")
        return mask_of_topics(self.cfg, pairs)

    def _observed(self, key, body: dict) -> ConsumerGroupHeartbeat:
        """The traced heartbeat as the model's request (topics and owned None when not sent)."""
        topics, regex = subscription(self.cfg, body["subscribed_topic_names"], body["subscribed_topic_regex"])
        owned = None if body["topic_partitions"] is None else self._mask(
            (tp["topic"], tp["partitions"]) for tp in body["topic_partitions"])
        instance = self.instances.setdefault(body["instance_id"], len(self.instances))
        return ConsumerGroupHeartbeat(self._member(key), body["member_epoch"], instance, topics, owned, regex)

    # --- the search -------------------------------------------------------------------------
    def _step(self, cand: Candidate, event) -> tuple:
        member, outputs = handle(self.cfgs[cand.java], cand.member, event)
        return cand._replace(member=member), tuple(o.request for o in outputs if type(o) is Send)

    def _silent(self, client: Client, cand: Candidate):
        """Successors of ``cand`` by one silent step: the next queued response processed, a
        reconciliation stage run, or the heartbeat in flight's response lost (K15: only while
        the trace shows none)."""
        if cand.queue:
            yield self._step(cand._replace(queue=cand.queue[1:]), cand.queue[0])[0]
        if reconcilable(cand.member):
            yield self._step(cand, Reconcile())[0]
        if cand.member.inflight and client.unanswered and not cand.queue:
            yield self._step(cand, RequestTimeout())[0]

    def _reachable(self, client: Client) -> list:
        """Every candidate reachable from the client's by silent steps, breadth first."""
        seen = set(client.candidates)
        frontier = list(seen)
        out = list(frontier)
        while frontier:
            nxt = []
            for cand in frontier:
                for s in self._silent(client, cand):
                    if s not in seen:
                        seen.add(s)
                        nxt.append(s)
            out += nxt
            frontier = nxt
            if len(seen) > 4096:
                raise Uninterpretable("the search visited more than 4096 states")
        return out

    def _sends(self, cand: Candidate, obs: ConsumerGroupHeartbeat):
        """``(successor, the heartbeat it sends)`` for each local command that sends one from ``cand``."""
        m = cand.member
        if obs.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            events = (Leave(),)
        elif obs.member_epoch == JOIN_EPOCH and m.state == ClientState.UNSUBSCRIBED:
            events = (Start(obs.member_id, obs.instance_id, obs.topics if obs.topics is not None else 0, obs.regex),)
        else:
            events = (HeartbeatDue(), Release())
        for event in events:
            succ, sends = self._step(cand, event)
            for req in sends:
                if type(req) is ConsumerGroupHeartbeat:
                    yield succ, req, type(event)

    def _heartbeat(self, client: Client, line: int, rec: dict, key):
        obs = self._observed(key, rec["body"])
        full = obs.topics is not None and obs.owned is not None and rec["body"]["rebalance_timeout_ms"] >= 0
        accepted, near, by = set(), [], set()
        for cand in self._reachable(client):
            cfg = self.cfgs[cand.java]
            for succ, sent, event in self._sends(cand, obs):
                differs = _differs(sent, obs, succ.member, rule(cfg, reported_ownership)(succ.member), full)
                if differs is None:
                    accepted.add(succ)
                    by.add(event)
                else:
                    near.append((differs, cand, sent))
        lost, client.unanswered = client.unanswered, True
        if accepted:
            client.resyncing = False
            client.candidates = accepted
            self.rules.update(_exercised(obs, by))
            return None
        divergence = None
        if not client.resyncing:
            divergence = self._diverge(client, line, rec, obs, near, lost)
        else:
            self.figures["skipped_resynchronising"] += 1
        client.resyncing = True
        # go on as the client did: the candidates that sent a heartbeat at the observed epoch, else all
        forced = {succ for cand in self._reachable(client) for succ, sent, _ in self._sends(cand, obs)
                  if sent.member_epoch == obs.member_epoch}
        client.candidates = forced or client.candidates
        return divergence

    def _commit(self, client: Client, line: int, rec: dict):
        body = rec["body"]
        partitions = self._mask((t["name"], [p["partition"] for p in t["partitions"]]) for t in body["topics"])
        epoch = body["generation_id"]
        reach = self._reachable(client)
        accepted = {c for c in reach if c.member.epoch == epoch and may_commit(self.cfg, c.member, partitions)}
        if accepted:
            client.candidates = accepted
            self.rules.add("K11")
            return None
        if client.resyncing:
            self.figures["skipped_resynchronising"] += 1
            return None
        expected = sorted({f"OffsetCommit generation_id={c.member.epoch} of partitions within "
                           f"{bracket(self._names(c.member.owned))}" for c in reach if c.member.state in IN_GROUP}) \
            or [f"nothing: the member is {', '.join(sorted({c.member.state.name for c in reach}))}"]
        return Divergence(line, rec, "members", "K11", tuple(expected),
                          "no state of the model's client could send this OffsetCommit (its epoch, or a partition it "
                          "does not own)", tuple(client.records))

    # --- reporting --------------------------------------------------------------------------
    def _names(self, mask: int) -> list:
        return [f"{tp['topic']}-{p}" for tp in topic_partitions(self.cfg, mask) for p in tp["partitions"]]

    def _text(self, req: ConsumerGroupHeartbeat) -> str:
        text = f"ConsumerGroupHeartbeat member_epoch={req.member_epoch}"
        if req.topics is not None:
            text += f" subscribed_topic_names={[n for i, (n, _) in enumerate(self.cfg.topics) if req.topics >> i & 1]}"
        if req.owned is not None:
            text += f" topic_partitions={bracket(self._names(req.owned))}"
        return text

    def _diverge(self, client: Client, line: int, rec: dict, obs, near, lost: bool) -> Divergence:
        if near:
            fields = [d for d, _, _ in near]
            field = min(fields, key=list(FIELD_RULES).index)
            rule = FIELD_RULES[field]
            if field == "member_epoch" and obs.member_epoch <= JOIN_EPOCH:
                rule = "K14"
            if field in ("topics", "owned_missing") and lost:
                rule = "K15"  # its last heartbeat's response did not come: this one must be full
            expected = sorted({self._text(sent) for _, _, sent in near})
            reason = f"no state of the model's client sends this heartbeat: its {field.replace('_', ' ')} differs"
        else:
            rule = "K14" if obs.member_epoch <= JOIN_EPOCH else "K12"
            states = sorted({c.member.state.name for c in self._reachable(client)})
            expected = [f"nothing: the model's client is {', '.join(states)} and sends no such heartbeat"]
            reason = "no state of the model's client sends a heartbeat here"
        return Divergence(line, rec, "members", rule, tuple(expected), reason, tuple(client.records))


def _differs(sent: ConsumerGroupHeartbeat, obs: ConsumerGroupHeartbeat, member: Membership, reported: int,
             full: bool):
    """The first field in which the observed heartbeat is not the model's ``sent`` (None: it
    is). A ``full`` heartbeat (every field sent) may be sent at any time, as after an error
    (the coordinator reads an unchanged field as none): it must carry the subscription
    ``member.topics`` and the owned partitions ``reported`` (what the model's client reports)."""
    if sent.member_id != obs.member_id:
        return "member_id"
    if sent.member_epoch != obs.member_epoch:
        return "member_epoch"
    if sent.instance_id != obs.instance_id:
        return "instance_id"
    if sent.member_epoch < JOIN_EPOCH:
        return None  # a leave carries nothing else the model fixes
    if full:  # every field sent, as after an error: the model's values, sent or not
        sent = sent._replace(topics=member.topics, owned=reported)
    if obs.topics != sent.topics:
        return "topics"
    if sent.owned is not None and obs.owned is None:
        return "owned_missing"
    if obs.owned != sent.owned:
        return "owned"
    return None


def _exercised(obs: ConsumerGroupHeartbeat, events) -> tuple:
    """The rules a heartbeat the model sends exercises: K14 for a leave or a rejoin once
    fenced (``Release``), K13 for a report of owned partitions, K12 for every one."""
    if obs.member_epoch < JOIN_EPOCH or Release in events:
        return ("K12", "K14")
    return ("K12", "K13") if obs.owned is not None else ("K12",)
