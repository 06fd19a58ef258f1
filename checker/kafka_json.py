"""Model values in a Kafka-level JSON vocabulary, both ways (spec/VECTORS.md).

What another implementation reads, instead of the model's small ints and bitmasks:

* member.id ``"A-1"``: client.id (the client slot's letter) + "-" + k, the k-th
  member id the coordinator handed out to that client (Kafka's is client.id + "-" +
  a UUID, GroupCoordinator.doNewMemberJoinGroup); ``""`` is the empty member id;
* group.instance.id ``"i-A"`` (KIP-345), ``null`` for a dynamic member;
* a connection ``"A/1"``: client A's 1st process (its TCP connection);
* partitions ``"t-0"`` (topic-partition), errors by their name in
  org.apache.kafka.common.protocol.Errors, group states by
  kafka.coordinator.group.GroupState's names, generations as ints.

Messages and inputs are objects ``{"type": "JoinGroup", <fields>}`` with the
fields of model/protocol.py (``conn`` spelled ``connection``); ``decode`` inverts
``encode`` exactly, so a case replays against the model bit for bit.
"""
from __future__ import annotations

from rebalance.model import protocol as P
from rebalance.model.consumer_group import messages as K
from rebalance.model.consumer_group.group import ConsumerGroup, ConsumerGroupMember, group_state
from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import Group, MemberMetadata
from rebalance.model.protocol import (
    GROUP_STATE_NAMES, NO_INSTANCE_ID, NO_MEMBER_ID, NOT_SCHEDULED, Assignment, Error, Subscription,
    connection, epoch_of, instance_id, instance_name, member_id, serial_of, slot_of,
)

from .render import lane, partitions, slot_named

PHASE_OF = {name: phase for phase, name in GROUP_STATE_NAMES.items()}
# every message, coordinator input and output a vector may carry, by type name
MESSAGES = {cls.__name__: cls for cls in (
    P.JoinGroup, P.SyncGroup, P.Heartbeat, P.LeaveGroup, P.OffsetCommit, P.JoinGroupResponse,
    P.SyncGroupResponse, P.HeartbeatResponse, P.LeaveGroupResponse, P.OffsetCommitResponse, P.Receive,
    P.SessionTimeout, P.RebalanceTimeout, P.SyncTimeout, P.InitialRebalanceDelay, P.PendingMemberTimeout,
    P.DeleteGroup, P.ForceRebalance, P.Reply, K.ConsumerGroupHeartbeat, K.ConsumerGroupHeartbeatResponse,
    K.MemberRebalanceTimeout, K.RegexResolved, K.TopicsChanged)}
RENAMED = {"conn": "connection"}
# message field -> (Codec's encoder, its inverse); other fields (generations, flags,
# the protocol name) are written as they are
FIELD_CODECS = {
    "member_id": ("member", "member_of"), "leader": ("member", "member_of"),
    "group_instance_id": ("instance", "instance_of"), "error": ("error", "error_of"),
    "conn": ("conn", "conn_of"), "request": ("encode", "decode"), "response": ("encode", "decode"),
    "subscription": ("subscription", "subscription_of"), "assignment": ("assignment", "assignment_of"),
    "assignments": ("assignments", "assignments_of"), "partitions": ("parts", "mask"),
    # KIP-848 (ConsumerGroupHeartbeat): a field not sent is null
    "instance_id": ("instance", "instance_of"), "owned": ("optional_parts", "optional_mask"),
    "topics": ("topic_names", "topics_of"),
}
# a field whose codec depends on the message: ConsumerGroupHeartbeatResponse's assignment is a partition list
CLASS_FIELD_CODECS = {(K.ConsumerGroupHeartbeatResponse, "assignment"): ("optional_parts", "optional_mask"),
                      (K.TopicsChanged, "topics"): ("topic_names", "topics_of")}


class Codec:
    """Encoder and decoder for one group configuration (its partition names)."""

    def __init__(self, cfg: GroupConfig):
        self.cfg = cfg
        self.index = {cfg.partition_name(p): p for p in range(cfg.num_partitions)}

    # -- identifiers ------------------------------------------------------------
    @staticmethod
    def member(mid: int) -> str:
        """``"A-1"``; ``""`` for the empty member id."""
        return "" if mid == NO_MEMBER_ID else f"{lane(slot_of(mid))}-{serial_of(mid)}"

    @staticmethod
    def member_of(name: str) -> int:
        if name == "":
            return NO_MEMBER_ID
        letter, _, k = name.partition("-")
        return member_id(slot_named(letter), int(k))

    @staticmethod
    def instance(iid: int):
        return None if iid == NO_INSTANCE_ID else instance_name(iid)

    @staticmethod
    def instance_of(name) -> int:
        return NO_INSTANCE_ID if name is None else instance_id(slot_named(name[2:]))

    @staticmethod
    def conn(conn: int) -> str:
        return f"{lane(slot_of(conn))}/{epoch_of(conn)}"

    @staticmethod
    def conn_of(name: str) -> int:
        letter, _, epoch = name.partition("/")
        return connection(slot_named(letter), int(epoch))

    def parts(self, mask: int) -> list:
        return partitions(self.cfg, mask)

    def mask(self, names) -> int:
        return P.mask_of(self.index[n] for n in names)

    def optional_parts(self, mask):
        return None if mask is None else self.parts(mask)

    def optional_mask(self, names):
        return None if names is None else self.mask(names)

    def topic_names(self, topics):
        """A topic bitmask as its names, ``"*"`` for every topic, null for none sent."""
        if topics is None or topics == P.ALL_TOPICS:
            return None if topics is None else "*"
        return [name for t, (name, _) in enumerate(self.cfg.topics) if topics >> t & 1]

    def topics_of(self, names):
        if names is None or names == "*":
            return None if names is None else P.ALL_TOPICS
        return P.mask_of(t for t, (name, _) in enumerate(self.cfg.topics) if name in names)

    # -- the consumer embedded protocol ---------------------------------------------
    def subscription(self, sub: Subscription) -> dict:
        """``{owned_partitions, generation}``; Design II adds ``echo`` (the last
        Assignment's group-level part, R31) and ``scheduled_ticks_left`` (R32)."""
        out = {"owned_partitions": self.parts(sub.owned), "generation": sub.generation}
        if sub.echo:
            g, assigned, deferred, revoked, successive = sub.echo
            out["echo"] = {"generation": g, "assigned": self.parts(assigned), "deferred": self.parts(deferred),
                           "revoked_for_balance": revoked, "revoking_rounds_in_a_row": successive}
        if sub.scheduled != NOT_SCHEDULED:
            out["scheduled_ticks_left"] = sub.scheduled
        if sub.streams:  # Streams user data (R46)
            learning, ready, standby, leaving = sub.streams
            out["streams"] = {"learning": self.parts(learning), "ready": self.parts(ready),
                              "standby": self.parts(standby), "leaving": leaving}
        return out

    def subscription_of(self, d: dict) -> Subscription:
        echo = d.get("echo")
        if echo:
            echo = (echo["generation"], self.mask(echo["assigned"]), self.mask(echo["deferred"]),
                    echo["revoked_for_balance"], echo["revoking_rounds_in_a_row"])
        st = d.get("streams")
        return Subscription(self.mask(d["owned_partitions"]), d["generation"], echo or (),
                            d.get("scheduled_ticks_left", NOT_SCHEDULED),
                            (self.mask(st["learning"]), self.mask(st["ready"]), self.mask(st["standby"]),
                             st["leaving"]) if st else ())

    def assignment(self, a: Assignment) -> dict:
        """``{partitions}``; Designs II and III add ``scheduled_rebalance_ticks``
        (the ScheduledRebalanceTimeout) and ``echo`` (R31, R40)."""
        out = {"partitions": self.parts(a.partitions)}
        if a.scheduled:
            out["scheduled_rebalance_ticks"] = a.scheduled
        if a.echo:
            assigned, deferred, revoked, successive = a.echo
            out["echo"] = {"assigned": self.parts(assigned), "deferred": self.parts(deferred),
                           "revoked_for_balance": revoked, "revoking_rounds_in_a_row": successive}
        if a.streams:  # Streams learner and standby tasks (R46)
            out["streams"] = {"learning": self.parts(a.streams[0]), "standby": self.parts(a.streams[1])}
        return out

    def assignment_of(self, d: dict) -> Assignment:
        echo = d.get("echo")
        if echo:
            echo = (self.mask(echo["assigned"]), self.mask(echo["deferred"]), echo["revoked_for_balance"],
                    echo["revoking_rounds_in_a_row"])
        st = d.get("streams")
        return Assignment(self.mask(d["partitions"]), d.get("scheduled_rebalance_ticks", 0), echo or (),
                          (self.mask(st["learning"]), self.mask(st["standby"])) if st else ())

    # -- messages and inputs ----------------------------------------------------------
    def encode(self, msg) -> dict:
        """A message, coordinator input or ``Reply`` as ``{"type", <fields>}``."""
        out = {"type": type(msg).__name__}
        for f, x in zip(msg._fields, msg):
            if f != "tag":
                out[RENAMED.get(f, f)] = self._field(type(msg), f, x)
        return out

    def decode(self, d: dict):
        """The inverse of ``encode``; KeyError for an unknown type or a missing field."""
        cls = MESSAGES[d["type"]]
        return cls(*(self._field(cls, f, d[RENAMED.get(f, f)], True) for f in cls._fields if f != "tag"))

    @staticmethod
    def error(e: Error) -> str:
        return e.name

    @staticmethod
    def error_of(name: str) -> Error:
        return Error[name]

    def assignments(self, x) -> list:
        return [{"member_id": self.member(m), "assignment": self.assignment(a)} for m, a in x]

    def assignments_of(self, x) -> tuple:
        return tuple((self.member_of(e["member_id"]), self.assignment_of(e["assignment"])) for e in x)

    def _field(self, cls, f: str, x, inverse: bool = False):
        """Field ``f`` of a ``cls`` message encoded (or, ``inverse``, decoded) by
        ``FIELD_CODECS``; ``members`` entries depend on the message type."""
        if f == "members":
            return (tuple(self._member_entry_of(cls, e) for e in x) if inverse
                    else [self._member_entry(cls, m) for m in x])
        names = CLASS_FIELD_CODECS.get((cls, f)) or FIELD_CODECS.get(f)
        return x if names is None else getattr(self, names[inverse])(x)

    def _member_entry(self, cls, m) -> dict:
        """An entry of JoinGroupResponse.members (with the member's Subscription as
        ``metadata``), LeaveGroup.members or LeaveGroupResponse.members (with an error)."""
        out = {"member_id": self.member(m[0]), "group_instance_id": self.instance(m[1])}
        if cls is P.JoinGroupResponse:
            out["metadata"] = self.subscription(m[2])
        elif cls is P.LeaveGroupResponse:
            out["error"] = m[2].name
        return out

    def _member_entry_of(self, cls, e: dict) -> tuple:
        head = (self.member_of(e["member_id"]), self.instance_of(e["group_instance_id"]))
        if cls is P.JoinGroupResponse:
            return head + (self.subscription_of(e["metadata"]),)
        if cls is P.LeaveGroupResponse:
            return head + (Error[e["error"]],)
        return head

    # -- the coordinator's group --------------------------------------------------------
    def consumer_group(self, g: ConsumerGroup) -> dict:
        """KIP-848: the group and target assignment epochs, the target assignment, the
        partition epochs (null: free), each member's record (with the ``server_assignor`` it
        named, if any: K16); under the online migration, a classic member's ``classic``
        ``{connection, subscription}`` (its last JoinGroup's) and the group's
        ``member_ids_issued`` to classic members, when there are any."""
        members = []
        for m in g.members:
            entry = {"member_id": self.member(m.member_id), "group_instance_id": self.instance(m.instance_id),
                     "member_epoch": m.epoch, "previous_member_epoch": m.previous_epoch, "state": m.state.name,
                     "assigned": self.parts(m.assigned), "pending_revocation": self.parts(m.revoking),
                     "subscribed_topics": self.topic_names(m.topics), "regex": m.regex, "resolved": m.resolved,
                     "assignment_epochs": {self.cfg.partition_name(p): e for p, e in m.assignment_epochs}}
            if m.classic:
                entry["classic"] = {"connection": self.conn(m.classic[0]), "subscription": self.subscription(m.classic[1])}
            if m.server_assignor is not None:
                entry["server_assignor"] = m.server_assignor
            members.append(entry)
        out = {
            "state": K.GROUP_STATE_NAMES[group_state(g)], "group_epoch": g.epoch, "target_epoch": g.target_epoch,
            "topics": self.topic_names(g.topics),
            "target_assignment": {self.member(m): self.parts(p) for m, p in g.target},
            "partition_epochs": {self.cfg.partition_name(p): (None if e == K.FREE else e)
                                 for p, e in enumerate(g.partition_epochs)},
            "members": members,
        }
        if g.issued:
            out["member_ids_issued"] = {lane(s): k for s, k in g.issued}
        return out

    def consumer_group_of(self, d: dict) -> ConsumerGroup:
        members = tuple(ConsumerGroupMember(
            self.member_of(m["member_id"]), self.instance_of(m["group_instance_id"]), m["member_epoch"],
            m["previous_member_epoch"], K.MemberState[m["state"]], self.mask(m["assigned"]),
            self.mask(m["pending_revocation"]), self.topics_of(m["subscribed_topics"]), m["regex"], m["resolved"],
            tuple(sorted((self.index[p], e) for p, e in m["assignment_epochs"].items())),
            (self.conn_of(m["classic"]["connection"]), self.subscription_of(m["classic"]["subscription"]))
            if "classic" in m else (), m.get("server_assignor"))
            for m in d["members"])
        epochs = tuple(K.FREE if d["partition_epochs"][self.cfg.partition_name(p)] is None
                       else d["partition_epochs"][self.cfg.partition_name(p)] for p in range(self.cfg.num_partitions))
        return ConsumerGroup(d["group_epoch"], d["target_epoch"], members,
                             tuple(sorted((self.member_of(m), self.mask(p)) for m, p in d["target_assignment"].items())),
                             epochs,
                             self.topics_of(d["topics"]),
                             tuple(sorted((slot_named(c), k) for c, k in d.get("member_ids_issued", {}).items())))

    def group(self, g: Group) -> dict:
        """The whole coordinator state (R1): what an implementation loads before a case."""
        if type(g) is ConsumerGroup:
            return self.consumer_group(g)
        return {
            "state": GROUP_STATE_NAMES[g.phase], "generation": g.generation, "leader": self.member(g.leader),
            "protocol": g.protocol, "first_joiner": self.member(g.first_joiner),
            "initial_rebalance_delay_pending": g.initial_delay,
            "new_member_added": g.new_member_added,
            "member_ids_issued": {lane(s): k for s, k in g.issued},
            "pending_member_ids": [self.member(m) for m in g.pending],
            "members": [{"member_id": self.member(m.member_id), "group_instance_id": self.instance(m.instance_id),
                         "connection": self.conn(m.conn), "subscription": self.subscription(m.subscription),
                         "assignment": self.assignment(m.assignment), "awaiting_join": m.awaiting_join,
                         "awaiting_sync": m.awaiting_sync, "pending_sync": m.pending_sync} for m in g.members],
        }

    def group_of(self, d: dict) -> Group:
        if "group_epoch" in d:
            return self.consumer_group_of(d)
        members = tuple(MemberMetadata(
            self.member_of(m["member_id"]), self.instance_of(m["group_instance_id"]), self.conn_of(m["connection"]),
            self.subscription_of(m["subscription"]), self.assignment_of(m["assignment"]), m["awaiting_join"],
            m["awaiting_sync"], m["pending_sync"]) for m in d["members"])
        return Group(PHASE_OF[d["state"]], d["generation"], self.member_of(d["leader"]), members,
                     self.member_of(d["first_joiner"]),
                     tuple(sorted((slot_named(c), k) for c, k in d["member_ids_issued"].items())),
                     d["initial_rebalance_delay_pending"], d["protocol"],
                     tuple(self.member_of(m) for m in d["pending_member_ids"]),
                     new_member_added=d["new_member_added"])

    def summary(self, g: Group) -> dict:
        """What a case expects of the group after a step: state, generation, leader,
        member ids (with group.instance.id) in the coordinator's order; KIP-848: state,
        epochs, each member's epoch, state and assigned partitions."""
        if type(g) is ConsumerGroup:
            return {"state": K.GROUP_STATE_NAMES[group_state(g)], "group_epoch": g.epoch,
                    "target_epoch": g.target_epoch,
                    "members": [{"member_id": self.member(m.member_id), "member_epoch": m.epoch,
                                 "state": m.state.name, "assigned": self.parts(m.assigned)} for m in g.members]}
        return {"state": GROUP_STATE_NAMES[g.phase], "generation": g.generation, "leader": self.member(g.leader),
                "members": [{"member_id": self.member(m.member_id), "group_instance_id": self.instance(m.instance_id)}
                            for m in g.members]}


def config(cfg: GroupConfig) -> dict:
    """A GroupConfig as JSON (topics as ``[{name, partitions}]``, times in ticks;
    ``connectors`` and ``connector_cost`` only with connectors, R66; ``migration`` only
    under KIP-848's online migration: the client slots that start classic)."""
    kinds = {"connectors": cfg.connectors, "connector_cost": cfg.connector_cost} if cfg.connectors else {}
    if cfg.migration:
        kinds["migration"] = cfg.migration
    return kinds | {"protocol": cfg.protocol, "assignor": cfg.assignor,
            "topics": [{"name": n, "partitions": c} for n, c in cfg.topics],
            "mutations": sorted(cfg.mutations), "initial_rebalance_delay": cfg.initial_rebalance_delay,
            "max_moves": cfg.max_moves, "scheduled_delay_ticks": cfg.scheduled_delay_ticks,
            "rejoin_ticks": cfg.rejoin_ticks, "revoking_backoff_ticks": list(cfg.revoking_backoff_ticks),
            "require_known_member_id": cfg.require_known_member_id}


def config_of(d: dict, mutations=frozenset()) -> GroupConfig:
    """The inverse of ``config``, with ``mutations`` switched on besides the case's."""
    return GroupConfig(topics=tuple((t["name"], t["partitions"]) for t in d["topics"]), protocol=d["protocol"],
                       assignor=d["assignor"], mutations=frozenset(d["mutations"]) | frozenset(mutations),
                       initial_rebalance_delay=d["initial_rebalance_delay"], max_moves=d["max_moves"],
                       scheduled_delay_ticks=d["scheduled_delay_ticks"], rejoin_ticks=d["rejoin_ticks"],
                       revoking_backoff_ticks=tuple(d["revoking_backoff_ticks"]),
                       require_known_member_id=d["require_known_member_id"],
                       connectors=d.get("connectors", 0), connector_cost=d.get("connector_cost", 2),
                       migration=d.get("migration", 0))

