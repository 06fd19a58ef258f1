"""The properties and covers of KIP-848's consumer group protocol (``--protocol consumer``;
names as in spec/SPEC.md, "The consumer group protocol"), each a ``Property`` or ``Cover``
as in checker/properties.py, judged on the states of checker/consumer_system.py.

Where Vanlightly's TLA+ specification of KIP-848 (kafka-tlaplus, groupprotocol/
consumer_group_protocol_kip_848_v2.tla) states one, the property cites it. The facts are
read off the states (the coordinator's ConsumerGroup, the clients' Membership), never
recomputed with model/'s rules: ``sticky_target`` computes the fewest moves a balanced
assignment allows from the counts alone.
"""
from __future__ import annotations

from rebalance.model.consumer_group.membership import IN_GROUP
from rebalance.model.consumer_group.messages import (
    FREE, ClientState, ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse, MemberRebalanceTimeout, MemberState,
)
from rebalance.model.protocol import (
    ALL_TOPICS, NO_INSTANCE_ID, Error, OffsetCommitResponse, SessionTimeout, member_name, partitions_of, union,
)

from . import timed
from .consumer_refinement import refinement
from .properties import Cover, Property, exclusive_commits, exclusive_processing, on_groups, projected
from .system import PAUSED, RUNNING, State


def _names(system, mask: int) -> str:
    return ", ".join(system.cfg.partition_name(p) for p in partitions_of(mask))


def _consumer_protocol(system) -> bool:
    return system.cfg.protocol == "consumer"


def _members(group) -> dict:
    return {m.member_id: m for m in group.members}


# What the judge reads off a state, written here from KIP-848 and Kafka's classes, not called in model/
# (tests/test_independence.py): a bug in a rule of the model cannot then excuse itself.

def find(group, mid: int):
    """The member of id ``mid``, or None."""
    return next((m for m in group.members if m.member_id == mid), None)


def find_instance(group, iid: int):
    """The member holding group.instance.id ``iid`` (ConsumerGroup.staticMember), or None."""
    return None if iid == NO_INSTANCE_ID else next((m for m in group.members if m.instance_id == iid), None)


def target_of(group, mid: int) -> int:
    """The member's partitions in the group's target assignment (a bitmask; 0: none)."""
    return next((parts for m, parts in group.target if m == mid), 0)


def subscribed_partitions(cfg, group, m) -> int:
    """What member ``m`` may be assigned (a bitmask): the partitions of the existing
    topics it subscribes to; an unresolved regular expression subscribes to nothing
    yet (KIP-848; CurrentAssignmentBuilder.subscribedTopicIds)."""
    if m.regex and not m.resolved:
        return 0
    return cfg.partitions_of_topics(group.topics & (group.topics if m.topics == ALL_TOPICS else m.topics))


def settled(group) -> bool:
    """The group is Stable (ConsumerGroup.maybeUpdateGroupState): it has members, its
    target is computed at its epoch, and every member is Stable at that epoch."""
    return bool(group.members) and group.epoch == group.target_epoch and all(
        m.state == MemberState.STABLE and m.epoch == group.target_epoch for m in group.members)


def processing(cfg, c) -> int:
    """What a client fetches and processes (a bitmask): what it owns, of the topics it
    subscribes to (KAFKA-19356: with an explicit subscription a dropped topic's owned
    partition is not fetched while the coordinator takes it back)."""
    return c.owned if c.regex or c.topics == ALL_TOPICS else c.owned & cfg.partitions_of_topics(c.topics)


@projected(lambda g: frozenset(m.member_id for m in g.members),
           lambda p: (p.consumer.member_id, p.consumer.owned) if p.status in (RUNNING, PAUSED) else None)
def no_double_ownership(system, state: State):
    """No partition owned by the clients of two members of the group (TLA+
    NoDoubleClientAssignment: "the most important safety property")."""
    current = {m.member_id for m in state.group.members}
    seen: dict = {}
    for p in state.procs:
        if p.status not in (RUNNING, PAUSED) or p.consumer.member_id not in current:
            continue
        c = p.consumer
        for q in partitions_of(c.owned):
            if q in seen:
                return (f"{system.cfg.partition_name(q)} owned by {member_name(seen[q])} and "
                        f"{member_name(c.member_id)}, both members of the group")
            seen[q] = c.member_id
    return None


def committable(group, mid: int, sent: int) -> int:
    """The partitions (a bitmask, -1: all) whose OffsetCommit at epoch ``sent`` from member
    ``mid`` the consumer group's coordinator accepts now (K11; ConsumerGroup.validateOffsetCommit
    with KIP-1251): all at the member's epoch, at an older one those it holds since that
    epoch or before, none from an unknown member or at a newer epoch."""
    m = find(group, mid)
    if m is None or sent > m.epoch:
        return 0
    if sent == m.epoch:
        return -1
    return sum(1 << p for p, since in m.assignment_epochs if since <= sent)


@projected(lambda g: frozenset((m.member_id, m.epoch, m.assignment_epochs) for m in g.members),
           lambda p: (p.consumer.member_id, p.consumer.state, p.consumer.epoch, p.consumer.owned, p.consumer.topics,
                      p.consumer.regex) if p.status in (RUNNING, PAUSED) else None)
def exclusive_ownership(system, state: State):
    """No partition processed by two live clients that can both commit it at one instant:
    each in the group (RECONCILING, ACKNOWLEDGING or STABLE: the states it commits in), at
    its epoch accepted for the partition (``committable``). The design brief's guarantee,
    read off the state (the consumer protocol's form of checker/properties.py's
    ``exclusive_ownership``)."""
    seen: dict = {}
    for p in state.procs:
        c = p.consumer
        if p.status not in (RUNNING, PAUSED) or c.state not in IN_GROUP:
            continue
        for q in partitions_of(processing(system.cfg, c) & committable(state.group, c.member_id, c.epoch)):
            if q in seen:
                return (f"{system.cfg.partition_name(q)} owned by {member_name(seen[q])} and "
                        f"{member_name(c.member_id)}, both able to commit it (member id current, epoch "
                        f"{c.epoch} accepted)")
            seen[q] = c.member_id
    return None


@projected(lambda g: (g.target, tuple((m.member_id, m.topics, m.regex, m.resolved) for m in g.members), g.topics),
           lambda p: None)
def legal_target(system, state: State):
    """The target assignment gives every partition some member subscribes to, to exactly
    one member subscribed to its topic (TLA+ LegalTargetAssignment), once it is computed:
    not while the group epoch is ahead of it, nor while a member's new regular expression
    is not resolved (the coordinator computes the target when it is)."""
    group = state.group
    if group.epoch > group.target_epoch or not group.members or any(m.regex and not m.resolved
                                                                   for m in group.members):
        return None
    given = 0
    for mid, parts in group.target:
        m = find(group, mid)
        if m is None:
            return f"the target assigns {_names(system, parts)} to {member_name(mid)}, not a member"
        if parts & given:
            return f"the target assigns {_names(system, parts & given)} twice"
        if parts & ~subscribed_partitions(system.cfg, group, m):
            return (f"the target assigns {_names(system, parts & ~subscribed_partitions(system.cfg, group, m))} to "
                    f"{member_name(mid)}, which does not subscribe to it")
        given |= parts
    wanted = union(subscribed_partitions(system.cfg, group, m) for m in group.members)
    if wanted & ~given:
        return f"the target leaves {_names(system, wanted & ~given)} unassigned"
    return None


@projected(lambda g: (g.partition_epochs, tuple((m.member_id, m.assigned, m.revoking) for m in g.members)),
           lambda p: None)
def valid_partition_epochs(system, state: State):
    """A free partition (no epoch) sits in no member's assigned or pending-revocation set,
    and no partition sits in two members' (TLA+ ValidPartitionEpoch)."""
    group = state.group
    held = 0
    for m in group.members:
        mine = m.assigned | m.revoking
        if mine & held:
            return f"{_names(system, mine & held)} held by {member_name(m.member_id)} and another member"
        held |= mine
        for p in partitions_of(mine):
            if group.partition_epochs[p] == FREE:
                return (f"{system.cfg.partition_name(p)} is free (no partition epoch) but held by "
                        f"{member_name(m.member_id)}")
    return None


@projected(lambda g: (g.target_epoch, g.target),
           lambda p: (p.consumer.member_id, p.consumer.epoch, p.consumer.owned) if p.status in (RUNNING, PAUSED) else None)
def valid_member_epoch(system, state: State):
    """A client at the target assignment epoch owns nothing targeted to another member
    (TLA+ ValidMemberEpoch: once at the target epoch it has released what moved)."""
    group = state.group
    for p in state.procs:
        if p.status not in (RUNNING, PAUSED):
            continue
        c = p.consumer
        if c.epoch != group.target_epoch or c.epoch <= 0:
            continue
        for mid, parts in group.target:
            if mid != c.member_id and parts & c.owned:
                return (f"{member_name(c.member_id)} at the target epoch {c.epoch} owns {_names(system, parts & c.owned)}, "
                        f"targeted to {member_name(mid)}")
    return None


@projected(lambda g: g, lambda p: None)
def valid_stable_group(system, state: State):
    """A Stable group has every member Stable at the group epoch with nothing pending
    revocation and its target assigned (TLA+ ValidStableGroupState), but the target's
    partitions of topics it stopped subscribing to (KAFKA-19431)."""
    group = state.group
    if not settled(group):
        return None
    for m in group.members:
        target = target_of(group, m.member_id) & subscribed_partitions(system.cfg, group, m)
        if m.state != MemberState.STABLE or m.epoch != group.epoch or m.revoking or m.assigned != target:
            return (f"the group is Stable but {member_name(m.member_id)} is {m.state.name} at epoch {m.epoch} "
                    f"(group epoch {group.epoch})")
    return None


@projected(lambda g: (g.epoch, g.target_epoch, bool(g.members), tuple(m.epoch for m in g.members)), lambda p: None)
def epochs_ordered(system, state: State):
    """Every member epoch ≤ the target assignment epoch ≤ the group epoch, equal when the
    group is empty (KAFKA-20442)."""
    group = state.group
    if group.target_epoch > group.epoch:
        return f"target assignment epoch {group.target_epoch} ahead of the group epoch {group.epoch}"
    if not group.members and group.target_epoch != group.epoch:
        return f"the empty group's target assignment epoch {group.target_epoch} is not its epoch {group.epoch}"
    for m in group.members:
        if m.epoch > group.target_epoch:
            return (f"{member_name(m.member_id)} at epoch {m.epoch}, ahead of the target assignment epoch "
                    f"{group.target_epoch}")
    return None


@on_groups
def epochs_monotonic(system, state: State, action, nxt: State):
    """Epochs only grow but on a reset (TLA+ GcSideMemberEpochIsMonotonic): the group and
    target assignment epochs; a member's epoch at the coordinator, but to -2 (a static
    member's temporary leave) or 0 (its rejoin)."""
    g, h = state.group, nxt.group
    if h.epoch < g.epoch or h.target_epoch < g.target_epoch:
        return f"the group epochs went from {g.epoch}/{g.target_epoch} to {h.epoch}/{h.target_epoch}"
    before = _members(g)
    for m in h.members:
        old = before.get(m.member_id)
        if old is not None and 0 < m.epoch < old.epoch:
            return f"{member_name(m.member_id)}'s epoch went from {old.epoch} to {m.epoch} at the coordinator"
    return None


def _held_by_others(group, mid: int) -> int:
    return union(m.assigned | m.revoking for m in group.members if m.member_id != mid)


@on_groups
def grant_after_release(system, state: State, action, nxt: State):
    """A partition is added to a member's assignment only once no other member holds it
    (assigned or pending revocation): reconciliation's release rule."""
    g, h = state.group, nxt.group
    before = _members(g)
    for m in h.members:
        old = before.get(m.member_id)
        added = m.assigned & ~(old.assigned | old.revoking if old is not None else 0)
        taken = added & _held_by_others(g, m.member_id)
        if taken:
            return f"{_names(system, taken)} assigned to {member_name(m.member_id)} before its owner released it"
    return None


@on_groups
def unreleased_justified(system, state: State, action, nxt: State):
    """A member waits in UNRELEASED_PARTITIONS only for partitions of its target that
    another member holds (CurrentAssignmentBuilder: a member's own pending revocations are
    not unreleased, KAFKA-19449)."""
    g, h = state.group, nxt.group
    before = _members(g)
    for m in h.members:
        old = before.get(m.member_id)
        if m.state != MemberState.UNRELEASED_PARTITIONS or old == m:
            continue
        waiting = target_of(h, m.member_id) & ~m.assigned
        if not waiting & _held_by_others(g, m.member_id):
            return (f"{member_name(m.member_id)} waits in UNRELEASED_PARTITIONS for {_names(system, waiting)}, which "
                    f"no other member holds")
    return None


@projected(lambda g: g, lambda p: None)
def subscribed_only(system, state: State):
    """No member is assigned a partition of a topic it does not subscribe to (its pending
    revocations aside): a subscription change takes the partitions back at once
    (KAFKA-19431), a regular expression not resolved yet matching nothing."""
    group = state.group
    for m in group.members:
        extra = m.assigned & ~subscribed_partitions(system.cfg, group, m)
        if extra:
            return f"{member_name(m.member_id)} is assigned {_names(system, extra)}, of a topic it does not subscribe to"
    return None


def not_fenced_by_own_instance(system, state: State, action, nxt: State):
    """A static member's heartbeat under the member id that holds its instance id is never
    refused for that instance id (UNRELEASED_INSTANCE_ID or FENCED_INSTANCE_ID): its own
    join, retried after a lost response or a fencing, is its own (apache/kafka PR #23542)."""
    if action.kind != "deliver" or type(action.detail) is not ConsumerGroupHeartbeat or not action.detail.instance_id:
        return None
    holder = find_instance(state.group, action.detail.instance_id)
    if holder is None or holder.member_id != action.detail.member_id:
        return None
    r = nxt.procs[action.slot].responses[-1:] if nxt.procs[action.slot].status in (RUNNING, PAUSED) else ()
    if r and type(r[0]) is ConsumerGroupHeartbeatResponse and r[0].error in (Error.UNRELEASED_INSTANCE_ID,
                                                                              Error.FENCED_INSTANCE_ID):
        return f"{member_name(holder.member_id)} was answered {r[0].error.name} for its own instance id"
    return None


@projected(lambda g: None, lambda p: (p.consumer.state, p.consumer.owned) if p.status in (RUNNING, PAUSED) else None)
def lost_means_stopped(system, state: State):
    """A client told it is fenced processes nothing while its onPartitionsLost runs: the lost
    partitions are already another member's to take (KAFKA-20321)."""
    for p in state.procs:
        if p.status in (RUNNING, PAUSED) and p.consumer.state == ClientState.FENCED and p.consumer.owned:
            return (f"{member_name(p.consumer.member_id)} is fenced but still processes "
                    f"{_names(system, p.consumer.owned)}")
    return None


def _fewest_moves(counts: list, total: int) -> int:
    """The fewest partitions a balanced assignment of ``total`` over ``len(counts)``
    members takes from members holding ``counts``: each keeps up to the floor quota, and
    the ``total mod members`` extra places go first to members holding more than it."""
    quota, extras = divmod(total, len(counts))
    over = sum(max(0, n - quota) for n in counts)
    return over - min(extras, sum(1 for n in counts if n > quota))


@on_groups
def sticky_target(system, state: State, action, nxt: State):
    """A new uniform target over members with one subscription takes from the members
    only what balance requires (UniformAssignor's stickiness; KAFKA-18688)."""
    g, h = state.group, nxt.group
    if h.target_epoch == g.target_epoch or not h.members or system.cfg.assignor != "uniform":
        return None
    subs = {subscribed_partitions(system.cfg, h, m) for m in h.members}
    if len(subs) != 1:
        return None
    everything = subs.pop()
    old = dict(g.target)
    counts = [bin(old.get(m.member_id, 0) & everything).count("1") for m in h.members]
    moved = sum(bin(old.get(m.member_id, 0) & everything & ~target_of(h, m.member_id)).count("1") for m in h.members)
    least = _fewest_moves(counts, bin(everything).count("1"))
    if moved > least:
        return f"the new target moves {moved} partitions where {least} would balance the group"
    return None


@projected(lambda g: g, lambda p: (p.consumer.member_id, p.consumer.state, p.consumer.epoch, p.consumer.owned)
           if p.status == RUNNING else None)
def converged(system, state: State):
    """The goal of ``converges``: the group Stable, and every running client a member,
    Stable at the group epoch, owning its target assignment; a client that gave up on a
    fatal error (FATAL: its application sees the exception) is out of the group as a
    crashed one is."""
    group = state.group
    if group.members and not settled(group):
        return f"the group is {'ASSIGNING' if group.epoch > group.target_epoch else 'RECONCILING'}"
    for p in state.procs:
        if p.status != RUNNING or p.consumer.state == ClientState.FATAL:
            continue
        c = p.consumer
        m = find(group, c.member_id)
        if (m is None or c.state != ClientState.STABLE or c.epoch != group.epoch or c.owned != m.assigned
                or m.assigned != target_of(group, m.member_id)):
            return f"{member_name(c.member_id)} is {c.state.name} at epoch {c.epoch} (group epoch {group.epoch})"
    return None


def _timed(system) -> bool:
    return _consumer_protocol(system) and system.timing is not None


def joins_in_time(system, state: State):
    """Timed (K3, KAFKA-19233): a running member that joins, a heartbeat at member epoch 0 (its
    first, or a rejoin after a fencing or a lost response), is in the group, a response giving it a
    member epoch, within the heartbeat interval: the coordinator accepts every join at once, that of
    a member id it still holds at a later epoch too, so no member waits out its own session timeout
    to get back in. Read from the checker's history (``Proc.joining``: the ticks since the join,
    kept across the fencings of the member's rejoins; a pause ends it) and clock, not from the rule."""
    bound = system.timing.heartbeat_ticks
    for s, p in enumerate(state.procs):
        if p.joining - 1 > bound:
            c = p.consumer
            left = timed.session_left(state.group, c.member_id, timed.CONSUMER)
            held = (f"the coordinator still holds it, its session {left} tick(s) from expiring" if left is not None
                    else "the coordinator no longer holds it")
            return (f"{member_name(c.member_id)} (slot {s}) joined at member epoch 0 {p.joining - 1} ticks "
                    f"({(p.joining - 1) * system.timing.tick_ms // 1000} s) ago and is still out of the group "
                    f"({c.state.name}), more than the heartbeat interval ({bound} tick(s)): {held}")
    return None


PROPERTIES = (
    Property("no_double_ownership", "invariant",
             "no partition owned by the clients of two group members (TLA+ NoDoubleClientAssignment)",
             _consumer_protocol, no_double_ownership),
    Property("exclusive_ownership", "invariant",
             "no partition owned by two live clients that can both commit it at one instant (member id and epoch "
             "current; K11)", _consumer_protocol, exclusive_ownership),
    Property("exclusive_commits", "invariant",
             "no partition for which the coordinator accepted OffsetCommits from two processes while both owned it "
             "(member epochs fence a stale one)", _consumer_protocol, exclusive_commits),
    Property("exclusive_processing", "invariant",
             "no partition processed by two live processes (breaks with zombies: a paused member's session ends "
             "before it knows)", lambda system: _consumer_protocol(system) and "pause" in system.faults,
             exclusive_processing),
    Property("legal_target", "invariant", "the target assignment is total and disjoint (TLA+ LegalTargetAssignment)",
             _consumer_protocol, legal_target),
    Property("valid_partition_epochs", "invariant",
             "a free partition sits in no member's assigned or pending set (TLA+ ValidPartitionEpoch)",
             _consumer_protocol, valid_partition_epochs),
    Property("valid_member_epoch", "invariant",
             "a client at the target epoch owns nothing targeted to another member (TLA+ ValidMemberEpoch)",
             _consumer_protocol, valid_member_epoch),
    Property("valid_stable_group", "invariant",
             "a Stable group has every member Stable at the group epoch, nothing pending (TLA+ ValidStableGroupState)",
             _consumer_protocol, valid_stable_group),
    Property("epochs_ordered", "invariant", "member epoch ≤ target assignment epoch ≤ group epoch",
             _consumer_protocol, epochs_ordered),
    Property("epochs_monotonic", "invariant",
             "the coordinator's epochs only grow but on a reset (TLA+ GcSideMemberEpochIsMonotonic)",
             _consumer_protocol, None, epochs_monotonic),
    Property("grant_after_release", "invariant", "a partition is assigned only once its owner released it",
             _consumer_protocol, None, grant_after_release),
    Property("unreleased_justified", "invariant",
             "UNRELEASED_PARTITIONS only while another member holds a partition of the target (KAFKA-19449)",
             _consumer_protocol, None, unreleased_justified),
    Property("subscribed_only", "invariant",
             "no member assigned a partition of a topic it does not subscribe to (KAFKA-19431)",
             _consumer_protocol, subscribed_only),
    Property("not_fenced_by_own_instance", "invariant",
             "a static member is never refused for the instance id its own member id holds (PR #23542)",
             lambda system: _consumer_protocol(system) and bool(system.static), None, not_fenced_by_own_instance),
    Property("lost_means_stopped", "invariant", "a fenced client processes nothing (KAFKA-20321)",
             _consumer_protocol, lost_means_stopped),
    Property("sticky_target", "invariant", "a new uniform target moves no more than balance requires (KAFKA-18688)",
             lambda system: _consumer_protocol(system) and system.cfg.assignor == "uniform", None, sticky_target),
    Property("refinement", "invariant",
             "every step an action of spec/consumer_actions.py, every state within its invariant",
             _consumer_protocol, None, refinement),
    Property("joins_in_time", "invariant",
             "timed: a member that joins at member epoch 0 is in the group within the heartbeat interval, not "
             "kept out until its session ends (KAFKA-19233)", _timed, joins_in_time),
    Property("converges", "liveness",
             "once faults stop, the group converges: Stable, every running client Stable at the group epoch owning its "
             "target (TLA+ EventuallyConverges), under weak fairness", _consumer_protocol, converged),
)


# --- covers --------------------------------------------------------------------------


def _entered(state_name):
    def reached(system, s, a, n) -> bool:
        before = _members(s.group)
        return any(m.state == state_name and (before.get(m.member_id) is None or before[m.member_id].state != state_name)
                   for m in n.group.members)
    return reached


def _tolerated(system, s, a, n) -> bool:
    """A heartbeat at the member's previous epoch accepted (the response that bumped it was lost)."""
    if a.kind != "deliver" or type(a.detail) is not ConsumerGroupHeartbeat or a.detail.member_epoch <= 0:
        return False
    m = find(s.group, a.detail.member_id)
    reply = n.procs[a.slot].responses[-1:] if n.procs[a.slot].responses else ()
    return (m is not None and a.detail.member_epoch == m.previous_epoch < m.epoch and bool(reply)
            and type(reply[0]) is ConsumerGroupHeartbeatResponse and reply[0].error == Error.NONE)


def _timer(kind):
    return lambda system, s, a, n: a.kind == "timer" and type(a.detail) is kind and len(n.group.members) < len(s.group.members)


COVERS = (
    Cover("unrevoked_partitions", "a member entered UNREVOKED_PARTITIONS",
          _entered(MemberState.UNREVOKED_PARTITIONS), _consumer_protocol, ("deliver",)),
    Cover("unreleased_partitions", "a member entered UNRELEASED_PARTITIONS",
          _entered(MemberState.UNRELEASED_PARTITIONS), _consumer_protocol, ("deliver",)),
    Cover("rebalance_timeout_fenced", "a member that did not revoke was fenced by its rebalance timeout",
          _timer(MemberRebalanceTimeout), _consumer_protocol, ("timer",)),
    Cover("session_timeout_fenced", "a silent member was fenced by its session timeout", _timer(SessionTimeout),
          _consumer_protocol, ("timer",)),
    Cover("previous_epoch_tolerated", "a heartbeat at the member's previous epoch was accepted (a lost response)",
          _tolerated, lambda system: _consumer_protocol(system) and "pause" in system.faults, ("deliver",)),
    Cover("zombie_commit_refused", "a zombie's OffsetCommit was refused (UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH)",
          lambda system, s, a, n: type(a.detail) is OffsetCommitResponse and a.detail.error != Error.NONE,
          lambda system: _consumer_protocol(system) and "pause" in system.faults, ("reply",)),
    Cover("fenced_rejoined", "a fenced member rejoined at epoch 0", lambda system, s, a, n: True,
          lambda system: _consumer_protocol(system) and "pause" in system.faults, ("release",)),
)
