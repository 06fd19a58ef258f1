"""The coordinator side of ``rebalance conform`` for a group both protocols reach (KIP-848's
online migration, spec/KIP848.md M1-M7): is every response to its JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit and ConsumerGroupHeartbeat requests one the model's
migration coordinator (model/consumer_group/migration.py ``handle``: a classic ``Group``
or a ``ConsumerGroup``, converting between them) could give?

One judge for both kinds of group: the consumer groups' search
(checker/conform/consumer_coordinator.py, itself the classic groups' frontier search) whose
candidates hold either kind, with both translations:

* a ConsumerGroupHeartbeat is translated as for a consumer group; a classic request as for a
  classic group, except that a JoinGroup's metadata and a SyncGroup's assignments are the
  model's ``Subscription`` (the owned partitions and the subscribed topics decoded from the
  first protocol's ConsumerProtocolSubscription, the protocols' names as its ``assignors``)
  and ``Assignment`` (the partitions) instead of opaque bytes: a consumer group reads them
  (GroupMetadataManager.deserializeSubscription, ConsumerGroup.fromClassicGroup), and a
  response is compared on those parts (its user data and the generation in its metadata
  are not modelled);
* member.id strings: a consumer-protocol client names itself, a classic member is named by
  the coordinator's response (either kind of group hands ids out); a string maps to one
  number for the whole trace, and each candidate to the model id it bound that number to;
* epochs and generations differ by the consumer groups' constant (Kafka creates a consumer
  group at epoch 1, K-F3) when the group began as a consumer group, by none when it began
  classic (a converted group's epoch is the classic generation, M1; a downgraded group's
  generation the consumer group's epoch, M2);
* timers: the classic group's (model/timing.py) or the consumer group's
  (model/consumer_group/timing.py), each member's classic session timeout for a classic
  member of a consumer group; a conversion starts the new kind's timers afresh, as
  convertToConsumerGroup and convertToClassicGroup schedule every member's session.

A response differing is decided by the rule of its API in a consumer group (M3-M6) or in a
classic group (spec/SPEC.md), a conversion's by M1 or M2.
"""
from __future__ import annotations

from dataclasses import replace

from rebalance.impl.consumer_protocol import mask_of_topics, model_subscription
from rebalance.model.consumer_group import migration
from rebalance.model.consumer_group import timing as consumer_timing
from rebalance.model.consumer_group.group import ConsumerGroup, empty_group, find as find_consumer, group_state
from rebalance.model.consumer_group.messages import GROUP_STATE_NAMES, ConsumerGroupHeartbeat, GroupState
from rebalance.model.coordinator import EMPTY_GROUP, Group, session_refreshed
from rebalance.model.protocol import (
    EMPTY_ASSIGNMENT, KIP848_IDS, NO_GENERATION, NO_MEMBER_ID, Assignment, JoinGroup, Phase, Receive, Subscription,
    SyncGroup, member_id,
)
from rebalance.model import timing as classic_timing
from rebalance.model.timing import DEFAULT_TIMEOUTS, Timeouts

from .consumer_coordinator import DEFAULT_REBALANCE_MS, ConsumerGroupSearch
from .coordinator import TIMER_RULES as CLASSIC_TIMER_RULES, UNKNOWN_ID, Candidate, _Group, canonical, error_name, rule_for

CLASSIC_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup")
# the rule of a classic request answered by a consumer group (spec/KIP848.md)
CLASSIC_IN_CONSUMER = {"JoinGroup": "M3", "SyncGroup": "M4", "OffsetCommit": "M4", "Heartbeat": "M5",
                       "LeaveGroup": "M6"}


def mixed_groups(trace) -> frozenset:
    """The group ids a trace reaches with both a classic request and a ConsumerGroupHeartbeat."""
    kinds: dict = {}
    for _, record in trace.records:
        if record["type"] == "request" and record["api"] in CLASSIC_APIS + ("ConsumerGroupHeartbeat",):
            kinds.setdefault(record["body"]["group_id"], set()).add(record["api"] == "ConsumerGroupHeartbeat")
    return frozenset(gid for gid, k in kinds.items() if len(k) == 2)


class MigrationSearch(ConsumerGroupSearch):
    """The search over a migrating group's candidates (module docstring). ``classic_first``:
    the group's first request is a classic one (its epochs are Kafka's, no difference)."""

    def __init__(self, side, group_id: str, classic_first: bool):
        super().__init__(side, group_id)
        self.cfg = replace(self.cfg, migration=1)
        self.ids_bound = True
        self.answered_by_consumer_group = False
        if classic_first:
            self.offset = 0

    def initial(self) -> Candidate:
        c = super().initial()
        c.group = c.stored = EMPTY_GROUP  # a ConsumerGroupHeartbeat to no group makes a consumer group (M1, offline)
        return c

    # --- member ids ----------------------------------------------------------------
    def _number(self, name) -> int:
        return self.ids.setdefault(name, len(self.ids) + 1)

    def _id(self, c: Candidate, key) -> int:
        """A consumer-protocol client's member.id string (``key``): its model id, bound at its
        first request to an id no classic member can be handed (KIP848_IDS)."""
        number = self._number(key)
        if number not in c.names:
            c.names[number] = member_id(0, KIP848_IDS | number)
        return c.names[number]

    def _mid(self, c: Candidate, name: str) -> int:
        if not name:
            return NO_MEMBER_ID
        number = self.ids.get(name)
        return c.names.get(number, UNKNOWN_ID) if number is not None else UNKNOWN_ID

    def _bind(self, c: Candidate, mid: int, name: str) -> bool:
        if mid == NO_MEMBER_ID or mid == UNKNOWN_ID:
            return name == ""
        number = self.ids.get(name)
        if number is not None and number in c.names:
            return c.names[number] == mid
        if not name or mid in c.names.values():
            return False
        c.names[self._number(name)] = mid
        return True

    def _name(self, c: Candidate, mid: int) -> str:
        if mid == NO_MEMBER_ID or mid == UNKNOWN_ID:
            return ""
        numbers = {v: k for k, v in c.names.items()}
        names = {v: k for k, v in self.ids.items()}
        return names.get(numbers.get(mid), "<a new member.id>")

    def _bound(self, c: Candidate, mid: int):
        numbers = [n for n, m in c.names.items() if m == mid]
        names = [k for k, v in self.ids.items() if numbers and v == numbers[0]]
        return names[0] if names else None

    def _handed_out(self, c: Candidate, mid: int):
        return _Group._handed_out(self, c, mid)

    # --- translating a request ---------------------------------------------------
    def _generation_in(self, generation: int) -> int:
        return self._epoch_in(generation)

    def _subscription(self, r) -> Subscription:
        """A JoinGroup's first protocol's metadata as the model's Subscription, its protocols'
        names the member's assignors (R35's vote)."""
        protocols = r.body["protocols"]
        meta = protocols[0]["metadata"] if protocols else {}
        return self._model_subscription(meta)._replace(assignors=tuple(p["name"] for p in protocols))

    def _model_subscription(self, meta: dict) -> Subscription:
        """A traced subscription's metadata as serve decodes it (impl/consumer_protocol.py)."""
        owned = mask_of_topics(self.cfg, ((tp["topic"], tp["partitions"]) for tp in meta.get("owned_partitions") or ()))
        return model_subscription(self.cfg, meta.get("topics") or (), owned, meta.get("generation", NO_GENERATION))

    def _assignment(self, assignment) -> Assignment:
        """A traced assignment as the model's: its partitions and whether it carries user data (M1)."""
        return Assignment(mask_of_topics(self.cfg, ((tp["topic"], tp["partitions"])
                                                    for tp in (assignment or {}).get("assigned_partitions") or ())),
                          user_data=bool((assignment or {}).get("user_data")))

    def model_request(self, c: Candidate, r):
        b = r.body
        if r.api == "ConsumerGroupHeartbeat" or (r.api == "OffsetCommit" and type(c.group) is ConsumerGroup):
            return super().model_request(c, r)
        if r.api == "JoinGroup":
            return JoinGroup(self._mid(c, b["member_id"]), self._subscription(r), r.iid, r.version >= 4,
                             supports_skip_assignment=r.version >= 9)
        if r.api == "SyncGroup":
            given = tuple((self._mid(c, a["member_id"]), self._assignment(a["assignment"])) for a in b["assignments"])
            return SyncGroup(self._mid(c, b["member_id"]), self._generation_in(b["generation_id"]), given, r.iid)
        req = _Group.model_request(self, c, r)
        return req._replace(generation=self._generation_in(req.generation)) if hasattr(req, "generation") else req

    def timer_rule(self, timer) -> str:
        return _Group.timer_rule(self, timer) if type(timer) in CLASSIC_TIMER_RULES else super().timer_rule(timer)

    def refreshed(self, req):
        return None  # computed from the step's outputs (_apply)

    # --- steps -----------------------------------------------------------------------
    def _step(self, c: Candidate, event, t: float, refreshed, request) -> None:
        if type(c.group) is ConsumerGroup:
            return super()._step(c, event, t, refreshed, request)  # with the uniform assignor's member orders
        self._apply(c, event, t, request)

    def _apply(self, c: Candidate, event, t: float, request) -> None:
        before = c.group
        if request is not None and request.api == "ConsumerGroupHeartbeat" and request.body["rebalance_timeout_ms"] >= 0:
            mid = event.request.member_id
            c.timeouts[mid] = Timeouts(self.timeouts.session_ms, request.body["rebalance_timeout_ms"])
        c.group, outputs = migration.handle(self.cfg, before, event)
        c.now = t
        if request is not None and request.api == "JoinGroup":
            for out in outputs:  # the member the JoinGroup made or rejoined keeps its session and rebalance timeouts
                if out.conn == request.model_conn and getattr(out.response, "member_id", NO_MEMBER_ID) > 0:
                    c.timeouts[out.response.member_id] = request.timeouts
        if type(c.group) is Group:
            live = {m.member_id for m in c.group.members}.union(c.group.pending)
        else:
            live = {m.member_id for m in c.group.members}
        c.timeouts = {m: x for m, x in c.timeouts.items() if m in live}
        if type(before) is not type(c.group):
            c.fired.add("M1" if type(c.group) is ConsumerGroup else "M2")
            c.timers = {}  # the conversion schedules the new kind's timers for every member
            before = EMPTY_GROUP if type(c.group) is Group else empty_group(self.cfg)
        elif type(before) is ConsumerGroup and request is not None and request.api in CLASSIC_IN_CONSUMER:
            c.fired.add(CLASSIC_IN_CONSUMER[request.api])
        self._rearm_either(c, before, event, outputs, t)
        self._produce(c, event, outputs, t)

    def _rearm_either(self, c: Candidate, before, event, outputs, t: float) -> None:
        if type(c.group) is Group:
            refreshed = session_refreshed(self.cfg, event.request) if type(event) is Receive \
                else NO_MEMBER_ID
            cancel, start = classic_timing.rearm(before, c.group, c.timers, refreshed)
        else:
            cancel, start = consumer_timing.rearm(before, c.group, c.timers,
                                                  consumer_timing.session_refreshed(event, outputs))
        for key in cancel:
            del c.timers[key]
        for key, timer in start:
            c.timers[key] = (timer, t + self._duration(c, timer))

    def _duration(self, c: Candidate, timer) -> float:
        timeouts_of = lambda m: c.timeouts.get(m, DEFAULT_TIMEOUTS)  # noqa: E731
        if type(c.group) is Group:
            return classic_timing.duration_ms(timer, c.group, timeouts_of, self.side.initial_delay_ms)
        return consumer_timing.duration_ms(timer, self.timeouts, lambda m: c.timeouts.get(
            m, Timeouts(0, DEFAULT_REBALANCE_MS)).rebalance_ms, c.group, lambda m: timeouts_of(m).session_ms)

    def _rearm(self, c: Candidate, before, refreshed, t: float) -> None:  # a restart's: every session afresh
        self._rearm_either(c, EMPTY_GROUP if type(c.group) is Group else empty_group(self.cfg), None, (), t)

    def _elections(self, c: Candidate):
        if type(c.group) is Group:
            yield from _Group._elections(self, c)
        else:
            yield from super()._elections(c)

    def is_empty(self, group) -> bool:
        return group.phase == Phase.EMPTY if type(group) is Group else group_state(group) == GroupState.EMPTY

    def is_dead(self, group) -> bool:
        return type(group) is Group and group.phase == Phase.DEAD

    # --- comparing a response -------------------------------------------------------
    def match(self, c: Candidate, r, resp, body: dict):
        self.answered_by_consumer_group = type(c.group) is ConsumerGroup
        if r.api not in CLASSIC_APIS:
            return super().match(c, r, resp, body)
        if r.api == "JoinGroup":
            resp = resp._replace(generation=self._generation_out(resp.generation),
                                 members=tuple((m, i, _view(s)) for m, i, s in resp.members))
            body = dict(body, members=[dict(m, metadata=self._traced_view(m["metadata"])) for m in body["members"]])
        elif r.api == "SyncGroup":
            resp = resp._replace(assignment=b"" if resp.error else canonical(resp.assignment.partitions))
            body = dict(body, assignment=None if body["assignment"] is None
                        else self._assignment(body["assignment"]).partitions)
        return _Group.match(self, c, r, resp, body)

    def _generation_out(self, generation: int) -> int:
        return generation + (self.offset or 0) if generation > 0 else generation

    def _traced_view(self, metadata: dict) -> dict:
        """The parts of a traced subscription the model keeps (``_view``'s)."""
        sub = self._model_subscription(metadata)
        return {"owned": sub.owned, "topics": sub.topics}

    def readable(self, c: Candidate, api: str, resp) -> str:
        if api == "SyncGroup":
            return f"SyncGroup {error_name(resp.error)} assignment " + (
                "null" if resp.error else "[" + ", ".join(f"{t}-{p}" for t, p in sorted(
                    self._partitions(resp.assignment.partitions))) + "]")
        if api in CLASSIC_APIS:
            return _Group.readable(self, c, api, resp._replace(generation=self._generation_out(resp.generation))
                                   if api == "JoinGroup" else resp)
        return super().readable(c, api, resp)

    def rule_for(self, api: str, key, body: dict | None = None) -> str:
        """A ConsumerGroupHeartbeat's rule (K..), a classic request's in a consumer group (M3-M6:
        the kind of group the last compared candidate answered it from) or in a classic group
        (R..)."""
        if api == "ConsumerGroupHeartbeat" and key == "GROUP_ID_NOT_FOUND":  # an upgrade refused or not
            return "M1"
        if api == "ConsumerGroupHeartbeat" or (isinstance(key, str) and key.startswith("late:")):
            return super().rule_for(api, key, body)
        if self.answered_by_consumer_group and api in CLASSIC_IN_CONSUMER:
            return CLASSIC_IN_CONSUMER[api]
        return rule_for(api, key, body)

    def exercised(self, api: str, body: dict) -> tuple:
        if api in CLASSIC_APIS:
            return _Group.exercised(api, body)
        return super().exercised(api, body)

    def last_state(self) -> dict:
        c = self.frontier[0]
        if type(c.group) is ConsumerGroup:
            return super().last_state()
        g = c.group
        return {"group_id": self.group_id, "kind": "classic", "state": g.phase.name, "generation": g.generation,
                "leader": self._name(c, g.leader),
                "members": [{"member_id": self._name(c, m.member_id),
                             "assigned": sorted(f"{t}-{p}" for t, p in self._partitions(m.assignment.partitions))}
                            for m in g.members],
                "candidates": len(self.frontier)}


def _view(subscription) -> bytes:
    """A model Subscription's parts a traced one is compared on: owned partitions and topics."""
    return canonical({"owned": subscription.owned, "topics": subscription.topics})
