"""KIP-848 consumer groups in ``rebalance serve``: ConsumerGroupHeartbeat (API 68),
ConsumerGroupDescribe (API 69) and the OffsetCommits of such a group, through the
model's consumer group coordinator (model/consumer_group/coordinator.py ``handle``).

impl/ decides no protocol question here either: it translates Kafka's member.id and
group.instance.id strings to the model's ints, topic ids and names to the model's
partition and topic bitmasks over serve's topics (``cfg.topics``), runs the timers the
model arms (model/consumer_group/timing.py) on the event loop, and resolves a regular
expression subscription when the model asks for it (Python's ``re``, a full match, as
Kafka's RE2J ``matches``), then steps the model's ``RegexResolved``.

Checked here before the model sees a heartbeat (it abstracts these fields away), as
GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid (Kafka 4.4.0):
an empty group id, instance id or rack id, and a join without its rebalance timeout are
INVALID_REQUEST; a server assignor other than Kafka's built-in ones (group.consumer.assignors'
default, model/config.py ``SERVER_ASSIGNORS``) is UNSUPPORTED_ASSIGNOR. The rest of that
validation (an empty member id, by version) is the model's (K2), as is OffsetCommit's
version rule (K11); so is the choice among the server assignors the members name (K16).

KIP-848's online migration (spec/KIP848.md M1-M7) is the model's too: every step goes
through model/consumer_group/migration.py ``handle``. A ConsumerGroupHeartbeat joining a
classic group is stepped on that group (``from_classic``), which the model converts or
leaves as it is; classic members in a consumer group send JoinGroup, SyncGroup, Heartbeat
and LeaveGroup here (``join``, ``sync``, ``request``), their JoinGroup's metadata decoded
into the model's Subscription and their assignment encoded from the model's; and a step
that makes the group classic again hands it back to the Coordinator (``to_classic``),
in serve's form (impl/group_migration.py).

Not kept across a restart of serve (Kafka stores consumer groups in __consumer_offsets;
serve stores only their committed offsets): a member heartbeating after a restart is
UNKNOWN_MEMBER_ID and rejoins.
"""
from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections import OrderedDict

from rebalance.model.config import SERVER_ASSIGNORS, GroupConfig, rule
from rebalance.model.consumer_group import migration
from rebalance.model.consumer_group.group import described_assignment, empty_group, group_state, target_of
from rebalance.model.consumer_group.coordinator import used_assignor
from rebalance.model.consumer_group.messages import (
    GROUP_STATE_NAMES, JOIN_EPOCH, ConsumerGroupHeartbeat, GroupState, RegexResolved,
)
from rebalance.model.consumer_group.timing import duration_ms, rearm, session_refreshed
from rebalance.model.coordinator import Group
from rebalance.model.protocol import (
    KIP848_IDS, NO_INSTANCE_ID, NO_MEMBER_ID, RESPONSE_OF, Error, JoinGroup, JoinGroupResponse, OffsetCommit,
    Protocols, Receive, SyncGroup,
)

from . import broker
from .consumer_protocol import encode_assignment, mask_of_topics, topic_partitions
from .group_migration import model_form, model_subscription, protocols_of, wire_form
from .timers import SettledTimers
from .wire import FrameError, ms

log = logging.getLogger("rebalance.serve")

HANDED_NAMES = 1024  # member.id strings handed out to classic members kept until they join
DEFAULT_REBALANCE_MS = 300_000  # max.poll.interval.ms's default, for a member that never sent one


def heartbeat_wire_error(b):
    """``(error code, message)`` of a ConsumerGroupHeartbeat refused on the fields the model
    abstracts (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid,
    GroupCoordinatorService.java:478-510, Kafka 4.4.0), or None. ``b``: the request's fields
    (a kio payload, or anything with its attribute names)."""
    for name, value in (("GroupId", b.group_id), ("InstanceId", b.instance_id), ("RackId", b.rack_id)):
        if value == "" or (name == "GroupId" and value is None):
            return Error.INVALID_REQUEST, f"{name} can't be empty."
    if b.member_epoch == JOIN_EPOCH and b.rebalance_timeout.total_seconds() < 0:
        return Error.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
    if b.server_assignor is not None and b.server_assignor not in SERVER_ASSIGNORS:
        return Error.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {b.server_assignor} is not supported. Supported assignors: " \
                                     f"{','.join(SERVER_ASSIGNORS)}."
    return None


def topics_mask(cfg: GroupConfig, names) -> int:
    """The topic bitmask of topic names over ``cfg.topics`` (other names are dropped)."""
    index = {name: i for i, (name, _) in enumerate(cfg.topics)}
    return sum(1 << index[n] for n in set(names) if n in index)


def regex_mask(cfg: GroupConfig, pattern: str) -> int:
    """The topics a SubscribedTopicRegex matches (a whole name, as RE2J's ``matches``);
    none for a pattern that does not compile (Kafka refuses it: INVALID_REGULAR_EXPRESSION
    is not modelled)."""
    try:
        rx = re.compile(pattern)
    except re.error:
        return 0
    return topics_mask(cfg, (n for n, _ in cfg.topics if rx.fullmatch(n)))


def subscription(cfg: GroupConfig, names, regex) -> tuple:
    """The model's ``(topics, regex)`` of a heartbeat's SubscribedTopicNames and
    SubscribedTopicRegex (v1; resolved when the model asks, RegexResolved; "" is none,
    librdkafka's): ``topics`` None when neither is sent."""
    if regex:
        return regex_mask(cfg, regex), True
    return (None if names is None else topics_mask(cfg, names)), False


class ConsumerGroupRuntime(SettledTimers):
    """One consumer group: the model's ``ConsumerGroup`` and, beside it, the member.id and
    group.instance.id strings of its members, each member's rebalance timeout (ms), the
    client.id, host and subscription each last sent (for ConsumerGroupDescribe), and the
    asyncio timers. ``server``: the Coordinator (its ``consumer_cfg``, ``consumer_timeouts``,
    ``cluster``, ``settle``)."""

    def __init__(self, server, group_id: str):
        self.server, self.group_id, self.cfg = server, group_id, server.consumer_cfg
        self.group = empty_group(self.cfg)
        self.ids: dict = {}  # member.id string -> model member id
        self.instances: dict = {}  # group.instance.id string -> model instance id
        self.next_id = KIP848_IDS + 1  # apart from the member ids the model hands classic members (fresh_member_id)
        self.rebalance_ms: dict = {}  # model member id -> the rebalance timeout it sent
        self.described: dict = {}  # model member id -> {client_id, client_host, topic names, regex}
        self.protocols: dict = {}  # model member id -> the Protocols a classic member last joined with
        self.session_ms: dict = {}  # model member id -> the session timeout a classic member's JoinGroup sent
        self.handed: OrderedDict = OrderedDict()  # model member id -> member.id string handed out to a classic member
        self.timers: dict = {}

    @classmethod
    def from_classic(cls, server, classic) -> "ConsumerGroupRuntime":
        """A runtime holding serve's classic group runtime ``classic``'s group in the model's form,
        its members' names, instance ids, protocols and timeouts, for a ConsumerGroupHeartbeat
        the model may convert it on (M1); no timer runs until it does."""
        rt = cls(server, classic.group_id)
        rt.group = model_form(rt.cfg, classic.group)
        rt.ids = dict(classic.ids)
        rt.instances = dict(classic.instances)
        rt.protocols = protocols_of(classic.group)
        for mid, t in classic.timeouts.items():
            rt.session_ms[mid], rt.rebalance_ms[mid] = t.session_ms, t.rebalance_ms
        return rt

    # --- names ------------------------------------------------------------------
    def _int(self, table: dict, name) -> int:
        if name not in table:
            table[name] = self.next_id
            self.next_id += 1
        return table[name]

    def member_id(self, name: str) -> int:
        if not name:
            return NO_MEMBER_ID
        handed = next((mid for mid, n in self.handed.items() if n == name), None)
        return self._int(self.ids, name) if handed is None else self.ids.setdefault(name, handed)

    def instance_id(self, name) -> int:
        return NO_INSTANCE_ID if not name else self._int(self.instances, name)

    def _forget(self) -> None:
        """Keep the string tables to the ids the group's members hold."""
        live = {m.member_id for m in self.group.members}
        held = {m.instance_id for m in self.group.members}
        self.ids = {n: i for n, i in self.ids.items() if i in live}
        self.instances = {n: i for n, i in self.instances.items() if i in held}
        for table in (self.rebalance_ms, self.described, self.protocols, self.session_ms):
            for mid in [mid for mid in table if mid not in live]:
                del table[mid]
        while len(self.handed) > HANDED_NAMES:
            self.handed.popitem(last=False)

    def _name_handed(self, outputs) -> None:
        """A member id the model hands a classic member (a JoinGroup's, MEMBER_ID_REQUIRED's
        too) gets its member.id string, a UUID as Kafka names them in a consumer group."""
        for out in outputs:
            mid = getattr(out.response, "member_id", NO_MEMBER_ID)
            if type(out.response) is JoinGroupResponse and mid > 0 and self.name(mid) == "":
                self.handed[mid] = str(uuid.uuid4())

    def name(self, mid: int) -> str:
        return next((n for n, i in self.ids.items() if i == mid), None) or self.handed.get(mid, "")

    @property
    def names(self) -> dict:
        """{model member id: member.id string} of the members (impl/coordinator.py's LeaveGroup reads it)."""
        return {i: n for n, i in self.ids.items()}

    def instance_name(self, iid: int):
        return next((n for n, i in self.instances.items() if i == iid), None)

    # --- topics -------------------------------------------------------------------
    def owned_mask(self, tps) -> int:
        """The partition bitmask of TopicPartitions ([{topic_id, partitions}])."""
        return mask_of_topics(self.cfg, ((tp.topic_id, tp.partitions) for tp in tps), broker.topic_id)

    def assignment(self, mask: int) -> list:
        """[{topic_id, topic_name, partitions}] of a partition bitmask."""
        return [{"topic_id": broker.topic_id(tp["topic"]), "topic_name": tp["topic"], "partitions": tp["partitions"]}
                for tp in topic_partitions(self.cfg, mask)]

    # --- steps --------------------------------------------------------------------
    def step(self, event, conn: int = 0) -> tuple:
        """One model step (the migration coordinator's), its timers carried out and its replies
        delivered (a ConsumerGroupHeartbeat's is also returned to its caller); a step that
        leaves a classic group hands it to the Coordinator. The step's outputs."""
        before = self.group
        self.group, outputs = migration.handle(self.cfg, before, event)
        self._name_handed(outputs)
        if type(self.group) is Group:  # still classic (a refused upgrade), or classic again (M2)
            if type(before) is not Group:
                self.close()
                self.server.to_classic(self, wire_form(self.cfg, self.group, self.protocols))
            self.server.send(None, outputs)
            return outputs
        if type(before) is Group:  # converted (M1): every member's timers start
            before = empty_group(self.cfg)
        if self.group is not before:
            if (group_state(self.group), self.group.epoch) != (group_state(before), before.epoch):
                log.info("consumer group %s: epoch %d %s: %s", self.group_id, self.group.epoch,
                         GROUP_STATE_NAMES[group_state(self.group)],
                         ", ".join(f"{self.name(m.member_id)}@{m.epoch}" for m in self.group.members))
            if any(m.regex and not m.resolved for m in self.group.members):
                asyncio.get_running_loop().call_soon(self.step, RegexResolved())  # resolved "asynchronously"
        self._sync_timers(before, session_refreshed(event, outputs))
        self._forget()
        self.server.send(None, outputs)
        return outputs

    def _sync_timers(self, before, refreshed) -> None:
        cancel, start = rearm(before, self.group, self.timers, refreshed)
        for key in cancel:
            self.timers.pop(key).cancel()
        for key, timer in start:
            ms = duration_ms(timer, self.server.consumer_timeouts,
                             lambda mid: self.rebalance_ms.get(mid, DEFAULT_REBALANCE_MS), self.group,
                             lambda mid: self.session_ms.get(mid, self.server.consumer_timeouts.session_ms))
            self._arm_after(key, timer, ms / 1000)

    def heartbeat(self, c, version: int, b) -> dict:
        """A ConsumerGroupHeartbeat from connection ``c``: the response's fields."""
        refused = heartbeat_wire_error(b)
        if refused is not None:
            return {"throttle_time": 0, "error_code": refused[0], "error_message": refused[1], "member_id": None,
                    "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
        name = b.member_id or str(uuid.uuid4())  # empty: the coordinator's name for it, if the model accepts it
        mid = self.member_id(name)
        regex_asked = getattr(b, "subscribed_topic_regex", None)  # v1
        topics, regex = subscription(self.cfg, b.subscribed_topic_names, regex_asked)
        owned = None if b.topic_partitions is None else self.owned_mask(b.topic_partitions)
        if b.rebalance_timeout.total_seconds() >= 0:
            rebalance_ms = int(b.rebalance_timeout.total_seconds() * 1000)
        else:
            rebalance_ms = None
        req = ConsumerGroupHeartbeat(mid, b.member_epoch, self.instance_id(b.instance_id), topics, owned, regex,
                                     version, not b.member_id, b.server_assignor)
        if rebalance_ms is not None:
            self.rebalance_ms[mid] = rebalance_ms
        if topics is not None or mid not in self.described:
            self.described[mid] = {"client_id": c.client_id, "client_host": c.host,
                                   "subscribed_topic_names": list(b.subscribed_topic_names or ()),
                                   "subscribed_topic_regex": regex_asked or None}
        r = _own(self.step(Receive(c.conn, req)), c.conn)
        if r.error:
            return {"throttle_time": 0, "error_code": r.error, "error_message": r.error.name, "member_id": None,
                    "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
        interval = self.server.consumer_timeouts.heartbeat_interval_ms if r.member_epoch >= JOIN_EPOCH else 0
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "member_id": name,
                "member_epoch": r.member_epoch, "heartbeat_interval": interval,
                "assignment": None if r.assignment is None else {"topic_partitions": self.assignment(r.assignment)}}

    # --- classic members (online migration, M3-M6) --------------------------------------
    async def request(self, c, req, timeouts=None):
        """Hand a classic member's ``req`` from connection ``c`` to the model; the model's
        response (impl/coordinator.py's GroupRuntime.request's shape: Heartbeat and
        LeaveGroup are rendered as a classic group's)."""
        fut = asyncio.get_running_loop().create_future()
        c.waiting = (RESPONSE_OF[type(req)], fut)
        self.step(Receive(c.conn, req))
        return await fut

    async def join(self, c, version: int, b) -> dict:
        """A classic member's JoinGroup: its metadata as the model's Subscription (a protocol
        type other than consumer, or metadata that is no ConsumerProtocolSubscription, is
        INCONSISTENT_GROUP_PROTOCOL before the model sees it, as
        GroupMetadataManager.throwIfClassicProtocolIsNotSupported and deserializeSubscription
        refuse it, GroupMetadataManager.java:1931, 2031, Kafka 4.4.0); the response names no
        leader and no members (M3)."""
        protocols = Protocols(b.protocol_type, tuple((p.name, bytes(p.metadata)) for p in b.protocols))
        try:
            if b.protocol_type != "consumer" or not protocols.protocols:
                raise FrameError("not the consumer embedded protocol")
            sub = model_subscription(self.cfg, protocols)
        except FrameError:
            return {"throttle_time": 0, "error_code": Error.INCONSISTENT_GROUP_PROTOCOL, "generation_id": -1,
                    "protocol_type": None, "protocol_name": None if version >= 7 else "", "leader": "",
                    "skip_assignment": False, "member_id": b.member_id, "members": []}
        mid = self.member_id(b.member_id)
        if mid != NO_MEMBER_ID:  # its timers run as it asks from this step on
            self._joined(mid, protocols, b)
        r = await self.request(c, JoinGroup(mid, sub, self.instance_id(getattr(b, "group_instance_id", None)),
                                            version >= 4, supports_skip_assignment=version >= 9))
        if r.error == 0:  # a member the step made, too
            self._joined(r.member_id, protocols, b)
        return {"throttle_time": 0, "error_code": r.error, "generation_id": r.generation,
                "protocol_type": "consumer" if r.protocol else None,
                "protocol_name": r.protocol or (None if version >= 7 else ""), "leader": "",
                "skip_assignment": False, "member_id": self.name(r.member_id) or b.member_id, "members": []}

    def _joined(self, mid: int, protocols: Protocols, b) -> None:
        """What a classic member's JoinGroup ``b`` leaves beside the model: its protocols (kept for a
        downgrade, ClassicGroup.fromConsumerGroup) and its session and rebalance timeouts."""
        self.protocols[mid] = protocols
        self.session_ms[mid], self.rebalance_ms[mid] = ms(b.session_timeout), ms(b.rebalance_timeout)

    async def sync(self, c, b) -> dict:
        """A classic member's SyncGroup: its assigned partitions as Assignment bytes (M4); the
        protocol type and name echo the request's (classicGroupSyncToConsumerGroup)."""
        r = await self.request(c, SyncGroup(self.member_id(b.member_id), b.generation_id, (),
                                            self.instance_id(getattr(b, "group_instance_id", None))))
        ok = r.error == 0
        return {"throttle_time": 0, "error_code": r.error,
                "protocol_type": getattr(b, "protocol_type", None) if ok else None,
                "protocol_name": getattr(b, "protocol_name", None) if ok else None,
                "assignment": encode_assignment(self.cfg, r.assignment) if ok else b""}

    def commit_error(self, c, version: int, b) -> int:
        """The error of an OffsetCommit to this group (the model's K11, its version rule and the
        committed partitions' assignment epochs included)."""
        epoch = b.generation_id_or_member_epoch
        mid = self.member_id(b.member_id)
        partitions = mask_of_topics(self.cfg, ((t.name, [p.partition_index for p in t.partitions]) for t in b.topics))
        r = self.step(Receive(c.conn, OffsetCommit(mid, epoch, partitions,
                                                   self.instance_id(getattr(b, "group_instance_id", None)), version)))
        return _own(r, c.conn).error

    def list_entry(self) -> dict:
        """This group as ListGroups lists it."""
        return {"group_id": self.group_id, "protocol_type": "consumer", "group_type": "consumer",
                "group_state": GROUP_STATE_NAMES[group_state(self.group)]}

    def describe(self) -> dict:
        """ConsumerGroupDescribe's entry for this group (ConsumerGroup.asDescribedGroup; K17)."""
        g = self.group
        assignment = rule(self.cfg, described_assignment)
        members = []
        for m in g.members:
            seen = self.described.get(m.member_id, {})
            members.append({
                "member_id": self.name(m.member_id), "instance_id": self.instance_name(m.instance_id),
                "rack_id": None, "member_epoch": m.epoch, "client_id": seen.get("client_id", ""),
                "client_host": seen.get("client_host", ""),
                "subscribed_topic_names": seen.get("subscribed_topic_names", []),
                "subscribed_topic_regex": seen.get("subscribed_topic_regex"),
                "assignment": {"topic_partitions": self.assignment(assignment(m))},
                "target_assignment": {"topic_partitions": self.assignment(target_of(g, m.member_id))},
                "member_type": 0 if m.classic else 1})  # v1: 1 consumer protocol, 0 classic (-1 unknown)
        state = group_state(g)
        return {"error_code": 0, "error_message": None, "group_id": self.group_id,
                "group_state": GROUP_STATE_NAMES[state], "group_epoch": g.epoch, "assignment_epoch": g.target_epoch,
                "assignor_name": used_assignor(self.cfg, g.members), "members": members, "authorized_operations": -2147483648}

    def empty(self) -> bool:
        return type(self.group) is not Group and group_state(self.group) == GroupState.EMPTY


def _own(outputs, conn: int):
    """The response a step gave the request of connection ``conn`` (its last reply there: an
    upgrade answers the classic members' held requests first)."""
    return [out.response for out in outputs if out.conn == conn][-1]
