"""A group member running the consumer embedded protocol: an immutable ``Consumer``
and the pure handler ``handle``.

``handle(cfg, consumer, input) -> (consumer', outputs)``; inputs are the local
commands ``Start``, ``HeartbeatDue``, ``CommitDue``, ``Leave`` and the coordinator's responses;
outputs are ``Send(request)`` and ``Callback(kind, partitions)``
(ConsumerRebalanceListener: revoked / assigned / lost). A member has at most one
request outstanding. Rule tags (R..) refer to spec/SPEC.md.

Behaviour after Kafka's AbstractCoordinator and ConsumerCoordinator
(onJoinPrepare, onJoinComplete, the Join/Sync/Heartbeat response handlers) and
seed 000, Design I (member process): eager members revoke everything before
rejoining; cooperative members keep what they own, revoke owned − assigned and
rejoin at once; partitions are lost, not revoked, when membership is lost.
"""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from . import high_availability, streams
from .assignors import assign, flag_rejoin
from .config import GroupConfig, rule
from .upgrade import cooperative_member, leader_config
from .protocol import (
    NO_GENERATION, NO_INSTANCE_ID, NO_MEMBER_ID, NOT_SCHEDULED, Callback, CommitDue, CoordinatorLost, Error, Heartbeat,
    HeartbeatDue, HeartbeatResponse, JoinGroup, JoinGroupResponse, LearnerReady, Leave, LeaveGroup, ScaleDown,
    LeaveGroupResponse, OffsetCommit, OffsetCommitResponse, ScheduledRebalanceDue, Send, Start, Subscription, SyncGroup, SyncGroupResponse, Tick,
    ALL_TOPICS, EMPTY_SUBSCRIPTION, MetadataUpdate, Subscribe, union,
)


# JoinGroup errors that end the member instead of a rejoin (R35, R42)
FATAL_JOIN_ERRORS = frozenset({Error.INCONSISTENT_GROUP_PROTOCOL, Error.INVALID_SESSION_TIMEOUT})


class MemberPhase(IntEnum):
    """Where the member is in the protocol (AbstractCoordinator.MemberState, refined)."""

    UNJOINED = 0
    JOINING = 1   # JoinGroup outstanding
    SYNCING = 2   # SyncGroup outstanding
    STABLE = 3
    LEFT = 4


class Consumer(NamedTuple):
    """Member state. ``owned``: bitmask of the partitions it owns (and processes);
    ``owned_generation``: the generation in which they were assigned;
    ``heartbeat_inflight``: a Heartbeat is outstanding. Designs II and III (seed
    000): ``scheduled``: its ScheduledRebalanceTimeout, ticks left (0: due;
    ``NOT_SCHEDULED``: none), a relative deadline that ``Tick`` counts down.
    Deferred and incremental protocols (Design II, R68): ``echo``: the group-level part of its last
    assignment; ``memory``: ``(previous, deferred)``, the bitmasks it assigned or
    held back, and held back, in the last round it led (only kept under the
    ``leader-forgets-delay`` and ``connect-leader-state`` mutations; model/assignors.py
    ``_deferral``). ``user_data``: the bitmask of its last assignment as the eager
    StickyAssignor's user data remembers it (only kept under the
    ``sticky-user-data-without-generation`` mutation, ``_remembered``).
    ``assignors``: its own partition.assignment.strategy (R77; () for the group
    configuration's assignor).

    Subscriptions (R61-R64): ``topics``, the topics it subscribes to, and
    ``metadata``, the topics it knows exist (topic bitmasks; ``ALL_TOPICS``:
    every one); ``snapshot``: as the leader, the topics some member subscribed to
    that did not exist when it assigned (ConsumerCoordinator's assignmentSnapshot,
    kept only when topics can be created); ``released``: the partitions it revoked
    on dropping their topics, until its next assignment (R64). ``reset``: it was
    answered UNKNOWN_MEMBER_ID once (only kept under ``commit-generation-after-reset``)."""

    phase: MemberPhase
    member_id: int
    group_instance_id: int
    generation: int
    leader: bool
    owned: int
    owned_generation: int
    heartbeat_inflight: bool
    scheduled: int = NOT_SCHEDULED
    echo: tuple = ()
    memory: tuple = (0, 0)
    user_data: int = 0
    streams: tuple = ()
    assignors: tuple = ()
    topics: int = ALL_TOPICS
    metadata: int = ALL_TOPICS
    snapshot: int = 0
    released: int = 0
    reset: bool = False


NEW_CONSUMER = Consumer(MemberPhase.UNJOINED, NO_MEMBER_ID, NO_INSTANCE_ID, NO_GENERATION, False, 0,
                        NO_GENERATION, False)


def _initial_memory(leader: bool, group_assigned: int) -> tuple:
    """A scenario's starting member remembers nothing of the round it led: the
    deferral travels in the assignment (R31). Replaced by ``connect-leader-state``."""
    return (0, 0)


def _memory_after_assigning(memory: tuple, assignments) -> tuple:
    """What the leader remembers once it has assigned (R31: nothing it needs; the
    deferral travels in the assignment). Replaced by ``leader-forgets-delay`` and
    ``connect-leader-state``."""
    return memory


def _memory_after_sync(c: Consumer, assignment) -> tuple:
    """What a member remembers once its SyncGroup succeeded (R31: nothing more).
    Replaced by ``connect-leader-state``."""
    return c.memory


def _on_unknown_member_id(c: Consumer, out: list) -> Consumer:
    """R15: UNKNOWN_MEMBER_ID: the membership is lost, and with it the partitions
    (ConsumerCoordinator.onJoinPrepare calls onPartitionsLost; KAFKA-12983's fix).
    Replaced by ``keep-owned-on-unknown-member-id``."""
    return _lose(c, out, reset_member_id=True)


def _commit_generation(c: Consumer) -> int:
    """R41: an OffsetCommit carries the member's current generation
    (ConsumerCoordinator.sendOffsetCommitRequest, generationIfStable). Replaced by
    ``commit-generation-after-reset`` (test-only)."""
    return c.generation


def _claim_after_rebalance_in_progress(c: Consumer) -> Consumer:
    """R17: after REBALANCE_IN_PROGRESS on SyncGroup the member claims what it owns
    with the generation it joined (KIP-792: the subscription carries the member's
    current generation). Replaced by ``keep-owned-on-rebalance-in-progress``."""
    return c._replace(owned_generation=c.generation) if c.owned else c


def _remembered(c: Consumer, assigned: int) -> int:
    """R13: a member claims what it owns and remembers nothing else of its
    assignment (the eager StickyAssignor's user data, since KIP-341, carries the
    generation, so a stale claim loses to a newer one; the model's eager members
    claim nothing after revoking, R14). Replaced by
    ``sticky-user-data-without-generation`` (KAFKA-7026)."""
    return c.user_data


def _owned_after_sync(owned: int, assigned: int) -> int:
    """R18: after SyncGroup a member owns exactly what it was assigned (it revoked
    owned − assigned). Replaced by ``keep-revoked`` (test-only)."""
    return assigned


def _owned_when_told_to_rejoin(owned: int, assigned: int) -> int:
    """R74: a member told to rejoin at once still revokes first (R18), so it owns
    what it was assigned. Replaced by ``rejoin-before-revoking`` (test-only)."""
    return assigned


def assigned_consumer(cfg: GroupConfig, mid: int, iid: int, generation: int, leader: bool, owned: int,
                      group_assigned: int) -> Consumer:
    """A Stable member of ``generation`` owning what it was assigned, the group
    having assigned ``group_assigned`` in all (a scenario's start)."""
    echo = (generation, group_assigned, 0, 0, 0) if cfg.deferred else ()
    memory = rule(cfg, _initial_memory)(leader, group_assigned)
    return Consumer(MemberPhase.STABLE, mid, iid, generation, leader, owned,
                    generation if owned else NO_GENERATION, False, echo=echo, memory=memory)


def subscription(c: Consumer) -> Subscription:
    """R13: the JoinGroup metadata: owned partitions with their generation
    (cooperative); eager members have revoked everything and claim nothing.
    Deferred protocol: the echo and the ScheduledRebalanceTimeout's ticks left (R31, R32)."""
    if c.streams:  # R46: the Streams user data rides along
        return Subscription(c.owned, c.owned_generation, streams=c.streams.user_data())
    if not (c.owned or c.echo or c.released or c.assignors) and c.topics == ALL_TOPICS:
        return EMPTY_SUBSCRIPTION
    return Subscription(c.owned, c.owned_generation, c.echo, c.scheduled if c.echo else NOT_SCHEDULED,
                        assignors=c.assignors, topics=c.topics, released=c.released)


def _rejoin(cfg: GroupConfig, c: Consumer, out: list) -> Consumer:
    """Send JoinGroup (R14: eager revokes everything first, onJoinPrepare; R77: eager
    or not by the member's own assignor list)."""
    if c.owned and not cooperative_member(cfg, c.assignors):
        out.append(Callback("revoked", c.owned))
        c = c._replace(owned=0, owned_generation=NO_GENERATION)
    out.append(Send(JoinGroup(c.member_id, rule(cfg, subscription)(c), c.group_instance_id,
                              cfg.require_known_member_id)))
    return c._replace(phase=MemberPhase.JOINING, leader=False, heartbeat_inflight=False)


def _lose(c: Consumer, out: list, reset_member_id: bool) -> Consumer:
    """R15: membership lost: owned partitions are lost, not revoked."""
    if c.owned:
        out.append(Callback("lost", c.owned))
    return c._replace(owned=0, owned_generation=NO_GENERATION, generation=NO_GENERATION,
                      member_id=NO_MEMBER_ID if reset_member_id else c.member_id)


def _on_membership_error(cfg: GroupConfig, c: Consumer, error: Error, out: list) -> Consumer:
    if error in FATAL_JOIN_ERRORS:
        # R35, R42: the application gets the error (AbstractCoordinator.JoinGroupResponseHandler raises it)
        c = _lose(c, out, reset_member_id=False)
        return c._replace(phase=MemberPhase.LEFT, heartbeat_inflight=False)
    if error == Error.FENCED_INSTANCE_ID:
        # R28: another process holds our group.instance.id: fatal (FencedInstanceIdException)
        c = _lose(c, out, reset_member_id=True)
        return c._replace(phase=MemberPhase.LEFT, heartbeat_inflight=False)
    if error == Error.UNKNOWN_MEMBER_ID:
        c = rule(cfg, _on_unknown_member_id)(c, out)
    elif error == Error.ILLEGAL_GENERATION:
        c = _lose(c, out, reset_member_id=False)
    return _rejoin(cfg, c, out)


def _join_response(cfg: GroupConfig, c: Consumer, r: JoinGroupResponse, out: list) -> Consumer:
    if c.phase != MemberPhase.JOINING:
        return c
    if r.error == Error.MEMBER_ID_REQUIRED:  # R36: rejoin at once under the id handed out
        return _rejoin(cfg, c._replace(member_id=r.member_id), out)
    if r.error != Error.NONE:
        return _on_membership_error(cfg, c, r.error, out)
    leader = r.leader == r.member_id
    # R16: the leader assigns, unless it rejoined a Stable group as a static member (R26)
    memory = c.memory if leader else (0, 0)
    if cfg.streams:  # R52: the Streams leader's memory lives while it leads, in its process only
        streams_assign = high_availability.assign if cfg.assignor == "high-availability" else streams.assign
        assignments, memory = (streams_assign(cfg, r.members, c.memory if type(c.memory) is streams.StreamsMemory
                                              else streams.NO_MEMORY)
                               if leader and not r.skip_assignment else ((), streams.NO_MEMORY))
        c = c._replace(memory=memory if leader else streams.NO_MEMORY)
    else:
        assigning = leader and not r.skip_assignment
        # R78: a member with its own assignor list assigns with the one the vote selected
        chosen = leader_config(cfg, r.protocol) if c.assignors else cfg
        assignments = flag_rejoin(cfg, r.members, assign(chosen, r.members, memory, c.metadata)) if assigning else ()
        c = c._replace(memory=rule(cfg, _memory_after_assigning)(c.memory, assignments))
        if cfg.created_topics:  # R62: the topics the leader waits for (ConsumerCoordinator.performAssignment)
            c = c._replace(snapshot=_awaited_topics(cfg, c, r.members) if assigning else 0)
    out.append(Send(SyncGroup(r.member_id, r.generation, assignments, c.group_instance_id)))
    return c._replace(phase=MemberPhase.SYNCING, member_id=r.member_id, generation=r.generation, leader=leader)


def _sync_response(cfg: GroupConfig, c: Consumer, r: SyncGroupResponse, out: list) -> Consumer:
    if c.phase != MemberPhase.SYNCING:
        return c
    if r.error == Error.REBALANCE_IN_PROGRESS:
        # R17: rejoin keeping what it owns
        return _rejoin(cfg, rule(cfg, _claim_after_rebalance_in_progress)(c), out)
    if r.error != Error.NONE:
        return _on_membership_error(cfg, c, r.error, out)
    assigned = r.assignment.partitions
    revoked = c.owned & ~assigned
    added = assigned & ~c.owned
    if revoked:
        out.append(Callback("revoked", revoked))
    out.append(Callback("assigned", added))
    assigned = rule(cfg, _owned_after_sync)(c.owned, assigned)
    if r.assignment.rejoin:
        assigned = rule(cfg, _owned_when_told_to_rejoin)(c.owned, assigned)
    c = c._replace(owned=assigned, owned_generation=c.generation if assigned else NO_GENERATION,
                   user_data=rule(cfg, _remembered)(c, assigned),
                   scheduled=r.assignment.scheduled or NOT_SCHEDULED, released=0,
                   echo=(c.generation,) + r.assignment.echo if r.assignment.echo else ())
    c = c._replace(memory=rule(cfg, _memory_after_sync)(c, r.assignment))
    if cfg.streams:
        c, newly_ready = _streams_assignment(cfg, c, r.assignment)
        if newly_ready and _wants_rejoin(cfg, c.streams) and not revoked:  # R55: a warm standby is ready at once
            return _rejoin(cfg, c, out)
    # R18: after revoking, rejoin at once (Design I); R62: a topic it waits for exists; R74: told to
    if rule(cfg, _rejoins_after_assignment)(revoked) or r.assignment.rejoin or c.metadata & c.snapshot:
        return _rejoin(cfg, c, out)
    return c._replace(phase=MemberPhase.STABLE)


def _rejoins_after_assignment(revoked: int) -> bool:
    """R18: a member rejoins at once after an assignment only if it revoked something
    (Design I; ConsumerCoordinator.onJoinComplete requests a rejoin when partitions
    were revoked). Replaced by ``rejoin-after-every-assignment`` (test-only)."""
    return bool(revoked)


def _awaited_topics(cfg: GroupConfig, c: Consumer, members) -> int:
    """R62: the topics (a bitmask) some member of ``members`` subscribes to that the
    leader's metadata does not show yet; when one appears the leader rejoins
    (ConsumerCoordinator.rejoinNeededOrPending: the assignmentSnapshot no longer
    matches the metadataSnapshot)."""
    return union(sub.topics for _, _, sub in members) & cfg.created_topics & ~c.metadata


def _subscribe(cfg: GroupConfig, c: Consumer, topics: int, out: list) -> Consumer:
    """R63: KafkaConsumer.subscribe with another topic list: the member revokes the
    partitions of the topics it no longer subscribes to (ConsumerCoordinator.onJoinPrepare,
    COOPERATIVE: only those) and rejoins with its new subscription, which the
    coordinator sees as changed metadata (R3). Under Design II it reports what it
    revoked as ``released`` (R64)."""
    revoked = c.owned & ~cfg.partitions_of_topics(topics) if cfg.cooperative else 0  # eager: all, in _rejoin
    if revoked:
        out.append(Callback("revoked", revoked))
    owned = c.owned & ~revoked
    c = c._replace(topics=topics, owned=owned, owned_generation=c.owned_generation if owned else NO_GENERATION,
                   released=c.released | revoked if cfg.deferred else 0)
    return _rejoin(cfg, c, out)


def _ready_learners(learning: int, ready: int, standby: int) -> int:
    """R55: of the tasks an assignment has the member learn, those ready at once: the
    ones it had restored already (``ready``) and the ones whose standby it ran.
    Replaced by ``ready-on-assignment`` (test-only)."""
    return learning & (ready | standby)


def _streams_assignment(cfg: GroupConfig, c: Consumer, a) -> tuple:
    """R46, R55: take the assignment's learner and standby tasks; a learner stays
    ready while it keeps learning, and one placed where the task's standby ran
    is ready at once (seed 001, Standby Task Utilization). ``(consumer', newly
    ready bitmask)``."""
    learning, standby = a.streams or (0, 0)
    st = c.streams
    ready = rule(cfg, _ready_learners)(learning, st.ready, st.standby)
    return c._replace(streams=st._replace(learning=learning, ready=ready, standby=standby)), ready & ~st.ready


def _wants_rejoin(cfg: GroupConfig, st) -> bool:
    """R55: a member with learners rejoins when the last of them is ready
    (conservative) or as each one is (eager). R60: under KIP-441's assignor it
    never does: the probing rebalance finds its warmups caught up."""
    return (bool(st.learning) and cfg.assignor != "high-availability"
            and (cfg.rejoin_mode == "eager" or st.ready == st.learning))


def counting(c: Consumer) -> bool:
    """Whether a tick changes the member: its ScheduledRebalanceTimeout (R32) or its
    scale-down timeout (R54) counts down."""
    return c.scheduled > 0 or bool(c.streams) and c.streams.countdown > 0


def _scale_down_timeout_ends() -> bool:
    """R54: the scale-down timeout ends a leaving member. Replaced by
    ``no-scale-down-timeout``."""
    return True


def shutting_down(cfg: GroupConfig, c: Consumer, idle: bool) -> bool:
    """R54: a leaving Streams member shuts itself down once an assignment leaves it no
    active task (Stable, ``idle``: nothing in flight) or its scale-down timeout passed.
    Replaced in part by ``no-scale-down-timeout`` (``_scale_down_timeout_ends``)."""
    st = c.streams
    timed_out = st and st.countdown == 0 and rule(cfg, _scale_down_timeout_ends)()
    return bool(st) and st.leaving and (timed_out or (
        idle and c.phase == MemberPhase.STABLE and not c.owned and not c.heartbeat_inflight))


def _heartbeat_response(cfg: GroupConfig, c: Consumer, r: HeartbeatResponse, out: list) -> Consumer:
    c = c._replace(heartbeat_inflight=False)
    if c.phase != MemberPhase.STABLE:
        return c
    if r.error == Error.NONE:  # R62: a topic the leader waits for appeared meanwhile
        return _rejoin(cfg, c, out) if c.metadata & c.snapshot else c
    # R19: a rebalance is discovered through Heartbeat
    return _on_membership_error(cfg, c, r.error, out)


def _coordinator_lost(cfg: GroupConfig, c: Consumer, out: list) -> Consumer:
    """R72: the coordinator failed over and the member's request in flight is lost. It
    rediscovers the coordinator and retries as the Java consumer does: a lost
    JoinGroup or SyncGroup is a JoinGroup again under its member id, keeping what it
    owns (AbstractCoordinator.SyncGroupResponseHandler and JoinGroupResponseHandler
    call markCoordinatorUnknown on NOT_COORDINATOR and fail the join future with a
    retriable error; joinGroupIfNeeded then sends JoinGroup again). The generation of
    the round that did not complete is forgotten: no JoinGroup carries it and the
    JoinGroup response replaces it, while the loaded group may be at an older one
    (R72). A lost Heartbeat is not retried: the next one goes to the new coordinator
    (HeartbeatResponseHandler only marks the coordinator unknown)."""
    if c.phase == MemberPhase.JOINING or c.phase == MemberPhase.SYNCING:
        return _rejoin(cfg, c._replace(generation=NO_GENERATION), out)
    return c._replace(heartbeat_inflight=False)


def handle(cfg: GroupConfig, c: Consumer, event) -> tuple:
    """One member step: ``(consumer', (Send | Callback, ...))``. Unknown inputs raise TypeError."""
    out: list = []
    kind = type(event)
    if kind is JoinGroupResponse:
        c = _join_response(cfg, c, event, out)
    elif kind is SyncGroupResponse:
        c = _sync_response(cfg, c, event, out)
    elif kind is HeartbeatResponse:
        c = _heartbeat_response(cfg, c, event, out)
    elif kind is CoordinatorLost:
        c = _coordinator_lost(cfg, c, out)
    elif kind is LeaveGroupResponse or kind is OffsetCommitResponse:
        # R41: a refused commit changes nothing here; the next heartbeat finds out why (R19)
        pass
    elif kind is CommitDue:
        # R41: commit what it owns, under its member id and generation (ConsumerCoordinator.commitOffsetsAsync)
        if c.phase == MemberPhase.STABLE and c.owned and not c.heartbeat_inflight:
            out.append(Send(OffsetCommit(c.member_id, rule(cfg, _commit_generation)(c), c.owned, c.group_instance_id)))
    elif kind is Start:
        if c.phase == MemberPhase.UNJOINED:
            c = c._replace(group_instance_id=event.group_instance_id, assignors=event.assignors,
                           topics=event.topics, metadata=event.metadata,
                           streams=streams.NEW_STREAMS if cfg.streams else ())
            c = _rejoin(cfg, c, out)
    elif kind is LearnerReady:
        # R55: a restore finished; the member rejoins when its rejoin mode says so, between rounds
        st = c.streams
        bit = 1 << event.task
        if st and st.learning & bit & ~st.ready:
            c = c._replace(streams=st._replace(ready=st.ready | bit))
            if _wants_rejoin(cfg, c.streams) and c.phase == MemberPhase.STABLE and not c.heartbeat_inflight:
                c = _rejoin(cfg, c, out)
    elif kind is ScaleDown:
        # R53, R54: the scale-down tool: leaving soon, the scale-down timeout starts, rejoin to say so
        st = c.streams
        if st and not st.leaving and c.phase == MemberPhase.STABLE and not c.heartbeat_inflight:
            c = _rejoin(cfg, c._replace(streams=st._replace(leaving=True, countdown=cfg.scale_down_ticks)), out)
    elif kind is Subscribe:
        # R63: a new topic list, between rounds
        if event.topics != c.topics and c.phase == MemberPhase.STABLE and not c.heartbeat_inflight:
            c = _subscribe(cfg, c, event.topics, out)
    elif kind is MetadataUpdate:
        # R62: a metadata refresh; the leader rejoins if a topic it waits for appeared (else once Stable again).
        # R81: Connect's config topic shows a connector deleted: every worker rejoins
        deleted = cfg.deleted(event.topics) & ~cfg.deleted(c.metadata) if cfg.deletable_connectors else 0
        c = c._replace(metadata=event.topics)
        if (c.metadata & c.snapshot or deleted) and c.phase == MemberPhase.STABLE and not c.heartbeat_inflight:
            c = _rejoin(cfg, c, out)
    elif kind is HeartbeatDue:
        if c.phase == MemberPhase.STABLE and not c.heartbeat_inflight:
            out.append(Send(Heartbeat(c.member_id, c.generation, c.group_instance_id)))
            c = c._replace(heartbeat_inflight=True)
    elif kind is Tick:
        if c.scheduled > 0:  # R32: the deadline is relative: ticks left
            c = c._replace(scheduled=c.scheduled - 1)
        if c.streams and c.streams.countdown > 0:  # R54: so is the scale-down timeout
            c = c._replace(streams=c.streams._replace(countdown=c.streams.countdown - 1))
    elif kind is ScheduledRebalanceDue:
        # R32: the ScheduledRebalanceTimeout passed: rejoin, its subscription saying so (0 ticks left)
        if c.scheduled == 0 and c.phase == MemberPhase.STABLE and not c.heartbeat_inflight:
            c = _rejoin(cfg, c, out)
    elif kind is Leave:
        # R20: graceful shutdown revokes and sends LeaveGroup (onLeavePrepare); R27: a static
        # member sends none (KIP-345), it stays until its session times out, unless the
        # application asks it to leave (KIP-1092): its LeaveGroup then names only its member.id
        # (AbstractCoordinator.maybeLeaveGroup, AbstractCoordinator.java:1176, Kafka 4.4.0)
        if c.owned:
            out.append(Callback("revoked", c.owned))
        if c.member_id != NO_MEMBER_ID and (not c.group_instance_id or event.leave_group):
            out.append(Send(LeaveGroup(((c.member_id, NO_INSTANCE_ID),))))
        c = c._replace(phase=MemberPhase.LEFT, owned=0, owned_generation=NO_GENERATION)
    else:
        raise TypeError(f"member cannot handle input {event!r}")
    return c, tuple(out)
