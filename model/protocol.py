"""Messages, error codes and identifiers of the classic group membership protocol.

Every value here is an immutable tuple (``typing.NamedTuple``) or an ``IntEnum``
so that actor states built from them are canonical, hashable and picklable.

Identifiers are small ints, not Kafka's strings, so that states stay compact:

* a *client slot* is a process position 0..N-1 (Kafka's client.id);
* a *connection* is ``(slot << ID_BITS) | epoch``: the epoch counts the processes
  started on that slot, so replies addressed to a dead process's connection are
  recognisably stale (Kafka matches replies to requests per TCP connection);
* a *group.instance.id* (KIP-345 static membership) is ``slot + 1``: a static
  client keeps it across restarts; ``NO_INSTANCE_ID`` (0) for a dynamic member;
* a *member id* is ``(slot << ID_BITS) | k`` with k = 1, 2, ...: the k-th member.id the
  coordinator handed out to that client. Kafka's member.id is
  ``client.id + "-" + UUID`` (GroupCoordinator.doNewMemberJoinGroup); the
  per-client counter models the UUID's freshness. ``NO_MEMBER_ID`` (0) is the
  empty member.id a new member sends.

``ID_BITS`` (20) keeps every id below 2**30, a one-digit CPython int, for slots
below ``MAX_SLOTS`` (1024; impl/ maps Kafka's client.id strings onto slots).

Every message and input class ends with a ``tag`` field (a distinct int, for
requests and responses 2 x Kafka's ApiKey, + 1 for a response): tuples compare by
content, so without it ``HeartbeatResponse(NONE)`` would equal
``LeaveGroupResponse(NONE)``.

Partitions are bits of an int (bit i = the i-th partition of the group's topics,
in configuration order): sets of partitions are bitmasks.

Sources: Kafka's JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit request
and response schemas (clients/src/main/resources/common/message/*.json), error
codes from org.apache.kafka.common.protocol.Errors; seed 004 (classic protocol
notes) and seed 000, Design I (Subscription and Assignment of the embedded
protocol).
"""
from __future__ import annotations

from itertools import compress
from enum import IntEnum
from typing import NamedTuple

NO_MEMBER_ID = 0
NO_GENERATION = -1
NO_INSTANCE_ID = 0
NOT_SCHEDULED = -1  # no ScheduledRebalanceTimeout pending (a countdown in ticks otherwise)
ALL_TOPICS = -1  # a topic bitmask with every bit set: every topic of the group's configuration (R61)
ID_BITS = 20
_SERIAL = (1 << ID_BITS) - 1
MAX_SERIAL = _SERIAL  # the largest member id serial and connection epoch of a slot
MAX_SLOTS = 1 << (30 - ID_BITS)
# under KIP-848's online migration, a consumer-protocol client's member id is member_id(slot, KIP848_IDS | process
# epoch), apart from the ids the coordinator hands out to classic members (model/coordinator.py fresh_member_id)
KIP848_IDS = 1 << (ID_BITS - 1)


class Error(IntEnum):
    """Kafka error codes used by the group protocol (org.apache.kafka.common.protocol.Errors)."""

    NONE = 0
    COORDINATOR_NOT_AVAILABLE = 15
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    GROUP_ID_NOT_FOUND = 69  # KIP-848: a ConsumerGroupHeartbeat to a group that is no consumer group
    UNSUPPORTED_VERSION = 35  # an API version the coordinator refuses for this request
    INVALID_REQUEST = 42
    MEMBER_ID_REQUIRED = 79
    FENCED_INSTANCE_ID = 82
    FENCED_MEMBER_EPOCH = 110  # KIP-848: the member must abandon its partitions and rejoin at epoch 0
    UNRELEASED_INSTANCE_ID = 111  # KIP-848: the group.instance.id is held by a member that has not left
    UNSUPPORTED_ASSIGNOR = 112  # KIP-848: a ServerAssignor the coordinator does not have (checked before the model)
    STALE_MEMBER_EPOCH = 113  # KIP-848: an OffsetCommit with another epoch than the member's


class Phase(IntEnum):
    """Coordinator group states (kafka.coordinator.group.GroupState)."""

    EMPTY = 0
    PREPARING_REBALANCE = 1
    COMPLETING_REBALANCE = 2
    STABLE = 3
    DEAD = 4


# the group states as Kafka names them (DescribeGroups' group_state; ConsumerGroupState)
GROUP_STATE_NAMES = {Phase.EMPTY: "Empty", Phase.PREPARING_REBALANCE: "PreparingRebalance",
                     Phase.COMPLETING_REBALANCE: "CompletingRebalance", Phase.STABLE: "Stable", Phase.DEAD: "Dead"}


def slot_of(ident: int) -> int:
    """The client slot of a member id or a connection."""
    return ident >> ID_BITS


def serial_of(mid: int) -> int:
    """k of the k-th member id handed out to a client slot."""
    return mid & _SERIAL


def member_id(slot: int, k: int) -> int:
    """The k-th member id (k >= 1) handed out to client ``slot``."""
    return (slot << ID_BITS) | k


def connection(slot: int, epoch: int) -> int:
    """The connection of the ``epoch``-th process started on ``slot``."""
    return (slot << ID_BITS) | epoch


def instance_id(slot: int) -> int:
    """The group.instance.id of client ``slot`` when it is static (KIP-345)."""
    return slot + 1


def instance_name(iid: int) -> str:
    """Readable group.instance.id, e.g. ``i-A``; ``-`` for none."""
    return "-" if iid == NO_INSTANCE_ID else f"i-{chr(64 + iid)}"


def epoch_of(conn: int) -> int:
    """The process epoch of a connection."""
    return conn & _SERIAL


def member_name(mid: int) -> str:
    """Readable member id: client letter and counter, e.g. ``A1``; ``-`` for none. A
    consumer-protocol client's id under the online migration (``KIP848_IDS`` set) is the
    letter in lower case and its process epoch, e.g. ``c2``."""
    if mid == NO_MEMBER_ID:
        return "-"
    k = serial_of(mid)
    if k & KIP848_IDS:
        return f"{chr(97 + slot_of(mid))}{k & ~KIP848_IDS}"
    return f"{chr(65 + slot_of(mid))}{k}"


# bytes of bits, one per partition: b"0"/b"1" (int's base 2) <-> 0/1 (itertools.compress's selectors)
_TO_SELECTORS = bytes.maketrans(b"01", b"\x00\x01")
_TO_DIGITS = bytes.maketrans(b"\x00\x01", b"01")


def mask_of(partitions) -> int:
    """The bitmask of partition indices (any order, repeats allowed). Linear in the
    span of the indices: one byte per partition, read by ``int`` in base 2."""
    ps = list(partitions)
    if not ps:
        return 0
    low = min(ps)
    bits = bytearray(max(ps) - low + 1)
    for p in ps:
        bits[p - low] = 1
    bits.reverse()
    return int(bits.translate(_TO_DIGITS), 2) << low


def union(masks) -> int:
    """The bitwise OR of bitmasks (0 for none)."""
    out = 0
    for mask in masks:
        out |= mask
    return out


def partitions_of(mask: int) -> tuple[int, ...]:
    """The partition indices set in a bitmask, ascending. Linear in the bit length:
    the mask's base-2 digits select from the indices (``itertools.compress``)."""
    if not mask:
        return ()
    low = (mask & -mask).bit_length() - 1
    bits = format(mask >> low, "b").encode()[::-1].translate(_TO_SELECTORS)
    return tuple(compress(range(low, low + len(bits)), bits))


# --- the consumer embedded protocol (seed 000, Design I) ---------------------


class Subscription(NamedTuple):
    """What a member sends in JoinGroup: the partitions it owns (AssignedTopicPartitions,
    a bitmask) and the generation in which it was last assigned them (KIP-792's
    generationId; ``NO_GENERATION`` when it owns nothing).

    Deferred and incremental protocols (seed 000, Design II; Design III on it, R68)
    only: ``echo`` repeats the group-level
    part of the member's last Assignment with its generation, ``(generation,
    assigned, deferred, revoked, successive)``, so that any leader, a new one too,
    knows what was assigned and what is deferred (R31) and how many revoking
    rounds came in a row (R40); ``scheduled``: the member's
    ScheduledRebalanceTimeout when it joined, in ticks left (0: it has passed;
    ``NOT_SCHEDULED``: none), so that a new leader inherits the deadline (R32).

    Streams (seed 001) only: ``streams``, its user data ``(learning, ready,
    standby, leaving)`` (R46; model/streams.py).

    A member with its own assignor list (a rolling upgrade, R77): ``assignors``, the
    protocols it names in JoinGroup in its order of preference
    (partition.assignment.strategy), each with this same metadata, so the
    coordinator votes (R35) as it does over ``Protocols``; () for one implicit
    protocol, nothing to select.

    ``topics``: the topics it subscribes to, a bitmask of indices into the
    configuration's topics (ConsumerProtocolSubscription.topics; ``ALL_TOPICS``:
    every one, R61). ``released``: the partitions it revoked because it stopped
    subscribing to their topics, until it is assigned again, so that a Design II
    leader gives them out at once instead of deferring them as lost (seed 000,
    Design II case (a); R64)."""

    owned: int
    generation: int
    echo: tuple = ()
    scheduled: int = NOT_SCHEDULED
    streams: tuple = ()
    assignors: tuple = ()
    topics: int = ALL_TOPICS
    released: int = 0

    @property
    def protocol_type(self) -> str:
        """The checker's members speak the consumer embedded protocol."""
        return "consumer"

    @property
    def protocols(self) -> tuple:
        """``((name, metadata), ...)`` as ``Protocols`` has them: this subscription for
        each of ``assignors``."""
        return tuple((name, self) for name in self.assignors)

    def metadata(self, name: str) -> "Subscription":
        """The metadata for protocol ``name``: this subscription; KeyError if not named."""
        if name not in self.assignors:
            raise KeyError(name)
        return self


EMPTY_SUBSCRIPTION = Subscription(0, NO_GENERATION)


class Protocols(NamedTuple):
    """JoinGroup's protocol list in wire form, as impl/ sends it: the protocol type
    (``consumer``) and ``((name, metadata bytes), ...)`` in the member's order of
    preference (JoinGroupRequest.protocols). The coordinator keeps it as the member's
    subscription, opaque as in Kafka, and selects the group protocol from these
    lists (R35). The checker's members send one ``Subscription`` instead: a single
    implicit protocol, nothing to select."""

    protocol_type: str
    protocols: tuple

    def metadata(self, name: str) -> bytes:
        """The metadata this member sent for protocol ``name``; KeyError if none."""
        for n, data in self.protocols:
            if n == name:
                return data
        raise KeyError(name)


class Assignment(NamedTuple):
    """What the leader computes for one member: the assigned partitions (a bitmask).
    Revoked partitions are not sent: a member revokes owned − assigned
    (ConsumerCoordinator.onJoinComplete).

    Designs II and III (seed 000): ``scheduled``: the ScheduledRebalanceTimeout in
    ticks (0: none), the member rejoins when it passes (Kafka Connect's
    ConnectAssignment ``delay``, ms there); ``echo``: ``(assigned, deferred,
    revoked, successive)``, every partition assigned this round, the lost ones held
    back (R31), whether this round revoked for balance (1 or 0) and how many
    revoking rounds in a row were held back so far (R40), for the member to send
    back.

    Streams (seed 001): ``partitions`` are the active tasks and ``streams`` is
    ``(learning, standby)``, the learner and standby tasks (R46)."""

    partitions: int
    scheduled: int = 0
    echo: tuple = ()
    streams: tuple = ()
    rejoin: bool = False  # R74: "rejoin now", the leader's flag that a second round is owed (seed 000, Design I)
    user_data: bool = False  # the assignor's own user data rides along (librdkafka's cooperative-sticky), M1


EMPTY_ASSIGNMENT = Assignment(0)


# --- requests (member -> coordinator) -----------------------------------------


class JoinGroup(NamedTuple):
    """``subscription``: a ``Subscription`` (checker) or ``Protocols`` (wire form).
    ``require_known_member_id``: JoinGroup v4+ (KIP-394): a new dynamic member is
    first handed its member id with MEMBER_ID_REQUIRED (R36). ``supports_skip_assignment``:
    JoinGroup v9+ (KIP-814): a restarted static leader is told it leads, with
    skip_assignment, instead of being named a follower (R26)."""

    member_id: int
    subscription: tuple
    group_instance_id: int = NO_INSTANCE_ID
    require_known_member_id: bool = False
    supports_skip_assignment: bool = True
    tag: int = 22


class SyncGroup(NamedTuple):
    member_id: int
    generation: int
    assignments: tuple  # ((member_id, Assignment), ...) from the leader, () otherwise
    group_instance_id: int = NO_INSTANCE_ID
    tag: int = 28


class Heartbeat(NamedTuple):
    member_id: int
    generation: int
    group_instance_id: int = NO_INSTANCE_ID
    tag: int = 24


class LeaveGroup(NamedTuple):
    """Batch LeaveGroup (v3+): ``members`` is ((member_id, group_instance_id), ...).
    An admin removal names static members by instance id with NO_MEMBER_ID (KIP-345)."""

    members: tuple
    tag: int = 26


class OffsetCommit(NamedTuple):
    """``version``: the request's API version (a KIP-848 member commits with v9 or later, K11)."""

    member_id: int
    generation: int
    partitions: int
    group_instance_id: int = NO_INSTANCE_ID
    version: int = 9
    tag: int = 16


# --- responses (coordinator -> member) ----------------------------------------


class JoinGroupResponse(NamedTuple):
    """``members``: ((member_id, group_instance_id, metadata), ...) for the leader, ()
    otherwise; the metadata is each member's ``Subscription``, or with ``Protocols``
    its bytes for the selected ``protocol`` (R35; "" when there is nothing to
    select). ``skip_assignment``: a static leader rejoined a Stable group; it keeps
    the current assignment (JoinGroup v9, KIP-814)."""

    error: Error
    member_id: int
    generation: int
    leader: int
    members: tuple
    skip_assignment: bool = False
    protocol: str = ""
    tag: int = 23


class SyncGroupResponse(NamedTuple):
    error: Error
    assignment: Assignment
    tag: int = 29


class HeartbeatResponse(NamedTuple):
    error: Error
    tag: int = 25


class LeaveGroupResponse(NamedTuple):
    """``members``: per-member errors, ((member_id, group_instance_id, Error), ...)."""

    error: Error
    members: tuple = ()
    tag: int = 27


class OffsetCommitResponse(NamedTuple):
    error: Error
    tag: int = 17


# the response class of each request class (a connection waits for one of these)
RESPONSE_OF = {JoinGroup: JoinGroupResponse, SyncGroup: SyncGroupResponse, Heartbeat: HeartbeatResponse,
               LeaveGroup: LeaveGroupResponse, OffsetCommit: OffsetCommitResponse}


# --- coordinator inputs ---------------------------------------------------------


class Receive(NamedTuple):
    """A request arriving on a connection."""

    conn: int
    request: tuple
    tag: int = 101


class SessionTimeout(NamedTuple):
    """session.timeout.ms passed without a heartbeat from ``member_id``."""

    member_id: int
    tag: int = 102


class RebalanceTimeout(NamedTuple):
    """The JoinGroup barrier's deadline (the rebalance timeout) passed."""
    tag: int = 103


class SyncTimeout(NamedTuple):
    """Members that got a JoinGroup response did not send SyncGroup in time (KAFKA-12890)."""
    tag: int = 104


class InitialRebalanceDelay(NamedTuple):
    """group.initial.rebalance.delay.ms passed for a group that left Empty (KIP-134)."""

    tag: int = 106


class PendingMemberTimeout(NamedTuple):
    """A member id handed out with MEMBER_ID_REQUIRED was not used to rejoin within
    the session timeout (KIP-394, GroupCoordinator.removePendingMemberAndUpdateGroup)."""

    member_id: int
    tag: int = 107


class DeleteGroup(NamedTuple):
    """Admin deletion of the group (DeleteGroups API)."""
    tag: int = 105


class ForceRebalance(NamedTuple):
    """An operator forces a rebalance (R56; ``rebalance serve``'s fault injection,
    impl/faults.py): the coordinator prepares a rebalance as it does for a member whose
    metadata changed (GroupCoordinator.prepareRebalance). The checker does not
    generate it: a forced rebalance is a test's input, not a protocol event."""
    tag: int = 108


# --- member local commands --------------------------------------------------------


class Start(NamedTuple):
    """The process starts and joins the group, static if ``group_instance_id`` is set,
    with its own partition.assignment.strategy ``assignors`` (names, in order of
    preference; () for the group configuration's one assignor, R77), subscribed to
    ``topics`` (a topic bitmask, R61) and seeing ``metadata``, the topics that exist
    (a topic bitmask, R62)."""

    group_instance_id: int = NO_INSTANCE_ID
    topics: int = ALL_TOPICS
    metadata: int = ALL_TOPICS
    tag: int = 110
    assignors: tuple = ()


class Subscribe(NamedTuple):
    """The application calls KafkaConsumer.subscribe with another topic list:
    ``topics``, a topic bitmask (R63)."""

    topics: int
    tag: int = 118


class MetadataUpdate(NamedTuple):
    """A metadata refresh shows the topics that exist now: ``topics``, a topic
    bitmask (a topic was created, R62; ConsumerCoordinator.rejoinNeededOrPending).
    With deletable connectors it is a Connect worker reading its config topic: a
    connector deleted (R81; DistributedHerder's ConfigUpdateListener.onConnectorConfigRemove)."""

    topics: int
    tag: int = 119


class HeartbeatDue(NamedTuple):
    """heartbeat.interval.ms elapsed."""
    tag: int = 111


class ScheduledRebalanceDue(NamedTuple):
    """The member's ScheduledRebalanceTimeout is due (its countdown reached 0) and the
    member acts on it (seed 000, Design II)."""

    tag: int = 113


class Tick(NamedTuple):
    """One tick of the clock passed: a pending ScheduledRebalanceTimeout counts down
    (a configuration maps ms to ticks, GroupConfig)."""

    tag: int = 114


class CoordinatorLost(NamedTuple):
    """The coordinator failed over (R72): the member's connection broke, or its request
    was answered NOT_COORDINATOR, and whatever it had in flight is lost; it
    rediscovers the coordinator (AbstractCoordinator.markCoordinatorUnknown) and
    retries."""

    tag: int = 130


class LearnerReady(NamedTuple):
    """Streams (seed 001): the member finished restoring learner task ``task`` (an
    index): it is ready (R55)."""

    task: int
    tag: int = 116


class ScaleDown(NamedTuple):
    """Streams (seed 001): the scale-down tool tells the member it is leaving soon (R53)."""

    tag: int = 117


class Leave(NamedTuple):
    """The application closes the consumer (graceful shutdown). ``leave_group``: a static
    member leaves the group too (KIP-1092, Kafka 4.1+: KafkaConsumer.close with
    CloseOptions.GroupMembershipOperation.LEAVE_GROUP; R27); no effect on a dynamic one."""
    leave_group: bool = False
    tag: int = 112


class CommitDue(NamedTuple):
    """The application commits its position in the partitions it owns
    (KafkaConsumer.commitAsync; the checker's abstract commit)."""

    tag: int = 115


# --- outputs ----------------------------------------------------------------------


class Reply(NamedTuple):
    """Coordinator output: send ``response`` on connection ``conn``."""

    conn: int
    response: tuple


class Send(NamedTuple):
    """Member output: send ``request`` to the coordinator."""

    request: tuple


class Callback(NamedTuple):
    """Member output: invoke a ConsumerRebalanceListener method.
    ``kind`` is "revoked", "assigned" or "lost"; ``partitions`` a bitmask."""

    kind: str
    partitions: int
