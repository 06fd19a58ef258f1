"""The group coordinator: an immutable ``Group`` and the pure handler ``handle``.

``handle(cfg, group, input) -> (group', outputs)``; inputs are ``Receive(conn,
request)`` and the timer firings ``SessionTimeout``, ``RebalanceTimeout``,
``SyncTimeout``, ``InitialRebalanceDelay``, ``PendingMemberTimeout``, plus the admin
``DeleteGroup``; outputs are ``Reply(conn, response)``. Rule tags (R..) refer to spec/SPEC.md.

Behaviour after Kafka's classic coordinator (kafka.coordinator.group.GroupCoordinator:
handleJoinGroup, handleSyncGroup, handleHeartbeat, handleLeaveGroup,
handleCommitOffsets, onCompleteJoin, onExpireHeartbeat, onExpirePendingSync) and
seed 004 (JoinGroup barrier, leader election, SyncGroup, Heartbeat).
"""
from __future__ import annotations

from typing import NamedTuple

from .config import GroupConfig, rule
from .protocol import (
    EMPTY_ASSIGNMENT, EMPTY_SUBSCRIPTION, MAX_SERIAL, NO_GENERATION, NO_MEMBER_ID, Assignment, DeleteGroup, Error,
    ForceRebalance,
    Heartbeat, HeartbeatResponse, InitialRebalanceDelay, JoinGroup, JoinGroupResponse, LeaveGroup,
    LeaveGroupResponse, OffsetCommit, OffsetCommitResponse, PendingMemberTimeout, Phase, Protocols,
    RebalanceTimeout, Receive, Reply, SessionTimeout, Subscription, SyncGroup, SyncGroupResponse,
    SyncTimeout, member_id, serial_of, slot_of,
)


class MemberMetadata(NamedTuple):
    """The coordinator's record of one member (kafka.coordinator.group.MemberMetadata).

    ``instance_id``: its group.instance.id (static members, KIP-345; 0 if dynamic);
    the members' instance ids are the coordinator's static map.
    ``conn``: the connection of its latest request (where deferred replies go).
    ``awaiting_join``: its JoinGroup is held at the barrier. ``awaiting_sync``: its
    SyncGroup is held until the leader's assignment. ``pending_sync``: it got a
    JoinGroup response and has not sent SyncGroup yet (KAFKA-12890).
    """

    member_id: int
    instance_id: int
    conn: int
    subscription: Subscription
    assignment: Assignment
    awaiting_join: bool
    awaiting_sync: bool
    pending_sync: bool


class Group(NamedTuple):
    """Coordinator state (R1). ``members`` is ordered by member id; ``leader`` and
    ``first_joiner`` are member ids (0 = none); ``issued`` is
    ((client slot, number of member ids handed out), ...), the fresh-id generator;
    ``initial_delay``: the barrier waits for group.initial.rebalance.delay.ms (R30);
    ``new_member_added``: a new member joined since the initial delay last passed, so
    it runs once more (R30; ClassicGroup.newMemberAdded);
    ``protocol``: the group protocol selected for this generation (R35; "" when the
    members send no ``Protocols``); ``pending``: member ids handed out with
    MEMBER_ID_REQUIRED, not yet used to join (R36); ``record``: the last group
    ``stored`` (R37) as a failover would load it, kept by the checker only when it
    explores failovers (model/failover.py, R72), else None; ``clock``: the armed
    timers' deadlines, kept by the checker's timed mode only (checker/timed.py),
    else None. No handler reads either."""

    phase: Phase
    generation: int
    leader: int
    members: tuple
    first_joiner: int
    issued: tuple
    initial_delay: bool = False
    protocol: str = ""
    pending: tuple = ()
    record: object = None
    new_member_added: bool = False
    clock: object = None


EMPTY_GROUP = Group(Phase.EMPTY, 0, NO_MEMBER_ID, (), NO_MEMBER_ID, ())


def find(group: Group, mid: int):
    """The member's metadata, or None if ``mid`` is not a member."""
    for m in group.members:
        if m.member_id == mid:
            return m
    return None


def find_instance(group: Group, iid: int):
    """The member holding group.instance.id ``iid``, or None."""
    for m in group.members:
        if m.instance_id == iid:
            return m
    return None


def member_error(group: Group, mid: int, iid: int) -> Error:
    """Who may speak for a member (R24, GroupCoordinator.validateCurrentMember):
    with an instance id, FENCED_INSTANCE_ID if it belongs to another member id and
    UNKNOWN_MEMBER_ID if nobody holds it; without, UNKNOWN_MEMBER_ID if ``mid`` is
    not a member; else NONE."""
    if iid:
        holder = find_instance(group, iid)
        if holder is None:
            return Error.UNKNOWN_MEMBER_ID
        return Error.NONE if holder.member_id == mid else Error.FENCED_INSTANCE_ID
    return Error.NONE if find(group, mid) is not None else Error.UNKNOWN_MEMBER_ID


def _commit_fencing(group: Group, mid: int, generation: int, iid: int) -> bool:
    """R9: the member is known, its generation is current, and the group is not in
    CompletingRebalance (GroupCoordinator.handleCommitOffsets); its group.instance.id
    ``iid`` is checked before (R24). Replaced by ``no-commit-fencing``,
    ``refuse-static-commits`` and ``refuse-commits-while-preparing``."""
    return (group.phase in (Phase.STABLE, Phase.PREPARING_REBALANCE)
            and generation == group.generation and find(group, mid) is not None)


def commit_allowed(cfg: GroupConfig, group: Group, mid: int, generation: int, iid: int = 0) -> bool:
    """Whether an OffsetCommit from (member id, generation, group.instance.id) is
    accepted (R9, ``_commit_fencing`` or its mutation's replacement)."""
    return rule(cfg, _commit_fencing)(group, mid, generation, iid)


def voting(sub) -> bool:
    """Whether a JoinGroup's subscription takes part in the protocol vote (R35): impl's
    ``Protocols``, or a checker ``Subscription`` naming its member's assignors (R77)."""
    return type(sub) is Protocols or bool(sub.assignors)


def _protocol_names(sub) -> set:
    return {name for name, _ in sub.protocols}


def supported(group: Group, sub, mid: int) -> bool:
    """Whether member ``mid`` may join with subscription ``sub`` (R35,
    GroupMetadata.isProtocolTypeAndProtocolsSupported): with ``Protocols``, it names
    a protocol type and at least one protocol, the type matches the other members'
    and some protocol it lists is supported by every other member. Always True for
    the checker's ``Subscription`` unless it names its ``assignors`` (R77)."""
    if not voting(sub):
        return True
    others = [m.subscription for m in group.members if m.member_id != mid]
    if not sub.protocol_type or any(o.protocol_type != sub.protocol_type for o in others):
        return False
    return bool(_protocol_names(sub).intersection(*map(_protocol_names, others)))


def select_protocol(members) -> str:
    """The group protocol for a new generation (R35, GroupMetadata.selectProtocol):
    among the protocols every member supports, each member votes for the first in
    its order of preference; the most votes win, a tie goes to the protocol the
    earliest member (lowest member id) prefers (Kafka leaves ties to hash order).
    "" when the members send no ``Protocols`` (nor assignor lists, R77) or share no protocol."""
    if not members or not voting(members[0].subscription):
        return ""
    subs = [m.subscription for m in members]
    candidates = _protocol_names(subs[0]).intersection(*map(_protocol_names, subs[1:]))
    votes: dict = {}
    for s in subs:
        vote = next((name for name, _ in s.protocols if name in candidates), None)
        if vote is not None:
            votes[vote] = votes.get(vote, 0) + 1
    order = [name for name, _ in subs[0].protocols if name in votes]
    return max(order, key=votes.__getitem__, default="")


def session_refreshed(cfg: GroupConfig, request) -> int:
    """The member whose session timer ``request`` restarts, or NO_MEMBER_ID (R11,
    ``_session_refreshed`` or its mutation's replacement): impl/ restarts the
    timer, and so do the simulator, conform and the checker's timed mode; the
    untimed exploration needs no such rule (R21)."""
    return rule(cfg, _session_refreshed)(request)


def _session_refreshed(request) -> int:
    """R11: JoinGroup, SyncGroup, Heartbeat and OffsetCommit name their member, whose
    session restarts (GroupCoordinator.completeAndScheduleNextHeartbeatExpiration).
    Replaced by ``heartbeat-keeps-no-session`` (test-only)."""
    rk = type(request)
    if rk is JoinGroup or rk is SyncGroup or rk is Heartbeat or rk is OffsetCommit:
        return request.member_id
    return NO_MEMBER_ID


def stored(group: Group):
    """What the coordinator persists after a step (R37), or None to keep the last
    record: a Stable or Empty group with what it owes nobody dropped (pending
    SyncGroups, pending member ids). Kafka writes the group to
    __consumer_offsets when the leader's assignment arrives and when it empties
    (GroupMetadataManager.storeGroup), and a loaded group is Stable or Empty
    (GroupMetadataManager.loadGroup): a restarted coordinator resumes from it and
    every member's session timer starts anew. A group that never formed (Empty at
    generation 0: it has only handed out member ids with MEMBER_ID_REQUIRED, R36)
    is not stored: Kafka writes no metadata record for a group at generation 0
    (GroupMetadataManager.cleanupGroupMetadata writes it no tombstone either), so a
    new group id costs no write."""
    if group.phase != Phase.STABLE and (group.phase != Phase.EMPTY or not group.generation):
        return None
    # Stable and Empty hold no JoinGroup or SyncGroup and no initial delay: what remains is
    # owed SyncGroups and pending member ids
    return group._replace(members=tuple(m._replace(pending_sync=False) for m in group.members), pending=())


def armed_timers(group: Group) -> list:
    """The coordinator's timers that could fire now, with the members whose silence
    they wait for: ``[(timer input, (member_id, ...)), ...]``. A session timeout
    waits for its member unless it is held at a barrier (R11); the rebalance
    timeout for the members that have not rejoined (R4); the pending-sync timeout
    for those that have not synced (R12); the initial delay for nobody (R30); a
    pending member id's timeout for nobody (R36)."""
    out = [(SessionTimeout(m.member_id), (m.member_id,)) for m in group.members
           if not (m.awaiting_join or m.awaiting_sync)]
    if group.pending:
        out.extend((PendingMemberTimeout(mid), ()) for mid in group.pending)
    if group.phase == Phase.PREPARING_REBALANCE:
        waiting = tuple(m.member_id for m in group.members if not m.awaiting_join)
        if waiting:
            out.append((RebalanceTimeout(), waiting))
        if group.initial_delay:
            out.append((InitialRebalanceDelay(), ()))
    elif group.phase in (Phase.COMPLETING_REBALANCE, Phase.STABLE):
        waiting = tuple(m.member_id for m in group.members if m.pending_sync)
        if waiting:
            out.append((SyncTimeout(), waiting))
    return out


def formed_group(members, generation: int, leader: int) -> Group:
    """A Stable group at ``generation`` whose members ((member_id, instance_id, conn,
    owned bitmask), ...) own what they were assigned: a scenario's starting point."""
    metas = tuple(sorted(
        MemberMetadata(mid, iid, conn, Subscription(owned, generation) if owned else EMPTY_SUBSCRIPTION,
                       Assignment(owned), False, False, False) for mid, iid, conn, owned in members))
    issued = tuple(sorted((slot_of(mid), serial_of(mid)) for mid, _, _, _ in members))
    return Group(Phase.STABLE, generation, leader, metas, NO_MEMBER_ID, issued)


def _replace(group: Group, m: MemberMetadata) -> tuple:
    return tuple(m if x.member_id == m.member_id else x for x in group.members)


def _prepare_rebalance(cfg: GroupConfig, group: Group, out: list) -> Group:
    """Enter PreparingRebalance (R3). Held SyncGroups are answered REBALANCE_IN_PROGRESS;
    a rebalance that interrupts CompletingRebalance clears the stored assignments, one
    started from Stable keeps them (GroupMetadataManager.prepareRebalance and
    resetAndPropagateAssignmentWithError, Kafka 4.4.0: DescribeGroups shows them, and an
    online upgrade reads them, M1)."""
    clear = rule(cfg, _clears_stored_assignments)(group)
    members = []
    for m in group.members:
        if m.awaiting_sync:
            out.append(Reply(m.conn, SyncGroupResponse(Error.REBALANCE_IN_PROGRESS, EMPTY_ASSIGNMENT)))
        members.append(m._replace(assignment=EMPTY_ASSIGNMENT if clear else m.assignment, awaiting_sync=False,
                                  pending_sync=False))
    return group._replace(phase=Phase.PREPARING_REBALANCE, members=tuple(members), first_joiner=NO_MEMBER_ID,
                          initial_delay=False)


def _clears_stored_assignments(group: Group) -> bool:
    """R3: whether a rebalance starting now clears the stored assignments: only one that
    interrupts CompletingRebalance (GroupMetadataManager.prepareRebalance calls
    resetAndPropagateAssignmentWithError in that state alone)."""
    return group.phase == Phase.COMPLETING_REBALANCE


def _join_response(group: Group, m: MemberMetadata, skip_assignment: bool = False) -> Reply:
    leader = m.member_id == group.leader
    members = ()
    if leader:
        if group.protocol:  # R35: each member's metadata for the selected protocol
            members = tuple((x.member_id, x.instance_id, x.subscription.metadata(group.protocol))
                            for x in group.members)
        else:
            members = tuple((x.member_id, x.instance_id, x.subscription) for x in group.members)
    return Reply(m.conn, JoinGroupResponse(Error.NONE, m.member_id, group.generation, group.leader, members,
                                           skip_assignment, group.protocol))


def _all_joined(group: Group) -> bool:
    """R4, R36: every member's JoinGroup is held and no member id handed out with
    MEMBER_ID_REQUIRED is still unused (ClassicGroup.hasAllMembersJoined, Kafka 4.4.0).
    Replaced by ``barrier-ignores-pending-members``."""
    if group.pending:
        return False
    return _members_joined(group)


def _members_joined(group: Group) -> bool:
    for m in group.members:
        if not m.awaiting_join:
            return False
    return True


def _maybe_complete_join(cfg: GroupConfig, group: Group, out: list) -> Group:
    """After a JoinGroup: complete the barrier once all members joined (R4, R5), but
    never in the initial rebalance, which only its delay completes (R30)
    (GroupMetadataManager.maybeCompleteJoinPhase: "this is an initial rebalance")."""
    if not rule(cfg, _join_may_complete)(group):
        return group
    return _complete_if_all_joined(cfg, group, out)


def _join_may_complete(group: Group) -> bool:
    """R30: a JoinGroup may complete the barrier outside the initial rebalance only.
    Replaced by ``initial-rebalance-completes-when-all-joined``."""
    return not group.initial_delay


def _complete_if_all_joined(cfg: GroupConfig, group: Group, out: list) -> Group:
    """After a member or a pending member id is removed: complete the barrier once all
    remaining members joined, in the initial rebalance too (R7, R36;
    GroupMetadataManager.removeMemberAndUpdateClassicGroup and
    removePendingMemberAndUpdateClassicGroup check hasAllMembersJoined alone)."""
    if group.phase != Phase.PREPARING_REBALANCE or not rule(cfg, _all_joined)(group):
        return group
    return _complete_join(cfg, group, out)


def _next_generation(group: Group) -> int:
    """R4: the barrier's next generation, one past the last, also when the group
    empties (GroupMetadata.initNextGeneration). Replaced by ``reset-generation-when-empty``."""
    return group.generation + 1


def _complete_join(cfg: GroupConfig, group: Group, out: list) -> Group:
    """The barrier completes (R4, R5; GroupCoordinator.onCompleteJoin, Kafka 3.x-4.0):
    the next generation starts with every member still in the group, including a
    static member that did not rejoin (R27); only the members whose JoinGroup is held
    are answered, every member is owed a SyncGroup (KAFKA-12890). A leader that did
    not rejoin is replaced by a member that did (GroupMetadata.maybeElectNewJoinedLeader;
    we take the first to rejoin, Kafka any). If members remain but none rejoined, the
    round waits (onCompleteJoin schedules another DelayedJoin) until session timeouts
    remove them."""
    generation = rule(cfg, _next_generation)(group)
    if not group.members:
        return group._replace(phase=Phase.EMPTY, generation=generation, leader=NO_MEMBER_ID,
                              first_joiner=NO_MEMBER_ID, protocol="")
    joined = [m.member_id for m in group.members if m.awaiting_join]
    if not joined:
        return group
    leader = rule(cfg, _barrier_leader)(group, joined)
    members = tuple(m._replace(awaiting_join=False, pending_sync=True) for m in group.members)
    group = Group(Phase.COMPLETING_REBALANCE, generation, leader, members, NO_MEMBER_ID, group.issued,
                  protocol=select_protocol(members), pending=group.pending)
    for m in members:
        if m.member_id in joined:
            out.append(_join_response(group, m))
    return group


def _barrier_leader(group: Group, joined: list) -> int:
    """R5: the leader of the generation a barrier completes: the old one if it
    rejoined, else the first member to rejoin (GroupMetadata.maybeElectNewJoinedLeader;
    ClassicGroup.maybeElectNewJoinedLeader in Kafka 4.4 takes any). Replaced by
    ``keep-silent-static-leader`` (test-only)."""
    if group.leader in joined:
        return group.leader
    return group.first_joiner if group.first_joiner in joined else joined[0]


def _remove(cfg: GroupConfig, group: Group, mids, out: list) -> Group:
    """Remove members and move the group on (GroupCoordinator.removeMemberAndUpdateGroup, R7).
    A removed member's held JoinGroup is answered UNKNOWN_MEMBER_ID, so a live one
    rejoins (removeMemberAndUpdateGroup invokes the join callback first); so is its
    held SyncGroup (R71: Kafka leaves it to the client's request timeout, whose
    retry meets UNKNOWN_MEMBER_ID). Only an admin removal (R71) removes a live
    member held at a barrier: a session timeout spares it (R11)."""
    if not mids:
        return group
    for m in group.members:
        if m.member_id in mids and m.awaiting_join:
            out.append(Reply(m.conn, JoinGroupResponse(Error.UNKNOWN_MEMBER_ID, NO_MEMBER_ID, NO_GENERATION,
                                                       NO_MEMBER_ID, ())))
        elif m.member_id in mids and m.awaiting_sync:
            out.append(Reply(m.conn, SyncGroupResponse(Error.UNKNOWN_MEMBER_ID, EMPTY_ASSIGNMENT)))
    group = group._replace(members=tuple(x for x in group.members if x.member_id not in mids))
    if group.phase in (Phase.STABLE, Phase.COMPLETING_REBALANCE):
        group = _prepare_rebalance(cfg, group, out)
    return _complete_if_all_joined(cfg, group, out)


def _fresh_member_id(group: Group, slot: int):
    """The next member id of client ``slot``: serials count up from 1 and, once a
    slot has handed out MAX_SERIAL of them, start again at the lowest one no member
    or pending member id of the group holds, so an id never spills into the next
    slot's bits (two members sharing one id). Within the checker's bounds no slot
    comes near MAX_SERIAL, so what it explores is unchanged."""
    return fresh_member_id(group.issued, [m.member_id for m in group.members] + list(group.pending), slot)


def fresh_member_id(issued: tuple, held, slot: int) -> tuple:
    """``_fresh_member_id`` from the ids ``issued`` so far (``((slot, serial), ...)``) and those
    ``held``: ``(member id, issued')``; also the consumer group's for its classic members
    (model/consumer_group/classic_members.py)."""
    issued = dict(issued)
    k = issued.get(slot, 0) % MAX_SERIAL + 1
    while member_id(slot, k) in held:
        k = k % MAX_SERIAL + 1
    issued[slot] = k
    return member_id(slot, k), tuple(sorted(issued.items()))


def _replaced_instance(group: Group, iid: int):
    """R25: the member a JoinGroup with an empty member id and group.instance.id
    ``iid`` replaces: the one holding ``iid`` (GroupCoordinator.doStaticMemberJoinGroup),
    None for a dynamic member or an unknown instance id. Replaced by
    ``no-fencing-on-duplicate-instance``."""
    return find_instance(group, iid) if iid else None


def _static_rejoin_keeps_generation(group: Group) -> bool:
    """R26: a replaced static member gets the current generation without a rebalance
    when the group is Stable and its protocols leave the selected one unchanged
    (GroupCoordinator.updateStaticMemberAndRebalance). Replaced by
    ``static-rejoin-rebalances``."""
    return group.phase == Phase.STABLE and select_protocol(group.members) == group.protocol


def _join(cfg: GroupConfig, group: Group, conn: int, req: JoinGroup, out: list) -> Group:
    mid, iid = req.member_id, req.group_instance_id
    if group.phase == Phase.DEAD:
        out.append(Reply(conn, JoinGroupResponse(Error.COORDINATOR_NOT_AVAILABLE, mid,
                                                 NO_GENERATION, NO_MEMBER_ID, ())))
        return group
    if not supported(group, req.subscription, mid):  # R35
        out.append(Reply(conn, JoinGroupResponse(Error.INCONSISTENT_GROUP_PROTOCOL, mid, NO_GENERATION,
                                                 NO_MEMBER_ID, ())))
        return group
    if mid == NO_MEMBER_ID:
        holder = rule(cfg, _replaced_instance)(group, iid)
        if holder is not None:
            return _replace_static(cfg, group, holder, conn, req, out)
        mid, issued = _fresh_member_id(group, slot_of(conn))
        if req.require_known_member_id and not iid:  # R36 (KIP-394)
            out.append(Reply(conn, JoinGroupResponse(Error.MEMBER_ID_REQUIRED, mid, NO_GENERATION,
                                                     NO_MEMBER_ID, ())))
            return group._replace(issued=issued, pending=group.pending + (mid,))
        return _new_member(cfg, group._replace(issued=issued), conn, req, mid, out)
    if mid in group.pending:  # R36: the second JoinGroup, with the handed-out id
        return _new_member(cfg, _pending_timeout(group, mid), conn, req, mid, out)
    error = member_error(group, mid, iid)
    if error != Error.NONE:
        out.append(Reply(conn, JoinGroupResponse(error, rule(cfg, _refused_join_member_id)(mid, error),
                                                 NO_GENERATION, NO_MEMBER_ID, ())))
        return group
    m = find(group, mid)
    unchanged = req.subscription == m.subscription
    if unchanged and (group.phase == Phase.COMPLETING_REBALANCE
                      or (group.phase == Phase.STABLE and mid != group.leader)):
        # R6: a member that missed its JoinGroup response, or a follower rejoining a
        # Stable group with unchanged metadata, gets the current one: no rebalance
        m = m._replace(conn=conn)
        out.append(_join_response(group, m))
        return group._replace(members=_replace(group, m))
    # R3: a leader's rejoin or changed metadata
    return _await_join(cfg, group, m._replace(conn=conn, subscription=req.subscription), out)


def _await_join(cfg: GroupConfig, group: Group, m: MemberMetadata, out: list) -> Group:
    """Hold ``m``'s JoinGroup at the barrier (R3, R4): a rebalance starts unless one
    is being prepared; the barrier completes if it was the last one awaited."""
    if group.phase != Phase.PREPARING_REBALANCE:
        delay = cfg.initial_rebalance_delay and group.phase == Phase.EMPTY  # R30, KIP-134
        group = _prepare_rebalance(cfg, group, out)._replace(initial_delay=delay)
    m = find(group, m.member_id)._replace(conn=m.conn, subscription=m.subscription, awaiting_join=True)
    group = group._replace(members=_replace(group, m), first_joiner=group.first_joiner or m.member_id)
    return _maybe_complete_join(cfg, group, out)


def _new_member(cfg: GroupConfig, group: Group, conn: int, req: JoinGroup, mid: int, out: list) -> Group:
    """R2: a new member joins under a fresh member id ``mid`` (and, if static,
    enters the static map)."""
    m = MemberMetadata(mid, req.group_instance_id, conn, req.subscription, EMPTY_ASSIGNMENT, False, False, False)
    group = group._replace(members=tuple(sorted(group.members + (m,))), leader=group.leader or mid,
                           new_member_added=group.new_member_added or group.initial_delay)
    return _await_join(cfg, group, m, out)


def _replace_static(cfg: GroupConfig, group: Group, old: MemberMetadata, conn: int, req: JoinGroup, out: list) -> Group:
    """R25: a known group.instance.id joins with an unknown member id: it gets a new
    member id in the old one's place, and the old one's held JoinGroup or SyncGroup
    is answered FENCED_INSTANCE_ID (GroupCoordinator.doStaticMemberJoinGroup,
    GroupMetadata.replaceStaticMember). In Stable no rebalance: the member gets the
    current generation and, through SyncGroup, the stored assignment (R26; before
    JoinGroup v9 the response names the previous leader and no members, so a restarted
    leader follows: GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin,
    Kafka 4.4.0), unless
    its protocols change the protocol the group would select (R35): then a rebalance
    starts, so the assignment and the selected protocol agree
    (GroupCoordinator.updateStaticMemberAndRebalance, Kafka 2.5-4.0)."""
    if old.awaiting_join:
        out.append(Reply(old.conn, JoinGroupResponse(Error.FENCED_INSTANCE_ID, old.member_id,
                                                     NO_GENERATION, NO_MEMBER_ID, ())))
    if old.awaiting_sync:
        out.append(Reply(old.conn, SyncGroupResponse(Error.FENCED_INSTANCE_ID, EMPTY_ASSIGNMENT)))
    mid, issued = _fresh_member_id(group, slot_of(conn))
    m = old._replace(member_id=mid, conn=conn, subscription=req.subscription,
                     awaiting_join=False, awaiting_sync=False)
    old_leader = group.leader
    leader = mid if group.leader == old.member_id else group.leader
    first = mid if group.first_joiner == old.member_id else group.first_joiner
    members = tuple(sorted(x for x in group.members if x.member_id != old.member_id) + [m])
    group = group._replace(members=members, issued=issued, leader=leader, first_joiner=first)
    if rule(cfg, _static_rejoin_keeps_generation)(group):
        answered = group._replace(generation=rule(cfg, _static_rejoin_generation)(group))
        if rule(cfg, _skip_assignment_supported)(req):
            out.append(_join_response(answered, m, skip_assignment=mid == leader))
        else:  # before JoinGroup v9 the response names the previous leader: the new process follows
            out.append(Reply(conn, JoinGroupResponse(Error.NONE, mid, answered.generation, old_leader, (), False,
                                                     group.protocol)))
        return group
    return _await_join(cfg, group, m, out)


def _refused_join_member_id(mid: int, error: Error) -> int:
    """R24: a JoinGroup refused for who it speaks for echoes the member.id it asked
    with, UNKNOWN_MEMBER_ID included (GroupMetadataManager.classicGroupJoinExistingMember
    and classicGroupJoinToClassicGroup, setMemberId(memberId), Kafka 4.4.0). Replaced by
    ``unknown-member-id-not-echoed``."""
    return mid


def _skip_assignment_supported(req: JoinGroup) -> bool:
    """R26: KIP-814's skip_assignment answer needs JoinGroup v9+. Replaced by
    ``static-leader-told-it-leads-before-v9``."""
    return req.supports_skip_assignment


def _static_rejoin_generation(group: Group) -> int:
    """R26: the generation a static member rejoining without a rebalance is given:
    the group's (GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin
    answers with group.generationId()). Replaced by ``static-rejoin-stale-generation``
    (test-only)."""
    return group.generation


def _generation_error(group: Group, req) -> Error:
    """The answer to a SyncGroup or Heartbeat from a member that cannot go on (R8,
    R10): COORDINATOR_NOT_AVAILABLE for a Dead group, then who may speak for the
    member (``member_error``), ILLEGAL_GENERATION for another generation,
    REBALANCE_IN_PROGRESS in PreparingRebalance; NONE otherwise."""
    if group.phase == Phase.DEAD:
        return Error.COORDINATOR_NOT_AVAILABLE
    error = member_error(group, req.member_id, req.group_instance_id)
    if error != Error.NONE:
        return error
    if req.generation != group.generation:
        return Error.ILLEGAL_GENERATION
    if group.phase == Phase.PREPARING_REBALANCE:
        return Error.REBALANCE_IN_PROGRESS
    return Error.NONE


def _sync(group: Group, conn: int, req: SyncGroup, out: list) -> Group:
    error = _generation_error(group, req)
    if error != Error.NONE:
        out.append(Reply(conn, SyncGroupResponse(error, EMPTY_ASSIGNMENT)))
        return group
    m = find(group, req.member_id)
    if group.phase == Phase.STABLE:  # R8: late SyncGroup gets the stored assignment
        m = m._replace(conn=conn, pending_sync=False)
        out.append(Reply(conn, SyncGroupResponse(Error.NONE, m.assignment)))
        return group._replace(members=_replace(group, m))
    # CompletingRebalance: hold the SyncGroup until the leader's assignment (R8)
    m = m._replace(conn=conn, awaiting_sync=True, pending_sync=False)
    group = group._replace(members=_replace(group, m))
    if m.member_id != group.leader:
        return group
    given = dict(req.assignments)
    members = []
    for x in group.members:
        x = x._replace(assignment=given.get(x.member_id, EMPTY_ASSIGNMENT))
        if x.awaiting_sync:
            out.append(Reply(x.conn, SyncGroupResponse(Error.NONE, x.assignment)))
            x = x._replace(awaiting_sync=False)
        members.append(x)
    return group._replace(phase=Phase.STABLE, members=tuple(members))


def _heartbeat(cfg: GroupConfig, group: Group, conn: int, req: Heartbeat, out: list) -> Group:
    """R10 (GroupCoordinator.handleHeartbeat)."""
    out.append(Reply(conn, HeartbeatResponse(rule(cfg, _heartbeat_error)(group, req))))
    return group


def _heartbeat_error(group: Group, req: Heartbeat) -> Error:
    """R10: a Heartbeat's answer is ``_generation_error``'s. Replaced by
    ``heartbeat-ignores-generation`` (test-only)."""
    return _generation_error(group, req)


def _leave(cfg: GroupConfig, group: Group, conn: int, req: LeaveGroup, out: list) -> Group:
    """R7: batch LeaveGroup with per-member errors (GroupCoordinator.handleLeaveGroup,
    KIP-345). An entry with NO_MEMBER_ID and an instance id is an admin removal."""
    results = []
    gone = []
    for mid, iid in req.members:
        if iid and mid == NO_MEMBER_ID:
            holder = find_instance(group, iid)
            error = Error.NONE if holder is not None else Error.UNKNOWN_MEMBER_ID
            mid = holder.member_id if holder is not None else mid
        else:
            error = member_error(group, mid, iid)
        results.append((mid, iid, error))
        if error == Error.NONE:
            gone.append(mid)
    out.append(Reply(conn, LeaveGroupResponse(Error.NONE, tuple(results))))
    if any(mid == NO_MEMBER_ID for mid, _ in req.members):
        return rule(cfg, _remove_by_admin)(cfg, group, gone, out)
    return _remove(cfg, group, gone, out)


def _remove_by_admin(cfg: GroupConfig, group: Group, mids, out: list) -> Group:
    """R71: static members an admin client removes by group.instance.id leave as any
    leaving member does, and the group rebalances so their partitions move (seed 002,
    "Admin request": batch LeaveGroup; GroupCoordinator.handleLeaveGroup calls
    removeMemberAndUpdateGroup, which prepares a rebalance). Replaced by
    ``admin-removal-without-rebalance``."""
    return _remove(cfg, group, mids, out)


def _commit(cfg: GroupConfig, group: Group, conn: int, req: OffsetCommit, out: list) -> Group:
    """R9 (GroupCoordinator.handleCommitOffsets)."""
    if member_error(group, req.member_id, req.group_instance_id) == Error.FENCED_INSTANCE_ID:
        error = Error.FENCED_INSTANCE_ID
    elif commit_allowed(cfg, group, req.member_id, req.generation, req.group_instance_id):
        error = Error.NONE
    elif find(group, req.member_id) is None:
        error = Error.UNKNOWN_MEMBER_ID
    elif req.generation != group.generation:
        error = Error.ILLEGAL_GENERATION
    else:
        error = Error.REBALANCE_IN_PROGRESS
    out.append(Reply(conn, OffsetCommitResponse(error)))
    return group


def _kept_alive(m: MemberMetadata) -> bool:
    """R11: a member held at a barrier does not expire (MemberMetadata.shouldKeepAlive
    keeps members awaiting join or sync). Replaced by ``no-pending-sync-expiry``."""
    return m.awaiting_join or m.awaiting_sync


def _late_syncers(group: Group) -> list:
    """R12: the members the pending-sync timeout removes, those that got a JoinGroup
    response and sent no SyncGroup (GroupCoordinator.onExpirePendingSync, KAFKA-12890's
    fix). Replaced by ``no-pending-sync-expiry``."""
    return [m.member_id for m in group.members if m.pending_sync]


def _session_timeout(cfg: GroupConfig, group: Group, mid: int, out: list) -> Group:
    """R11: a member that is not kept alive (``_kept_alive``) expires (onExpireHeartbeat)."""
    m = find(group, mid)
    if m is None or rule(cfg, _kept_alive)(m):
        return group
    return _remove(cfg, group, (mid,), out)


def _rebalance_timeout(cfg: GroupConfig, group: Group, out: list) -> Group:
    """R4, R27: the barrier's deadline (GroupCoordinator.onCompleteJoin, Kafka 3.x-4.0)
    removes the dynamic members that did not rejoin and completes the join with the
    members that did; a static member that did not rejoin stays in the group (its
    session timeout or the pending-sync timeout removes it later). Seed 002,
    "Server Behavior Changes": the rebalance timeout only stops PreparingRebalance."""
    if group.phase != Phase.PREPARING_REBALANCE:
        return group
    kept = rule(cfg, _kept_at_rebalance_timeout)
    group = group._replace(members=tuple(m for m in group.members if kept(m)))
    return _complete_join(cfg, group, out)


def _kept_at_rebalance_timeout(m: MemberMetadata) -> bool:
    """R27: the rebalance timeout keeps the members that rejoined and the static ones
    (GroupMetadataManager.completeClassicGroupJoin removes only the dynamic members
    that have not rejoined). Replaced by ``rebalance-timeout-removes-static``."""
    return m.awaiting_join or bool(m.instance_id)


def _sync_timeout(cfg: GroupConfig, group: Group, out: list) -> Group:
    """R12: members that did not send SyncGroup in time are removed (KAFKA-12890,
    GroupCoordinator.onExpirePendingSync)."""
    if group.phase not in (Phase.COMPLETING_REBALANCE, Phase.STABLE):
        return group
    late = rule(cfg, _late_syncers)(group)
    if not late:
        return group
    group = group._replace(members=tuple(m for m in group.members if m.member_id not in late))
    group = _prepare_rebalance(cfg, group, out)
    return _maybe_complete_join(cfg, group, out)


def _initial_delay_over(cfg: GroupConfig, group: Group, out: list) -> Group:
    """R30 (KIP-134): group.initial.rebalance.delay.ms has passed. If a new member
    joined meanwhile, the delay runs once more; otherwise the barrier completes as at
    the rebalance timeout (GroupMetadataManager.tryCompleteInitialRebalanceElseSchedule,
    Kafka 4.4.0)."""
    if not group.initial_delay:
        return group
    if rule(cfg, _initial_delay_extended)(group):
        return group._replace(new_member_added=False)
    return _rebalance_timeout(cfg, group._replace(initial_delay=False), out)


def _initial_delay_extended(group: Group) -> bool:
    """R30: the initial delay runs once more when a new member joined during it.
    Replaced by ``initial-delay-runs-once``."""
    return group.new_member_added


def _pending_timeout(group: Group, mid: int) -> Group:
    """R36: a member id from MEMBER_ID_REQUIRED leaves the pending list (used, or
    its timeout passed)."""
    return group._replace(pending=tuple(x for x in group.pending if x != mid))


def _pending_expired(cfg: GroupConfig, group: Group, mid: int, out: list) -> Group:
    """R36: an unused member id's session timeout passed: it is forgotten, and the
    barrier completes if it was all that was missing
    (GroupMetadataManager.removePendingMemberAndUpdateClassicGroup)."""
    if mid not in group.pending:
        return group
    return _complete_if_all_joined(cfg, _pending_timeout(group, mid), out)


def deletable(cfg: GroupConfig, group: Group) -> bool:
    """Whether DeleteGroups removes the group: only an Empty one
    (GroupCoordinator.handleDeleteGroups: a Dead group is GROUP_ID_NOT_FOUND, an
    Empty one is deleted, any other is NON_EMPTY_GROUP; spec R44). Replaced by the
    test-only ``delete-non-empty-group``."""
    return rule(cfg, _deletable)(group)


def _deletable(group: Group) -> bool:
    """R44: only an Empty group is deleted."""
    return group.phase == Phase.EMPTY


def _delete(cfg: GroupConfig, group: Group, out: list) -> Group:
    """A deletable group becomes Dead; any other is unchanged (R44)."""
    if deletable(cfg, group):
        return group._replace(phase=Phase.DEAD)
    return group


def _force_rebalance(cfg: GroupConfig, group: Group, out: list) -> Group:
    """R56: a Stable or CompletingRebalance group prepares a rebalance (held SyncGroups
    answered REBALANCE_IN_PROGRESS, R3); a group already rebalancing, Empty or Dead
    is left as it is (GroupCoordinator.prepareRebalance is called only from
    canRebalance states)."""
    if group.phase not in (Phase.STABLE, Phase.COMPLETING_REBALANCE):
        return group
    return _prepare_rebalance(cfg, group, out)


def handle(cfg: GroupConfig, group: Group, event) -> tuple:
    """One coordinator step: ``(group', (Reply, ...))``. Unknown inputs raise TypeError."""
    out: list = []
    kind = type(event)
    if kind is Receive:
        conn, req = event.conn, event.request
        rk = type(req)
        if rk is JoinGroup:
            group = _join(cfg, group, conn, req, out)
        elif rk is SyncGroup:
            group = _sync(group, conn, req, out)
        elif rk is Heartbeat:
            group = _heartbeat(cfg, group, conn, req, out)
        elif rk is LeaveGroup:
            group = _leave(cfg, group, conn, req, out)
        elif rk is OffsetCommit:
            group = _commit(cfg, group, conn, req, out)
        else:
            raise TypeError(f"coordinator cannot handle request {req!r}")
    elif kind is SessionTimeout:
        group = _session_timeout(cfg, group, event.member_id, out)
    elif kind is RebalanceTimeout:
        group = _rebalance_timeout(cfg, group, out)
    elif kind is SyncTimeout:
        group = _sync_timeout(cfg, group, out)
    elif kind is InitialRebalanceDelay:
        group = _initial_delay_over(cfg, group, out)
    elif kind is PendingMemberTimeout:
        group = _pending_expired(cfg, group, event.member_id, out)
    elif kind is DeleteGroup:
        group = _delete(cfg, group, out)
    elif kind is ForceRebalance:
        group = _force_rebalance(cfg, group, out)
    else:
        raise TypeError(f"coordinator cannot handle input {event!r}")
    return group, tuple(out)
