"""KIP-848's messages, states and inputs: the consumer group protocol.

Identifiers are the classic model's (model/protocol.py): a member id is
``member_id(slot, k)``, but here the client generates it (KIP-1082,
ConsumerGroupHeartbeat v1): ``k`` is the epoch of the process that generated it,
so a new process of a slot has a fresh member id and a rejoin of the same
process keeps its own (AbstractMembershipManager.memberId: "unique within the
group and ... consistent for the entire lifetime of the process").
Partitions and topics are bitmasks as in the classic model.

Epochs are ints: the group epoch, the target assignment epoch, each member's
epoch and previous epoch, and each partition's epoch (the epoch of the member
that holds it). 0, -1 and -2 are the request's sentinels (``JOIN_EPOCH``,
``LEAVE_EPOCH``, ``STATIC_LEAVE_EPOCH``; ConsumerGroupHeartbeatRequest's
JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH,
LEAVE_GROUP_STATIC_MEMBER_EPOCH); a partition nobody holds has epoch ``FREE``
(ConsumerGroup.currentPartitionEpoch's -1).

Sources: ConsumerGroupHeartbeatRequest.json and ConsumerGroupHeartbeatResponse.json
(versions 0-1), org.apache.kafka.coordinator.group.modern.MemberState,
ConsumerGroup.ConsumerGroupState, org.apache.kafka.clients.consumer.internals.MemberState.
Tags: 2 x ApiKey for requests (ConsumerGroupHeartbeat is 68), + 1 for responses;
inputs from 140 up.
"""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from ..protocol import ALL_TOPICS, NO_INSTANCE_ID, Error

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
FREE = -1  # a partition's epoch when no member holds it


class MemberState(IntEnum):
    """A member's reconciliation state at the coordinator (modern.MemberState)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # it must revoke partitions before it moves on
    UNRELEASED_PARTITIONS = 2  # it waits for partitions other members still hold


class GroupState(IntEnum):
    """The group's state, derived from the rest (ConsumerGroup.maybeUpdateGroupState)."""

    EMPTY = 0
    ASSIGNING = 1  # the group epoch is ahead of the target assignment epoch
    RECONCILING = 2  # some member is not reconciled to the target yet
    STABLE = 3


GROUP_STATE_NAMES = {GroupState.EMPTY: "Empty", GroupState.ASSIGNING: "Assigning",
                     GroupState.RECONCILING: "Reconciling", GroupState.STABLE: "Stable"}


class ClientState(IntEnum):
    """The client's membership state (clients.consumer.internals.MemberState; PREPARE_LEAVING
    and STALE are not modelled: a leave is sent at once, and the poll timer never expires)."""

    UNSUBSCRIBED = 0
    JOINING = 1
    RECONCILING = 2
    ACKNOWLEDGING = 3
    STABLE = 4
    FENCED = 5
    LEAVING = 6
    FATAL = 7


# --- requests and responses ------------------------------------------------------


class ConsumerGroupHeartbeat(NamedTuple):
    """ConsumerGroupHeartbeatRequest: ``member_epoch`` 0 joins, -1 leaves, -2 leaves for now
    (a static member). ``topics``: SubscribedTopicNames (or, with ``regex``, the topics its
    SubscribedTopicRegex will match once the coordinator resolves it), a topic bitmask,
    None when unchanged; ``owned``: TopicPartitions, the partitions of the member's
    current assignment, None when unchanged. A full request (a join, or a retry after an
    error) carries both. ``version``: the request's API version (0-1; the checker's clients
    speak 1); ``unnamed``: its MemberId was empty, ``member_id`` then being the id the
    coordinator gives the member if it accepts the request (GroupMetadataManager.
    consumerGroupHeartbeat names it with a random UUID, GroupMetadataManager.java:1047,
    Kafka 4.4.0). ``server_assignor``: ServerAssignor, the server assignor the member prefers
    (one of model/config.py ``SERVER_ASSIGNORS``; a name the coordinator has not is refused
    before the model, impl/consumer_group.py ``heartbeat_wire_error``), None when not sent
    (the member's preference unchanged; K16)."""

    member_id: int
    member_epoch: int
    instance_id: int = NO_INSTANCE_ID
    topics: int | None = None
    owned: int | None = None
    regex: bool = False
    version: int = 1
    unnamed: bool = False
    server_assignor: str | None = None
    tag: int = 136


class ConsumerGroupHeartbeatResponse(NamedTuple):
    """ConsumerGroupHeartbeatResponse: ``assignment`` (a bitmask) or None when not sent
    (the coordinator sends it on a full request or when the member's assigned
    partitions changed)."""

    error: Error
    member_id: int
    member_epoch: int
    assignment: int | None = None
    tag: int = 137


# --- coordinator inputs -----------------------------------------------------------


class MemberRebalanceTimeout(NamedTuple):
    """The rebalance timeout of a member in UNREVOKED_PARTITIONS passed
    (GroupMetadataManager.scheduleConsumerGroupRebalanceTimeout)."""

    member_id: int
    tag: int = 140


class RegexResolved(NamedTuple):
    """The coordinator's asynchronous resolution of its members' regular expressions
    completed (GroupMetadataManager.handleRegularExpressionsResult)."""

    tag: int = 141


class TopicsChanged(NamedTuple):
    """The metadata image shows ``topics`` (a topic bitmask) as existing: a topic was
    created (GroupMetadataManager.onNewMetadataImage)."""

    topics: int
    tag: int = 142


# --- client inputs ----------------------------------------------------------------


class Start(NamedTuple):
    """The application subscribes: the process starts its membership with its own member
    id (generated at startup, KIP-1082), static if ``instance_id`` is set, subscribed to
    ``topics`` (by regex if ``regex``)."""

    member_id: int
    instance_id: int = NO_INSTANCE_ID
    topics: int = ALL_TOPICS
    regex: bool = False
    tag: int = 143


class Reconcile(NamedTuple):
    """The application thread runs the next stage of a reconciliation: commit and
    onPartitionsRevoked, then onPartitionsAssigned (AbstractMembershipManager.maybeReconcile,
    revokeAndAssign)."""

    tag: int = 144


class Release(NamedTuple):
    """A fenced member's onPartitionsLost callback completed: it rejoins
    (AbstractMembershipManager.transitionToFenced)."""

    tag: int = 145


class RequestTimeout(NamedTuple):
    """The heartbeat in flight got no response (its response was lost): the client
    retries with a full request (HeartbeatRequestManager: a retriable error resets the
    sent fields)."""

    tag: int = 146
