"""The client's side of KIP-848: the membership manager's state machine and its
reconciliation, ``handle(cfg, member, input) -> (member', outputs)``.

Inputs: ``Start``, ``ConsumerGroupHeartbeatResponse``, ``HeartbeatDue`` (the heartbeat
interval, or at once when joining or acknowledging), ``Reconcile`` (the next stage of a
reconciliation on the application thread), ``Release`` (a fenced member's
onPartitionsLost completed), ``RequestTimeout`` (the heartbeat's response was lost),
``Subscribe``, ``CommitDue``, ``Leave`` and ``OffsetCommitResponse``. Outputs:
``Send(request)`` and ``Callback(kind, partitions)``.

Behaviour after the Java consumer 4.4 (org.apache.kafka.clients.consumer.internals:
AbstractMembershipManager.transitionToJoining, transitionToFenced, processAssignmentReceived,
maybeReconcile, revokeAndAssign, onHeartbeatRequestGenerated;
ConsumerMembershipManager.onHeartbeatSuccess; HeartbeatRequestManager's HeartbeatState,
which sends the subscription and the owned partitions only when they changed since the
last heartbeat, and every field when joining or after an error). Not modelled: the
poll timer (the member never goes STALE), PREPARE_LEAVING (a leave is sent at once),
topic ids that metadata cannot resolve yet.
"""
from __future__ import annotations

from typing import NamedTuple

from ..config import GroupConfig, rule
from ..protocol import (
    ALL_TOPICS, NO_INSTANCE_ID, NO_MEMBER_ID, Callback, CommitDue, Error, HeartbeatDue, Leave, OffsetCommit,
    OffsetCommitResponse, Send, Subscribe,
)
from .messages import (
    JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ClientState, ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse,
    Reconcile, Release, RequestTimeout, Start,
)

NONE = -1  # no assignment yet (LocalAssignment.NONE): not the empty one

IN_GROUP = (ClientState.RECONCILING, ClientState.ACKNOWLEDGING, ClientState.STABLE)
FENCING_ERRORS = (Error.FENCED_MEMBER_EPOCH, Error.UNKNOWN_MEMBER_ID)
# GROUP_ID_NOT_FOUND: fatal but while unsubscribed (AbstractHeartbeatRequestManager.onErrorResponse, Kafka 4.4.0)
FATAL_ERRORS = (Error.FENCED_INSTANCE_ID, Error.UNRELEASED_INSTANCE_ID, Error.INVALID_REQUEST, Error.GROUP_ID_NOT_FOUND)


class Membership(NamedTuple):
    """A client's membership. ``epoch``: its member epoch; ``owned``: the partitions it owns
    (SubscriptionState's assigned partitions); ``current``: its current assignment, the
    last one reconciled (``NONE`` before the first); ``target``: the last assignment the
    coordinator sent (``NONE``: none since it joined); ``reconciling``: the assignment a
    reconciliation in progress moves to, once it has revoked (``NONE``: none);
    ``topics``: its subscription (a topic bitmask), by regular expression if ``regex``;
    ``reconciled``: its current assignment is the last target's (the two LocalAssignments
    share their local epoch: a new target, even one equal to the current assignment, is
    reconciled and acknowledged); ``inflight``: a heartbeat is in flight; ``full``: the
    next heartbeat sends every field; ``unsent``: its current assignment changed since it
    last reported it; ``resubscribed``: its subscription changed since it last sent it;
    ``refused``: its last heartbeat was refused (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
    none of its has re-armed its session timeout at the coordinator since."""

    state: ClientState
    member_id: int
    instance_id: int
    epoch: int
    owned: int
    current: int
    target: int
    reconciling: int
    reconciled: bool
    topics: int
    regex: bool
    inflight: bool
    full: bool
    unsent: bool
    resubscribed: bool
    refused: bool = False

    @property
    def live(self) -> bool:
        """In the group (joining, or with an epoch): what speaks for its member at the coordinator."""
        return self.state != ClientState.FENCED and self.state != ClientState.FATAL


NEW_MEMBERSHIP = Membership(ClientState.UNSUBSCRIBED, NO_MEMBER_ID, NO_INSTANCE_ID, JOIN_EPOCH, 0, NONE, NONE, NONE,
                            True, ALL_TOPICS, False, False, False, False, False)


def processing(cfg: GroupConfig, c: Membership) -> int:
    """The partitions the member fetches and processes: those it owns, of the topics it
    subscribes to (KAFKA-19356: with an explicit subscription, an owned partition of a
    topic it dropped is not fetchable while the coordinator takes it back)."""
    if c.regex or c.topics == ALL_TOPICS:
        return c.owned
    return c.owned & cfg.partitions_of_topics(c.topics)


def may_commit(cfg: GroupConfig, c: Membership, partitions: int) -> bool:
    """K11, the member's side: whether the client may commit ``partitions`` (a bitmask) now,
    at its member epoch: only while in the group, and only partitions it processes."""
    return c.state in IN_GROUP and not partitions & ~processing(cfg, c)


def reported_ownership(c: Membership) -> int:
    """The owned partitions a heartbeat reports: the current assignment and every partition
    a reconciliation in progress or pending may still add. The coordinator takes a
    partition it revokes that is not reported as released (CurrentAssignmentBuilder.
    ownsRevokedPartitions) and may give it to another member at once, so a report must
    cover what the member can come to own without hearing from it again. The Java consumer
    reports its current assignment only (ConsumerHeartbeatRequestManager.HeartbeatState:
    ``membershipManager.currentAssignment()``; the mutation report-current-assignment,
    a finding of this model: docs/kip848.md)."""
    out = c.current if c.current != NONE else 0
    if c.target != NONE:
        out |= c.target
    if c.reconciling != NONE:
        out |= c.reconciling
    return out


def _heartbeat(cfg: GroupConfig, c: Membership, out: list) -> Membership:
    """K12: HeartbeatState.buildRequest: the subscription and the owned partitions only if they
    changed since last sent, or on a full request; ACKNOWLEDGING ends when it is sent."""
    owned = rule(cfg, reported_ownership)(c) if c.full or c.unsent else None
    topics = c.topics if c.full or c.resubscribed else None
    out.append(Send(ConsumerGroupHeartbeat(c.member_id, c.epoch, c.instance_id, topics, owned, c.regex)))
    state = c.state
    if state == ClientState.ACKNOWLEDGING:
        state = ClientState.STABLE if c.reconciled else ClientState.RECONCILING
    return c._replace(state=state, inflight=True, full=False, unsent=False, resubscribed=False)


def _join(cfg: GroupConfig, c: Membership, out: list) -> Membership:
    """transitionToJoining: a full heartbeat at epoch 0, sent at once."""
    c = c._replace(state=ClientState.JOINING, epoch=JOIN_EPOCH, current=NONE, target=NONE, reconciling=NONE,
                   reconciled=True, full=True)
    return _heartbeat(cfg, c, out)


def fenced_ownership(owned: int) -> int:
    """What a member told FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID owns while its
    onPartitionsLost callback runs: nothing (KAFKA-20321: the lost partitions are marked
    pending revocation, so their fetching stops, before the callback)."""
    return 0


def _fenced(cfg: GroupConfig, c: Membership, out: list) -> Membership:
    """K14: transitionToFenced: its assignment is lost (onPartitionsLost), its epoch reset; it
    rejoins once the callback completes (``Release``)."""
    kept = rule(cfg, fenced_ownership)(c.owned)
    if c.owned and not kept:
        out.append(Callback("lost", c.owned))
    return c._replace(state=ClientState.FENCED, epoch=JOIN_EPOCH, owned=kept, current=NONE, target=NONE,
                      reconciling=NONE, reconciled=True, refused=True)


def _response(cfg: GroupConfig, c: Membership, r: ConsumerGroupHeartbeatResponse, out: list) -> Membership:
    """ConsumerMembershipManager.onHeartbeatSuccess / the request manager's error handling."""
    c = c._replace(inflight=False)
    if c.state in (ClientState.FENCED, ClientState.FATAL, ClientState.UNSUBSCRIBED):
        return c  # isNotInGroup: the response is ignored
    if r.error in FENCING_ERRORS:
        return _fenced(cfg, c, out)
    if r.error in FATAL_ERRORS:
        if c.owned:
            out.append(Callback("lost", c.owned))
        return c._replace(state=ClientState.FATAL, owned=0, current=NONE, target=NONE, reconciling=NONE,
                          reconciled=True)
    if r.error != Error.NONE:
        return c._replace(full=True)  # retriable: the next heartbeat sends every field
    c = c._replace(epoch=r.member_epoch, refused=False)
    if r.assignment is None:
        return c
    c = rule(cfg, received_target)(c, r.assignment)
    if not c.reconciled:
        return c._replace(state=ClientState.RECONCILING)
    if c.state in (ClientState.RECONCILING, ClientState.JOINING):
        return c._replace(state=ClientState.STABLE)
    return c


def received_target(c: Membership, assignment: int) -> Membership:
    """processAssignmentReceived: an assignment other than the last target is a new target
    (LocalAssignment.updateWith bumps its local epoch), to reconcile and acknowledge even
    when it equals the current assignment (KAFKA-16185, KAFKA-16312)."""
    if assignment == c.target:
        return c
    return c._replace(target=assignment, reconciled=False)


def _reconcile(c: Membership, out: list) -> Membership:
    """K13: one stage of maybeReconcile / revokeAndAssign: first the commit and
    onPartitionsRevoked (owned - target), then onPartitionsAssigned; the new assignment is
    then current and the member acknowledges it. With nothing to revoke, one stage."""
    if c.reconciling == NONE:
        revoked = c.owned & ~c.target
        if revoked:
            out.append(Callback("revoked", revoked))
            return c._replace(owned=c.owned & ~revoked, reconciling=c.target)
        goal = c.target
    else:
        goal = c.reconciling
    added = goal & ~c.owned
    out.append(Callback("assigned", added))
    return c._replace(state=ClientState.ACKNOWLEDGING, owned=goal, current=goal, reconciling=NONE,
                      reconciled=goal == c.target, unsent=True)


def reconcilable(c: Membership) -> bool:
    """Whether a reconciliation stage can run: RECONCILING towards a target it has not
    reconciled, or halfway through one."""
    return c.state == ClientState.RECONCILING and (c.reconciling != NONE or not c.reconciled)


def handle(cfg: GroupConfig, c: Membership, event) -> tuple:
    """One client step: ``(membership', (Send | Callback, ...))``. Unknown inputs raise TypeError."""
    out: list = []
    kind = type(event)
    if kind is ConsumerGroupHeartbeatResponse:
        c = _response(cfg, c, event, out)
    elif kind is HeartbeatDue:
        if not c.inflight and (c.state in IN_GROUP or c.state == ClientState.JOINING):
            c = _heartbeat(cfg, c, out)
    elif kind is Reconcile:
        if reconcilable(c):
            c = _reconcile(c, out)
    elif kind is Release:
        if c.state == ClientState.FENCED:
            if c.owned:
                out.append(Callback("lost", c.owned))
            c = _join(cfg, c._replace(owned=0), out)
    elif kind is RequestTimeout:
        if c.inflight:  # K15: retried as a full heartbeat
            c = c._replace(inflight=False, full=True)
    elif kind is Start:
        if c.state == ClientState.UNSUBSCRIBED:
            c = _join(cfg, c._replace(member_id=event.member_id, instance_id=event.instance_id, topics=event.topics,
                                 regex=event.regex), out)
    elif kind is Subscribe:
        if event.topics != c.topics and c.state in IN_GROUP:
            c = c._replace(topics=event.topics, resubscribed=True)
    elif kind is CommitDue:
        # the application commits what it processes, at its member epoch (OffsetCommit v9+)
        mine = processing(cfg, c)
        if mine and may_commit(cfg, c, mine):
            out.append(Send(OffsetCommit(c.member_id, c.epoch, mine, c.instance_id)))
    elif kind is OffsetCommitResponse:
        pass  # a refused commit changes nothing here: the next heartbeat tells why
    elif kind is Leave:
        # close(): onPartitionsRevoked, then a heartbeat to leave (-2 for a static member: it keeps
        # its assignment for a restart within the session timeout)
        if c.owned:
            out.append(Callback("revoked", c.owned))
        if c.state in IN_GROUP or c.state == ClientState.JOINING:
            epoch = STATIC_LEAVE_EPOCH if c.instance_id != NO_INSTANCE_ID else LEAVE_EPOCH
            out.append(Send(ConsumerGroupHeartbeat(c.member_id, epoch, c.instance_id)))
        c = c._replace(state=ClientState.UNSUBSCRIBED, owned=0, current=NONE, target=NONE, reconciling=NONE,
                       reconciled=True)
    else:
        raise TypeError(f"consumer group member cannot handle input {event!r}")
    return c, tuple(out)
