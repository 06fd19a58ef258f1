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
INVALID_REQUEST; a server assignor other than the model's (``cfg.assignor``) is
UNSUPPORTED_ASSIGNOR. The rest of that validation (an empty member id, by version) is
the model's (K2), as is OffsetCommit's version rule (K11).

Not kept across a restart of serve (Kafka stores consumer groups in __consumer_offsets;
serve stores only their committed offsets): a member heartbeating after a restart is
UNKNOWN_MEMBER_ID and rejoins.
"""
from __future__ import annotations

import asyncio
import logging
import re
import uuid

from rebalance.model.config import GroupConfig
from rebalance.model.consumer_group.coordinator import handle
from rebalance.model.consumer_group.group import empty_group, group_state, target_of
from rebalance.model.consumer_group.messages import (
    GROUP_STATE_NAMES, JOIN_EPOCH, ConsumerGroupHeartbeat, GroupState, RegexResolved,
)
from rebalance.model.consumer_group.timing import duration_ms, rearm, session_refreshed
from rebalance.model.protocol import NO_INSTANCE_ID, NO_MEMBER_ID, OffsetCommit, Receive

from . import broker
from .consumer_protocol import mask_of_topics, topic_partitions
from .timers import SettledTimers

log = logging.getLogger("rebalance.serve")

INVALID_REQUEST, UNSUPPORTED_ASSIGNOR = 42, 112
DEFAULT_REBALANCE_MS = 300_000  # max.poll.interval.ms's default, for a member that never sent one


def heartbeat_wire_error(b, cfg: GroupConfig):
    """``(error code, message)`` of a ConsumerGroupHeartbeat refused on the fields the model
    abstracts (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid,
    GroupCoordinatorService.java:478-510, Kafka 4.4.0), or None. ``b``: the request's fields
    (a kio payload, or anything with its attribute names)."""
    for name, value in (("GroupId", b.group_id), ("InstanceId", b.instance_id), ("RackId", b.rack_id)):
        if value == "" or (name == "GroupId" and value is None):
            return INVALID_REQUEST, f"{name} can't be empty."
    if b.member_epoch == JOIN_EPOCH and b.rebalance_timeout.total_seconds() < 0:
        return INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
    if b.server_assignor is not None and b.server_assignor != cfg.assignor:
        return UNSUPPORTED_ASSIGNOR, f"ServerAssignor {b.server_assignor} is not supported. Supported assignors: " \
                                     f"{cfg.assignor}."
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
        self.next_id = 1
        self.rebalance_ms: dict = {}  # model member id -> the rebalance timeout it sent
        self.described: dict = {}  # model member id -> {client_id, client_host, topic names, regex}
        self.timers: dict = {}

    # --- names ------------------------------------------------------------------
    def _int(self, table: dict, name) -> int:
        if name not in table:
            table[name] = self.next_id
            self.next_id += 1
        return table[name]

    def member_id(self, name: str) -> int:
        return NO_MEMBER_ID if not name else self._int(self.ids, name)

    def instance_id(self, name) -> int:
        return NO_INSTANCE_ID if not name else self._int(self.instances, name)

    def _forget(self) -> None:
        """Keep the string tables to the ids the group's members hold."""
        live = {m.member_id for m in self.group.members}
        held = {m.instance_id for m in self.group.members}
        self.ids = {n: i for n, i in self.ids.items() if i in live}
        self.instances = {n: i for n, i in self.instances.items() if i in held}
        for table in (self.rebalance_ms, self.described):
            for mid in [mid for mid in table if mid not in live]:
                del table[mid]

    def name(self, mid: int) -> str:
        return next((n for n, i in self.ids.items() if i == mid), "")

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
        """One model step, its timers carried out; the step's outputs."""
        before = self.group
        self.group, outputs = handle(self.cfg, before, event)
        if self.group is not before:
            if (group_state(self.group), self.group.epoch) != (group_state(before), before.epoch):
                log.info("consumer group %s: epoch %d %s: %s", self.group_id, self.group.epoch,
                         GROUP_STATE_NAMES[group_state(self.group)],
                         ", ".join(f"{self.name(m.member_id)}@{m.epoch}" for m in self.group.members))
            if any(m.regex and not m.resolved for m in self.group.members):
                asyncio.get_running_loop().call_soon(self.step, RegexResolved())  # resolved "asynchronously"
        self._sync_timers(before, session_refreshed(event, outputs))
        self._forget()
        return outputs

    def _sync_timers(self, before, refreshed) -> None:
        cancel, start = rearm(before, self.group, self.timers, refreshed)
        for key in cancel:
            self.timers.pop(key).cancel()
        for key, timer in start:
            ms = duration_ms(timer, self.server.consumer_timeouts,
                             lambda mid: self.rebalance_ms.get(mid, DEFAULT_REBALANCE_MS))
            self._arm_after(key, timer, ms / 1000)

    def heartbeat(self, c, version: int, b) -> dict:
        """A ConsumerGroupHeartbeat from connection ``c``: the response's fields."""
        refused = heartbeat_wire_error(b, self.cfg)
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
                                     version, not b.member_id)
        if rebalance_ms is not None:
            self.rebalance_ms[mid] = rebalance_ms
        if topics is not None or mid not in self.described:
            self.described[mid] = {"client_id": c.client_id, "client_host": c.host,
                                   "subscribed_topic_names": list(b.subscribed_topic_names or ()),
                                   "subscribed_topic_regex": regex_asked or None}
        r = self.step(Receive(c.conn, req))[0].response
        if r.error:
            return {"throttle_time": 0, "error_code": r.error, "error_message": r.error.name, "member_id": None,
                    "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
        interval = self.server.consumer_timeouts.heartbeat_interval_ms if r.member_epoch >= JOIN_EPOCH else 0
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "member_id": name,
                "member_epoch": r.member_epoch, "heartbeat_interval": interval,
                "assignment": None if r.assignment is None else {"topic_partitions": self.assignment(r.assignment)}}

    def commit_error(self, c, version: int, b) -> int:
        """The error of an OffsetCommit to this group (the model's K11, its version rule and the
        committed partitions' assignment epochs included)."""
        epoch = b.generation_id_or_member_epoch
        mid = self.member_id(b.member_id)
        partitions = mask_of_topics(self.cfg, ((t.name, [p.partition_index for p in t.partitions]) for t in b.topics))
        r = self.step(Receive(c.conn, OffsetCommit(mid, epoch, partitions,
                                                   self.instance_id(getattr(b, "group_instance_id", None)), version)))
        return r[0].response.error

    def list_entry(self) -> dict:
        """This group as ListGroups lists it."""
        return {"group_id": self.group_id, "protocol_type": "consumer", "group_type": "consumer",
                "group_state": GROUP_STATE_NAMES[group_state(self.group)]}

    def describe(self) -> dict:
        """ConsumerGroupDescribe's entry for this group (ConsumerGroup.asDescribedGroup)."""
        g = self.group
        members = []
        for m in g.members:
            seen = self.described.get(m.member_id, {})
            members.append({
                "member_id": self.name(m.member_id), "instance_id": self.instance_name(m.instance_id),
                "rack_id": None, "member_epoch": m.epoch, "client_id": seen.get("client_id", ""),
                "client_host": seen.get("client_host", ""),
                "subscribed_topic_names": seen.get("subscribed_topic_names", []),
                "subscribed_topic_regex": seen.get("subscribed_topic_regex"),
                "assignment": {"topic_partitions": self.assignment(m.assigned)},
                "target_assignment": {"topic_partitions": self.assignment(target_of(g, m.member_id))},
                "member_type": 1})  # a consumer protocol member (v1; -1 unknown, 0 classic)
        state = group_state(g)
        return {"error_code": 0, "error_message": None, "group_id": self.group_id,
                "group_state": GROUP_STATE_NAMES[state], "group_epoch": g.epoch, "assignment_epoch": g.target_epoch,
                "assignor_name": self.cfg.assignor, "members": members, "authorized_operations": -2147483648}

    def empty(self) -> bool:
        return group_state(self.group) == GroupState.EMPTY
