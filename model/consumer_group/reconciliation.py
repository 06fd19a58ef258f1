"""The coordinator's reconciliation engine (KIP-848): a member's assignment moved towards
its target, a partition given only once its previous owner has released it.

``reconcile(cfg, member, target_epoch, target, held_by_others, owned, subscribed, enforce)
-> member'`` is CurrentAssignmentBuilder.build (Kafka 4.x, with KAFKA-16249's
UNREVOKED_PARTITIONS state, KAFKA-19431's subscription consistency, KAFKA-19449's own
pending revocations and KAFKA-19974's epoch kept while revoking): ``target`` is the
member's target assignment at ``target_epoch``; ``held_by_others`` the partitions whose
epoch is set for another holder (ConsumerGroup.currentPartitionEpoch != -1, less the
member's own pending revocations); ``owned`` what the member reported owning in this
heartbeat (None: not reported); ``subscribed`` the partitions of the topics it
subscribes to; ``enforce`` whether its subscription just changed (the assignment is then
made consistent with it at once).

The three sets of ``computeNextAssignment`` (assigned, revoking, to assign):
``assigned ∩ target``, ``assigned - target``, ``target - assigned - unreleased``.
"""
from __future__ import annotations

from ..config import GroupConfig, rule
from .group import ConsumerGroupMember, assignment_epochs
from .messages import MemberState


def owns_revoked(owned: int | None, revoking: int) -> bool:
    """CurrentAssignmentBuilder.ownsRevokedPartitions: the member still reports one of the
    partitions pending revocation, or reports nothing (it cannot be known to have revoked)."""
    return owned is None or bool(owned & revoking)


def unreleased(member: ConsumerGroupMember, wanted: int, held: int) -> int:
    """The partitions of ``wanted`` the member cannot take yet: held (their epoch set) by
    someone, except its own pending revocations (KAFKA-19449)."""
    return wanted & held & ~member.revoking


def revoking_epoch(member: ConsumerGroupMember) -> int:
    """The epoch an UNREVOKED_PARTITIONS member reconciles at once it has revoked: its own
    (KAFKA-19974: an epoch bump here let two members own a partition at one epoch)."""
    return member.epoch


def subscribed_target(target: int, subscribed: int) -> int:
    """The target reconciled: a topic the member no longer subscribes to has an empty one
    (KAFKA-19431), whatever the target assignment (computed later) still says."""
    return target & subscribed


def waiting_state(blocked: int) -> MemberState:
    """The state of a member given its target but for ``blocked``, partitions others hold."""
    return MemberState.UNRELEASED_PARTITIONS if blocked else MemberState.STABLE


def next_assignment(cfg: GroupConfig, member: ConsumerGroupMember, epoch: int, target_epoch: int, target: int,
                    held: int, owned: int | None, subscribed: int) -> ConsumerGroupMember:
    """CurrentAssignmentBuilder.computeNextAssignment at member epoch ``epoch``."""
    target = rule(cfg, subscribed_target)(target, subscribed)
    assigned = member.assigned & target
    revoking = member.assigned & ~target
    wanted = target & ~assigned
    blocked = rule(cfg, unreleased)(member, wanted, held)
    to_assign = wanted & ~blocked
    if revoking and owns_revoked(owned, revoking):
        return member._replace(state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned, revoking=revoking,
                               assignment_epochs=assignment_epochs(member, assigned, revoking, target_epoch),
                               **_epoch(member, epoch))
    state = rule(cfg, waiting_state)(blocked)
    return member._replace(state=state, assigned=assigned | to_assign, revoking=0,
                           assignment_epochs=assignment_epochs(member, assigned | to_assign, 0, target_epoch),
                           **_epoch(member, target_epoch))


def _epoch(member: ConsumerGroupMember, epoch: int) -> dict:
    """ConsumerGroupMember.Builder.updateMemberEpoch: the previous epoch becomes the member's
    epoch before the update, whether or not it changes."""
    return {"epoch": epoch, "previous_epoch": member.epoch}


def consistent_assignment(member: ConsumerGroupMember, owned: int | None, subscribed: int) -> ConsumerGroupMember:
    """CurrentAssignmentBuilder.updateCurrentAssignment: the partitions of topics the member
    no longer subscribes to are taken from its assignment into pending revocation."""
    dropped = member.assigned & ~subscribed
    if not dropped:
        return member
    revoking = member.revoking | dropped
    assigned = member.assigned & ~dropped
    if owns_revoked(owned, revoking):
        return member._replace(state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned, revoking=revoking,
                               assignment_epochs=assignment_epochs(member, assigned, revoking, member.epoch),
                               **_epoch(member, member.epoch))
    return member._replace(assigned=assigned, assignment_epochs=assignment_epochs(member, assigned, member.revoking,
                                                                                  member.epoch),
                           **_epoch(member, member.epoch))


def reconcile(cfg: GroupConfig, member: ConsumerGroupMember, target_epoch: int, target: int, held: int,
              owned: int | None, subscribed: int, enforce: bool) -> ConsumerGroupMember:
    """K5: CurrentAssignmentBuilder.build (module docstring)."""
    if member.state == MemberState.STABLE:
        if member.epoch != target_epoch:
            return next_assignment(cfg, member, member.epoch, target_epoch, target, held, owned, subscribed)
        return rule(cfg, consistent_assignment)(member, owned, subscribed) if enforce else member
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owns_revoked(owned, member.revoking):
            return rule(cfg, consistent_assignment)(member, owned, subscribed) if enforce else member
        epoch = rule(cfg, revoking_epoch)(member)
        return next_assignment(cfg, member, epoch, target_epoch, target, held, owned, subscribed)
    return next_assignment(cfg, member, member.epoch, target_epoch, target, held, owned, subscribed)
