"""The properties and covers of KIP-848's online migration (``group.migration``; names as in
spec/SPEC.md, "Online migration"), judged on the states of checker/migration_system.py: a
group that is classic or a consumer group, clients of both protocols.

Read off the states, never recomputed with model/'s rules: whether a client can commit is
what the coordinator of its group checks (a classic group: member id known, generation the
group's, the group Stable or PreparingRebalance, R9; a consumer group: member id known at
the epoch or generation the client sends, K11 and ConsumerGroup.validateOffsetCommit). The
consumer group's own invariants are consumer_properties' (TLA+-cited), judged while the
group is a consumer group.
"""
from __future__ import annotations

from rebalance.model.consumer_group.membership import IN_GROUP, Membership
from rebalance.model.consumer_group.messages import (
    ClientState, ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse, MemberState,
)
from rebalance.model.coordinator import Group
from rebalance.model.member import MemberPhase
from rebalance.model.protocol import Error, Heartbeat, HeartbeatResponse, Phase, member_name, partitions_of

from . import consumer_properties as kip848
from .properties import Cover, Property, exclusive_commits, exclusive_processing
from .system import PAUSED, RUNNING, State


def _migration(system) -> bool:
    return bool(system.cfg.migration)


def _names(system, mask: int) -> str:
    return ", ".join(system.cfg.partition_name(p) for p in partitions_of(mask))


def committable(group, c) -> int:
    """The partitions (a bitmask) whose OffsetCommit from client ``c`` the coordinator accepts
    now. In a classic group: all, if its member id is known, its generation the group's, the
    group Stable or PreparingRebalance (R9). In a consumer group: if its member is known, at
    the epoch it sends (a classic client's generation is its member epoch) all, at an older
    one those the member holds since that epoch or before (K11, KIP-1251). Either client only
    commits in the group (a classic one Stable, a consumer-protocol one reconciling,
    acknowledging or Stable)."""
    if type(c) is Membership:
        if c.state not in IN_GROUP:
            return 0
        sent = c.epoch
    else:
        if c.phase != MemberPhase.STABLE:
            return 0
        sent = c.generation
    if type(group) is Group:
        known = any(m.member_id == c.member_id for m in group.members)
        return -1 if known and sent == group.generation and group.phase in (
            Phase.STABLE, Phase.PREPARING_REBALANCE) else 0
    return kip848.committable(group, c.member_id, sent)


def _processing(system, c) -> int:
    return kip848.processing(system.cfg, c) if type(c) is Membership else c.owned


def exclusive_ownership(system, state: State):
    """No partition processed by two live clients, of either protocol, that can both commit it
    at one instant (``committable``): the design brief's guarantee across a migration."""
    seen: dict = {}
    for p in state.procs:
        c = p.consumer
        if p.status not in (RUNNING, PAUSED):
            continue
        for q in partitions_of(_processing(system, c) & committable(state.group, c)):
            if q in seen:
                return (f"{system.cfg.partition_name(q)} owned by {member_name(seen[q])} and "
                        f"{member_name(c.member_id)}, both able to commit it")
            seen[q] = c.member_id
    return None


def _in_consumer_group(check):
    """``check`` (a consumer_properties invariant) judged while the group is a consumer group."""
    def judged(system, state: State):
        return None if type(state.group) is Group else check(system, state)
    judged.__doc__ = check.__doc__
    return judged


def epochs_carried(system, s: State, a, n: State):
    """M1, M2: an online conversion (a group with members changing kind) never takes the
    group's epoch back: a consumer group's epoch after an upgrade is at least the classic
    generation, a classic generation after a downgrade at least the consumer group's epoch
    (member epochs and generations fence stale members and their commits)."""
    before, after = s.group, n.group
    if type(before) is type(after) or not before.members or not after.members:
        return None
    if type(before) is Group:
        if after.epoch < before.generation:
            return f"upgraded at epoch {after.epoch} from generation {before.generation}"
    elif after.generation < before.epoch:
        return f"downgraded to generation {after.generation} from epoch {before.epoch}"
    return None


FATAL_REFUSALS = (Error.GROUP_ID_NOT_FOUND, Error.UNRELEASED_INSTANCE_ID)  # fatal for the Java consumer


def joins_admitted(system, s: State, a, n: State):
    """M1, M7: a consumer-protocol process joining (epoch 0) is never refused fatally for the
    migration's sake: not by a classic group (an empty one gives way, KAFKA-16313; one with
    members is upgraded), nor because a classic member holds its group.instance.id (a classic
    static member never sends LeaveGroup when it stops, KIP-345, so a rolling upgrade's
    restarted process finds its instance id held; KAFKA-17228)."""
    req = a.detail
    if a.kind != "deliver" or type(req) is not ConsumerGroupHeartbeat or req.member_epoch != 0:
        return None
    p = n.procs[a.slot]
    r = p.responses[-1] if p.responses else None
    if type(r) is not ConsumerGroupHeartbeatResponse or r.error not in FATAL_REFUSALS:
        return None
    if type(s.group) is Group and r.error == Error.GROUP_ID_NOT_FOUND:
        return f"{member_name(req.member_id)}'s join refused {r.error.name} by a classic group"
    holder = kip848.find_instance(s.group, req.instance_id)
    if holder is not None and (type(s.group) is Group or holder.classic):
        return (f"{member_name(req.member_id)}'s join refused {r.error.name}: its instance id is held by the classic "
                f"member {member_name(holder.member_id)}")
    return None


def _gave_up(c) -> bool:
    """A client whose application got a fatal error (out of the group as a crashed one is)."""
    return c.state == ClientState.FATAL if type(c) is Membership else c.phase == MemberPhase.LEFT


def converged(system, state: State):
    """The goal of ``converges``: the group Stable; every running client (but one that gave up
    on a fatal error) a member Stable at the group's generation or epoch, owning its
    assignment (in a consumer group: its target); every partition owned by one of them."""
    group = state.group
    clients = [p.consumer for p in state.procs if p.status == RUNNING and not _gave_up(p.consumer)]
    if type(group) is Group:
        if clients and group.phase != Phase.STABLE:
            return f"the classic group is {group.phase.name}"
        members = {m.member_id: m for m in group.members}
        for c in clients:
            m = members.get(c.member_id)
            if (type(c) is Membership or m is None or c.phase != MemberPhase.STABLE
                    or c.generation != group.generation or c.owned != m.assignment.partitions):
                return f"{member_name(c.member_id)} is not Stable in generation {group.generation}"
    else:
        if group.members and not kip848.settled(group):
            return f"the consumer group is {'ASSIGNING' if group.epoch > group.target_epoch else 'RECONCILING'}"
        for c in clients:
            m = kip848.find(group, c.member_id)
            stable, at = (c.state == ClientState.STABLE, c.epoch) if type(c) is Membership else (
                c.phase == MemberPhase.STABLE, c.generation)
            if (m is None or not stable or at != group.epoch or c.owned != m.assigned
                    or m.assigned != kip848.target_of(group, m.member_id)):
                return f"{member_name(c.member_id)} is not Stable at epoch {group.epoch}"
    owned = [c.owned for c in clients]
    if clients and (sum(bin(o).count("1") for o in owned) != bin(system.cfg.all_partitions).count("1")
                    or any(owned[i] & owned[j] for i in range(len(owned)) for j in range(i))):
        return "the partitions are not owned once each"
    return None


PROPERTIES = (
    Property("exclusive_ownership", "invariant",
             "no partition owned by two live clients, of either protocol, that can both commit it at one instant",
             _migration, exclusive_ownership),
    Property("exclusive_commits", "invariant",
             "no partition for which the coordinator accepted OffsetCommits from two processes while both owned it",
             _migration, exclusive_commits),
    Property("exclusive_processing", "invariant", "no partition processed by two live processes (breaks with zombies)",
             lambda system: _migration(system) and "pause" in system.faults, exclusive_processing),
    Property("legal_target", "invariant", "a consumer group's target assignment is total and disjoint",
             _migration, _in_consumer_group(kip848.legal_target)),
    Property("valid_partition_epochs", "invariant",
             "in a consumer group, a free partition sits in no member's assigned or pending set",
             _migration, _in_consumer_group(kip848.valid_partition_epochs)),
    Property("epochs_ordered", "invariant", "in a consumer group, member epoch ≤ target assignment epoch ≤ group epoch",
             _migration, _in_consumer_group(kip848.epochs_ordered)),
    Property("epochs_carried", "invariant",
             "an online upgrade or downgrade never takes the group's epoch (generation) back", _migration, None,
             epochs_carried),
    Property("joins_admitted", "invariant",
             "a consumer-protocol join is never refused fatally by a classic group or for an instance id a classic "
             "member holds (KAFKA-16313, KAFKA-17228)", _migration, None, joins_admitted),
    Property("converges", "liveness",
             "once faults stop, the group converges: Stable, every running client a Stable member at its generation "
             "or epoch owning its assignment, every partition owned once, under weak fairness", _migration, converged),
)


def _converted(upgrade: bool, members: bool):
    def reached(system, s, a, n) -> bool:
        return (type(s.group) is Group) is upgrade and (type(n.group) is Group) is not upgrade and (
            bool(s.group.members) is members)
    return reached


def _told_to_rejoin(system, s, a, n) -> bool:
    """A classic member's Heartbeat in a consumer group answered REBALANCE_IN_PROGRESS (M5)."""
    if type(s.group) is Group or type(a.detail) is not Heartbeat:
        return False
    r = n.procs[a.slot].responses[-1:] if n.procs[a.slot].responses else ()
    return bool(r) and type(r[0]) is HeartbeatResponse and r[0].error == Error.REBALANCE_IN_PROGRESS


def _classic_revoking(system, s, a, n) -> bool:
    """A classic member of a consumer group entered UNREVOKED_PARTITIONS (its JoinGroup reported
    partitions it must give up)."""
    if type(n.group) is Group:
        return False
    before = {} if type(s.group) is Group else {m.member_id: m.state for m in s.group.members}
    return any(m.classic and m.state == MemberState.UNREVOKED_PARTITIONS
               and before.get(m.member_id) != MemberState.UNREVOKED_PARTITIONS for m in n.group.members)


COVERS = (
    Cover("online_upgrade", "a classic group with members became a consumer group", _converted(True, True),
          _migration, ("deliver",)),
    Cover("offline_upgrade", "an empty classic group gave way to a consumer group", _converted(True, False),
          _migration, ("deliver",)),
    Cover("online_downgrade", "a consumer group whose last consumer-protocol member left became a classic group",
          _converted(False, True), _migration, ("deliver", "timer")),
    Cover("classic_member_told_to_rejoin", "a classic member's Heartbeat in a consumer group was answered "
          "REBALANCE_IN_PROGRESS", _told_to_rejoin, _migration, ("deliver",)),
    Cover("classic_member_revoking", "a classic member of a consumer group entered UNREVOKED_PARTITIONS",
          _classic_revoking, _migration, ("deliver",)),
)
