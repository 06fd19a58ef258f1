"""The coordinator side of ``rebalance conform`` for KIP-848 consumer groups: is every
ConsumerGroupHeartbeat response (and OffsetCommit response to such a group) one the
model's consumer group coordinator (model/consumer_group/coordinator.py ``handle``)
could give, from the state the trace has reached?

The search is the classic groups' (checker/conform/coordinator.py ``_Group``: a frontier
of candidate states, requests processed one connection at a time in any order behind a
proxy, timers firing within ``slack_ms`` of their deadlines), with the consumer group's
state, timers and translation:

* requests are translated as impl/consumer_group.py translates them for ``rebalance
  serve`` (the same functions): member.id strings to model member ids (the client names
  itself; an empty one at v0 is named by the coordinator, whose response binds the name),
  topic names to the model's bitmasks, the fields the model abstracts checked by
  ``heartbeat_wire_error``;
* the timers are model/consumer_group/timing.py's: each member's session
  (the header's ``group_consumer_session_timeout_ms``, 45 s by default) and the rebalance
  timeout it sent; the asynchronous resolution of a regular expression
  (``RegexResolved``) is a silent step the coordinator may take at any time;
* epochs are compared up to a constant per group: Kafka 4.4.0 creates a consumer group at
  epoch 1 (ModernGroup.java:134), the model at 0 (finding K-F3, docs/kip848.md), so a
  group's first successful answer with a member epoch fixes the difference, 0 (serve)
  or 1 (Kafka), for the rest of the trace;
* the rule named where a response differs is spec/KIP848.md's (K1-K17).

ConsumerGroupDescribe is judged against the group (``describe``): the candidates that are,
or through silent steps before its answer become, the group it describes go on, the others
are dropped; none is a divergence naming the first field that differs (``DESCRIBE_RULES``):
the state and group epoch (K1), the target assignment epoch and each member's target (K4),
the members (K7), each member's epoch (K5) and assignment (K17: what K5 left it, assigned
and pending revocation, as Kafka's ConsumerGroupMember.asConsumerGroupDescribeMember gives
it; the model's ``described_assignment``).
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace

from rebalance.impl.consumer_group import heartbeat_wire_error, subscription
from rebalance.impl.consumer_protocol import mask_of_topics, topic_partitions
from rebalance.model.config import KIP848, GroupConfig, rule
from rebalance.model.consumer_group.coordinator import handle
from rebalance.model.consumer_group.group import described_assignment, empty_group, group_state, target_of
from rebalance.model.consumer_group.messages import (
    GROUP_STATE_NAMES, JOIN_EPOCH, ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse, GroupState,
    MemberRebalanceTimeout, RegexResolved,
)
from rebalance.model.consumer_group.timing import ConsumerTimeouts, duration_ms, rearm, session_refreshed
from rebalance.model.protocol import NO_MEMBER_ID, Error, OffsetCommit, Receive, Reply, SessionTimeout

from .coordinator import Candidate, _Group, _initial, error_name

DEFAULT_REBALANCE_MS = 300_000  # a member that never sent one (impl/consumer_group.py's default)
EPOCH_OFFSETS = (0, 1)  # Kafka's member epochs minus the model's: serve's 0, Kafka 4.4.0's 1 (K-F3)
# the rule deciding a ConsumerGroupHeartbeat response that differs in an error or a field (spec/KIP848.md)
RULES = {
    "INVALID_REQUEST": "K2", "UNKNOWN_MEMBER_ID": "K2", "UNSUPPORTED_ASSIGNOR": "K2", "GROUP_ID_NOT_FOUND": "K2",
    "FENCED_MEMBER_EPOCH": "K3", "UNRELEASED_INSTANCE_ID": "K8", "FENCED_INSTANCE_ID": "K8",
    "member_epoch": "K5", "assignment": "K5", "assignment_sent": "K10", "member_id": "K10", "held": "K5",
}
# a consumed heartbeat response exercises these (by error; NONE by the request's epoch)
EXERCISED = {"INVALID_REQUEST": ("K2",), "UNKNOWN_MEMBER_ID": ("K2",), "UNSUPPORTED_ASSIGNOR": ("K2",),
             "FENCED_MEMBER_EPOCH": ("K3",), "UNRELEASED_INSTANCE_ID": ("K8",), "FENCED_INSTANCE_ID": ("K8",)}
TIMER_RULES = {SessionTimeout: "K7", MemberRebalanceTimeout: "K7", RegexResolved: "K9"}
# a ConsumerGroupDescribe field that differs -> the rule deciding it, in the order compared
DESCRIBE_RULES = {"state": "K1", "group_epoch": "K1", "assignment_epoch": "K4", "members": "K7",
                  "member_epoch": "K5", "assignment": "K17", "target_assignment": "K4"}


class _WireRefused:
    """A heartbeat ``heartbeat_wire_error`` refuses before the model sees it: ``error``."""

    def __init__(self, error: int):
        self.error = Error(error)


class ConsumerGroupSearch(_Group):
    """The search over one consumer group's candidates. Member.id strings map to model ids
    once for all candidates (a client names itself, KIP-1082); ``offset``: the group's
    epoch difference (None until its first answer with an epoch)."""

    def __init__(self, side, group_id: str):
        topics = side.cluster.topics or (("", 1),)  # the model's configuration needs a partition
        self.cfg = GroupConfig(topics=topics, protocol=KIP848, assignor="uniform", mutations=side.options.mutations)
        self.timeouts = ConsumerTimeouts(side.settings.get("group_consumer_session_timeout_ms", 45_000))
        self.ids: dict = {}  # member.id string (or ("", request line) for an empty one) -> its number
        self.offset = None
        self.ids_bound = False  # whether ``c.names`` binds every number (else an unbound number is its model id)
        self.reordering, self.reordered = False, []
        super().__init__(side, group_id)

    def initial(self) -> Candidate:
        c = _initial()
        c.group = c.stored = empty_group(self.cfg)
        return c

    # --- translating a request ---------------------------------------------------
    def _id(self, c: Candidate, key) -> int:
        """The model member id, in candidate ``c``, of a member.id string (``key``): its number,
        renamed by the member orders ``c`` took (``c.names``: {number: model id}, a bijection)."""
        number = self.ids.setdefault(key, len(self.ids) + 1)
        return c.names.get(number, number)

    def _epoch_in(self, epoch: int) -> int:
        """A traced member epoch as the model's (sentinels 0, -1, -2 as they are)."""
        return epoch - (self.offset or 0) if epoch > 0 else epoch

    def model_request(self, c: Candidate, r):
        b = r.body
        if r.api == "OffsetCommit":
            mid = self._id(c, b["member_id"]) if b["member_id"] in self.ids else NO_MEMBER_ID
            partitions = mask_of_topics(self.cfg, ((t["name"], [p["partition"] for p in t["partitions"]])
                                                   for t in b["topics"]))
            return OffsetCommit(mid, self._epoch_in(b["generation_id"]), partitions, r.iid, r.version)
        refused = heartbeat_wire_error(SimpleNamespace(**b, rebalance_timeout=_Ms(b["rebalance_timeout_ms"])))
        if refused is not None:
            return _WireRefused(refused[0])
        mid = self._id(c, b["member_id"] or ("", r.line))
        topics, regex = subscription(self.cfg, b["subscribed_topic_names"], b["subscribed_topic_regex"])
        owned = None if b["topic_partitions"] is None else mask_of_topics(
            self.cfg, ((tp["topic"], tp["partitions"]) for tp in b["topic_partitions"]))
        return ConsumerGroupHeartbeat(mid, self._epoch_in(b["member_epoch"]), r.iid, topics, owned, regex,
                                      r.version, not b["member_id"], b["server_assignor"])

    def refreshed(self, req):
        return None  # computed from the step's outputs (_step)

    def timer_rule(self, timer) -> str:
        return TIMER_RULES[type(timer)]

    # --- silent steps -------------------------------------------------------------
    def _successors(self, c: Candidate, t: float):
        for n in super()._successors(c, t):
            yield n
            while self.reordered:
                yield self.reordered.pop()

    def _step(self, c: Candidate, event, t: float, refreshed, request) -> None:
        """One coordinator step. Behind a proxy, a step that computes a new target with two
        members or more also leaves in ``reordered`` the candidates that took it with the
        members in every other order: Kafka's uniform assignor serves its members in the
        order of its member map (groupSpec.memberIds(), a HashMap of member.id strings:
        UniformHomogeneousAssignmentBuilder.maybeRevokePartitions and
        assignRemainingPartitions, Kafka 4.4.0), which no trace shows; the model serves them
        in member id order, so each order is a renaming of the members' model ids."""
        before = c.copy() if self.side.proxied and not self.reordering else None
        self._apply(c, event, t, request)
        if before is None or type(c.group) is not type(before.group) or c.group.target_epoch == before.group.target_epoch \
                or len(c.group.members) < 2:
            return
        self.reordering = True
        try:
            ids = [m.member_id for m in c.group.members]
            for order in itertools.permutations(ids):
                sigma = dict(zip(ids, order))
                if order == tuple(ids):
                    continue
                alt = before.copy()
                _rename(alt, sigma, self.ids_bound)
                self._apply(alt, _renamed(event, sigma), t, request)
                self.reordered.append(alt)
        finally:
            self.reordering = False

    def _apply(self, c: Candidate, event, t: float, request) -> None:
        before = c.group
        if type(event) is Receive and type(event.request) is _WireRefused:
            outputs = (Reply(event.conn, ConsumerGroupHeartbeatResponse(event.request.error, NO_MEMBER_ID, 0)),)
        else:
            if request is not None and request.api == "ConsumerGroupHeartbeat" \
                    and request.body["rebalance_timeout_ms"] >= 0:
                c.timeouts[event.request.member_id] = request.body["rebalance_timeout_ms"]
            c.group, outputs = handle(self.cfg, before, event)
        c.now = t
        if c.group is not before:
            live = {m.member_id for m in c.group.members}
            c.timeouts = {m: x for m, x in c.timeouts.items() if m in live}
        self._rearm(c, before, session_refreshed(event, outputs), t)
        self._produce(c, event, outputs, t)

    def _rearm(self, c: Candidate, before, refreshed, t: float) -> None:
        cancel, start = rearm(before if before is not None else empty_group(self.cfg), c.group, c.timers, refreshed)
        for key in cancel:
            del c.timers[key]
        for key, timer in start:
            c.timers[key] = (timer, t + duration_ms(timer, self.timeouts,
                                                    lambda m: c.timeouts.get(m, DEFAULT_REBALANCE_MS)))

    def _forget_gone(self, c: Candidate) -> None:
        pass  # member.id strings are bound once for all candidates

    def _elections(self, c: Candidate):
        """The coordinator resolves its members' regular expressions asynchronously (K9):
        a silent step it may take whenever one is unresolved."""
        if any(m.regex and not m.resolved for m in c.group.members):
            n = c.copy()
            self._step(n, RegexResolved(), c.now, None, None)
            n.fired.add("K9")
            yield n

    def restart(self, t: float, loaded: bool) -> None:
        """The broker restarted: serve keeps no consumer group (it starts over, Empty); Kafka
        loads it from __consumer_offsets and restarts every session when it does."""
        for c in self.frontier:
            if not self.side.proxied:
                c.group = empty_group(self.cfg)
                c.timeouts = {}
            c.queued, c.awaiting, c.produced, c.timers, c.closed = {}, {}, {}, {}, frozenset()
            c.now = max(c.now, t)
            c.loading = self.side.proxied
            if not c.loading:
                self._rearm(c, None, None, t)

    def is_empty(self, group) -> bool:
        return group_state(group) == GroupState.EMPTY

    def is_dead(self, group) -> bool:
        return False

    # --- comparing a response -------------------------------------------------------
    def match(self, c: Candidate, r, resp, body: dict):
        if r.api == "OffsetCommit":
            return super().match(c, r, resp, body)
        if error_name(resp.error) != body["error"]:
            return error_name(resp.error) if resp.error != Error.NONE else body["error"]
        if resp.error != Error.NONE:
            return None
        traced = body["member_epoch"]
        if resp.member_epoch > 0:
            if self.offset is None and traced - resp.member_epoch in EPOCH_OFFSETS:
                self.offset = traced - resp.member_epoch
            if traced != resp.member_epoch + (self.offset or 0):
                return "member_epoch"
        elif traced != resp.member_epoch:
            return "member_epoch"
        asked = r.body["member_id"]
        if asked and body["member_id"] != asked:
            return "member_id"
        if not asked and body["member_id"]:  # v0: the coordinator named it
            self.ids.setdefault(body["member_id"], self.ids[("", r.line)])
        if (resp.assignment is None) != (body["assignment"] is None):
            return "assignment_sent"
        if resp.assignment is not None and self._partitions(resp.assignment) != _traced(body["assignment"]):
            return "assignment"
        return None

    def _partitions(self, mask: int) -> set:
        return {(tp["topic"], p) for tp in topic_partitions(self.cfg, mask) for p in tp["partitions"]}

    def readable(self, c: Candidate, api: str, resp) -> str:
        if api == "OffsetCommit":
            return super().readable(c, api, resp)
        text = f"ConsumerGroupHeartbeat {error_name(resp.error)}"
        if resp.error == Error.NONE:
            epoch = resp.member_epoch + (self.offset or 0) if resp.member_epoch > 0 else resp.member_epoch
            text += f" member_epoch {epoch}"
            if resp.assignment is not None:
                text += " assignment [" + ", ".join(f"{t}-{p}" for t, p in sorted(self._partitions(resp.assignment))) \
                        + "]"
        return text

    def rule_for(self, api: str, key, body: dict | None = None) -> str:
        if isinstance(key, str) and key.startswith("late:"):
            return TIMER_RULES.get({t.__name__: t for t in TIMER_RULES}.get(key[5:]), "K7")
        if api == "OffsetCommit":
            return "K11"
        return RULES.get(key, "K5")

    def exercised(self, api: str, body: dict) -> tuple:
        if api == "OffsetCommit":
            return ("K11",)
        if body["error"] != "NONE":
            return EXERCISED.get(body["error"], ("K2",))
        return ("K7",) if body["member_epoch"] < JOIN_EPOCH else ("K1", "K3", "K4", "K5", "K10")

    # --- ConsumerGroupDescribe ------------------------------------------------------------
    def describe(self, line: int, t: float, described: dict):
        """The frontier held to a ConsumerGroupDescribe answer at ``t`` (``described``: one
        group of its body, error NONE): None if some candidate reached by silent steps is that
        group (the frontier becomes those), else ``(rule, field, what the model's candidates
        describe)``: the first field that differs, its rule (DESCRIBE_RULES) and their
        descriptions."""
        differs, seen = [], []

        def take(c: Candidate):
            field = self._describe_differs(c, described)
            if field is None:
                return c.copy(), True
            differs.append(field)
            seen.append(self._described(c))
            return None, False
        if self._resolve(line, t, take):
            return None
        field = min(differs, key=list(DESCRIBE_RULES).index)
        return DESCRIBE_RULES[field], field, tuple(sorted(set(seen)))

    def _describe_differs(self, c: Candidate, d: dict):
        g = c.group
        # the group's epoch difference (K-F3), or before its first answer with an epoch the one that fits
        offset = self.offset if self.offset is not None else d["group_epoch"] - g.epoch

        def kafka(e: int) -> int:
            return e + offset if e > 0 else e
        if offset not in EPOCH_OFFSETS:
            return "group_epoch"
        if GROUP_STATE_NAMES[group_state(g)] != d["state"]:
            return "state"
        if kafka(g.epoch) != d["group_epoch"]:
            return "group_epoch"
        if kafka(g.target_epoch) != d["assignment_epoch"]:
            return "assignment_epoch"
        by_id = {}
        for m in d["members"]:
            number = self.ids.get(m["member_id"])
            by_id[c.names.get(number, number) if number is not None else m["member_id"]] = m
        if set(by_id) != {m.member_id for m in g.members}:
            return "members"
        for m in g.members:
            dm = by_id[m.member_id]
            if kafka(m.epoch) != dm["member_epoch"]:
                return "member_epoch"
            if self._partitions(rule(self.cfg, described_assignment)(m)) != _traced(dm["assignment"]):
                return "assignment"
            if self._partitions(target_of(g, m.member_id)) != _traced(dm["target_assignment"]):
                return "target_assignment"
        return None

    def _described(self, c: Candidate) -> str:
        """Candidate ``c``'s group as ConsumerGroupDescribe would give it, one line, its epochs
        numbered as the trace's (K-F3)."""
        g = c.group
        names = {c.names.get(number, number): name for name, number in self.ids.items() if isinstance(name, str)}

        def epoch(e: int) -> int:
            return e + (self.offset or 0) if e > 0 else e

        def parts(mask: int) -> str:
            return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(self._partitions(mask))) + "]"
        assignment = rule(self.cfg, described_assignment)
        members = "; ".join(f"{names.get(m.member_id, m.member_id)} epoch {epoch(m.epoch)} assignment "
                            f"{parts(assignment(m))} target {parts(target_of(g, m.member_id))}" for m in g.members)
        return (f"ConsumerGroupDescribe {GROUP_STATE_NAMES[group_state(g)]} group_epoch {epoch(g.epoch)} "
                f"assignment_epoch {epoch(g.target_epoch)} members: {members or 'none'}")

    def last_state(self) -> dict:
        c = self.frontier[0]
        g = c.group
        names = {c.names.get(number, number): name for name, number in self.ids.items() if isinstance(name, str)}
        return {"group_id": self.group_id, "state": GROUP_STATE_NAMES[group_state(g)], "group_epoch": g.epoch,
                "target_epoch": g.target_epoch,
                "members": [{"member_id": names.get(m.member_id, ""), "member_epoch": m.epoch,
                             "assigned": sorted(f"{t}-{p}" for t, p in self._partitions(m.assigned))}
                            for m in g.members],
                "candidates": len(self.frontier)}


class _Ms:
    """A rebalance timeout in ms with the ``total_seconds`` heartbeat_wire_error reads."""

    def __init__(self, ms: int):
        self.ms = ms

    def total_seconds(self) -> float:
        return self.ms / 1000


def _traced(assignment: list) -> set:
    return {(tp["topic"], p) for tp in assignment for p in tp["partitions"]}


def _rename(c: Candidate, sigma: dict, bound: bool = False) -> None:
    """Candidate ``c`` with its members' model ids renamed by ``sigma`` ({old: new}, a
    permutation of them): the group's members (kept sorted) and target, the timers, the
    rebalance timeouts and the numbers' model ids."""
    g = c.group
    c.group = g._replace(members=tuple(sorted(m._replace(member_id=sigma.get(m.member_id, m.member_id))
                                              for m in g.members)),
                         target=tuple(sorted((sigma.get(m, m), p) for m, p in g.target)))
    c.timers = {_renamed(k, sigma): (_renamed(timer, sigma), d) for k, (timer, d) in c.timers.items()}
    c.timeouts = {sigma.get(m, m): x for m, x in c.timeouts.items()}
    numbers = set(c.names) if bound else set(c.names) | set(sigma)  # unbound: a number is its own model id
    c.names = {n: sigma.get(c.names.get(n, n), c.names.get(n, n)) for n in numbers}


def _renamed(event, sigma: dict):
    """A coordinator input (a timer, or a received request) with its member id renamed."""
    if type(event) is Receive:
        return event._replace(request=_renamed(event.request, sigma))
    if hasattr(event, "member_id"):
        return event._replace(member_id=sigma.get(event.member_id, event.member_id))
    return event
