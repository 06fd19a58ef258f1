"""The properties checked on every explored state (names as in spec/SPEC.md, section 7;
``refinement``: section 8, checker/refinement.py).

Each property is a ``Property(name, kind, description, applies, check)``:
``check(system, state)`` returns None when it holds, otherwise a one-line
explanation; ``step(system, state, action, successor)``, where given, is checked on every
explored transition. ``kind`` is "invariant" (every reachable state and step),
"quiescent" (states where no action of the system's own, only the
environment's, is enabled) or "liveness": ◇□ once faults stop, ``check`` the
goal (None on goal states) and ``step``, if given, the steps that must stop
(see checker/engines/liveness.py, ``find_recurrence``); or, with ``lasso``, an
invariant part beside its own lasso search. Whether a commit is accepted is
the model's coordinator's decision (R9, recorded by the checker in
``Proc.shared``, R41), never recomputed here; ``exclusive_ownership`` reads
R9's conditions off the state instead.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from rebalance.model.config import KIP848
from rebalance.model.member import MemberPhase
from rebalance.model.protocol import (
    NO_GENERATION, NO_MEMBER_ID, CommitDue, Error, HeartbeatDue, Receive, connection, InitialRebalanceDelay, JoinGroup, JoinGroupResponse, Phase, RebalanceTimeout, SessionTimeout, SyncGroupResponse, SyncTimeout,
    epoch_of, instance_name, mask_of, member_name, partitions_of, slot_of, union,
)

from .engines import churn
from .refinement import refinement
from .render import lane
from .system import (
    CREATE_TOPIC, DELETE_CONNECTOR, DOWNGRADE, FAILOVER, PAUSED, REMOVE, RESTARTING, RUNNING, SUBSCRIBE, State, System,
    processing,
)


HEARTBEAT_DUE, COMMIT_DUE = HeartbeatDue(), CommitDue()


class Property(NamedTuple):
    name: str
    kind: str
    description: str
    applies: Callable  # (System) -> bool
    check: Callable | None  # (System, State) -> None | str; None for a step-only property
    step: Callable | None = None  # (System, State, Action, State) -> None | str, on every transition
    # liveness decided by its own lasso search, a module with ``summary`` and ``search``
    # (checker/engines/churn.py); ``check`` is then an invariant part
    lasso: object = None

    @property
    def invariant(self) -> Callable | None:
        """The check every reachable state must pass, if the property has one."""
        return self.check if self.kind == "invariant" or self.lasso else None

    @property
    def goal(self) -> Callable | None:
        """For a liveness property decided by ``find_recurrence``: None on goal states
        (no ``goal``: every state is one)."""
        return self.check if self.kind == "liveness" and not self.lasso else None


def _names(cfg, mask: int) -> str:
    return ", ".join(cfg.partition_name(p) for p in partitions_of(mask))


def _overlap(system: System, owners) -> str | None:
    """First partition held by two of ``owners`` ((member_id, mask), ...)."""
    seen = {}
    acc = 0
    for mid, mask in owners:
        clash = acc & mask
        if clash:
            p = partitions_of(clash)[0]
            other = next(m for m, mk in seen.items() if mk >> p & 1)
            return (f"{system.cfg.partition_name(p)} owned by {member_name(other)} and "
                    f"{member_name(mid)}")
        acc |= mask
        seen[mid] = mask
    return None


def _held_twice(state: State) -> bool:
    """Some partition is owned by two running or paused processes: the cheap test
    both exclusivity properties start from."""
    acc = 0
    for c in processing(state):
        if acc & c.owned:
            return True
        acc |= c.owned
    return False


def projected(group, proc):
    """Mark a state check whose verdict reads nothing of a state but ``group(its
    Group)`` and ``proc(each Proc)``, in slot order: the engines then decide it once
    per distinct projection (checker/engines/steps.py ``Projection``: the
    invariants on arrival; ``goal_holds`` the liveness goals)."""
    def mark(check):
        check.projection = (group, proc)
        return check
    return mark


def _owning(p):
    """What of a process the exclusivity checks read: its consumer's member id and
    owned partitions while it processes (running or paused, ``processing``), else None."""
    return (p.consumer.member_id, p.consumer.owned) if p.status == RUNNING or p.status == PAUSED else None


def _committing(g):
    """What of the Group ``exclusive_ownership`` reads: the generation and member ids
    while it accepts commits (Stable or PreparingRebalance, R9), else None."""
    if g.phase == Phase.STABLE or g.phase == Phase.PREPARING_REBALANCE:
        return g.generation, frozenset(m.member_id for m in g.members)
    return None


def _stable_owner(p):
    """What of a process ``exclusive_ownership`` reads: its member id, generation and
    owned partitions while it is live and Stable (the only phase it commits in, R41),
    else None."""
    if (p.status == RUNNING or p.status == PAUSED) and p.consumer.phase == MemberPhase.STABLE and p.consumer.owned:
        c = p.consumer
        return c.member_id, c.generation, c.owned
    return None


@projected(_committing, _stable_owner)
def exclusive_ownership(system: System, state: State):
    """No partition owned by two members that can both commit it at one instant:
    each live (running or paused), Stable (it commits only then, R41; the Java
    consumer's ``AbstractCoordinator.generationIfStable``, AbstractCoordinator.java:1046,
    Kafka 4.4.0, asked by ``ConsumerCoordinator.sendOffsetCommitRequest``), its member id in the
    group and its generation the group's, the group Stable or PreparingRebalance
    (R9, GroupCoordinator.handleCommitOffsets). The design brief's guarantee of
    generation fencing, read off the state by R9's own conditions, not by the
    model's commit rule. Without the member's phase it does not hold: a member
    answered its JoinGroup at the current generation still owns what its stale
    claim kept until its SyncGroup response arrives (spec/SPEC.md, section 7)."""
    committing = _committing(state.group)
    if committing is None:
        return None
    generation, members = committing
    owners = [(c.member_id, c.owned) for c in processing(state)
              if c.phase == MemberPhase.STABLE and c.owned and c.generation == generation and c.member_id in members]
    why = _overlap(system, owners)
    return why and f"{why}, both able to commit it (Stable, member id and generation {generation} current)"


@projected(lambda g: None, lambda p: (p.shared, p.consumer and p.consumer.member_id) if p.shared else None)
def exclusive_commits(system: System, state: State):
    """No partition for which the coordinator accepted OffsetCommits from two
    processes while both owned it without a break (R9, R41): read off the checker's
    history variable ``Proc.shared``, so it is about commits the model's coordinator
    actually accepted. Stronger than ``exclusive_ownership``: finding F3 breaks it,
    each commit accepted while the other member's generation or member id was stale
    (spec/SPEC.md, sections 7 and 11)."""
    procs = state.procs
    for s, p in enumerate(procs):
        if p.shared:
            for t in range(s + 1, len(procs)):
                q = procs[t]
                both = q.shared and p.shared[t] & q.shared[s]
                if both:
                    return (f"{_names(system.cfg, both)} owned by {member_name(p.consumer.member_id)} and "
                            f"{member_name(q.consumer.member_id)}, the OffsetCommits of both accepted")
    return None


@projected(lambda g: None, _owning)
def exclusive_processing(system: System, state: State):
    """No partition owned by two running or paused processes (breaks with zombies)."""
    if not _held_twice(state):
        return None
    return _overlap(system, [(c.member_id, c.owned) for c in processing(state) if c.owned])


@projected(lambda g: None, lambda p: (p.consumer.leader, p.consumer.phase, p.consumer.generation,
                                      p.consumer.member_id) if p.status == RUNNING or p.status == PAUSED else None)
def single_leader(system: System, state: State):
    """At most one member believes it leads each generation (R5)."""
    leaders = {}
    for c in processing(state):
        if c.leader and c.phase in (MemberPhase.SYNCING, MemberPhase.STABLE):
            if c.generation in leaders:
                return (f"{member_name(leaders[c.generation])} and {member_name(c.member_id)} "
                        f"both lead generation {c.generation}")
            leaders[c.generation] = c.member_id
    return None


# --- progress: what a Stable member may do now is answered as the rules say (R9, R10, R24, R41) -----------
# Every running member that is Stable with nothing in flight may send a Heartbeat or, owning partitions, an
# OffsetCommit at once. Rather than a transition for each (most change no state: a commit no other owner shares,
# a Heartbeat answered NONE), each such request is judged in every state where it could be sent: the member's
# handler gives the request and the coordinator's the answer, both the model's (the subjects), and the answer is
# held to the rule written here from spec/SPEC.md. A request sent in one state and delivered in a later one meets a
# group that this member, silent meanwhile, also reaches without having sent it: it is judged there too.


def _whole(group):
    return group


def _idle_member(p):
    """What a process's own request now depends on, if it is a running Stable member
    with nothing in flight (so it may heartbeat or commit at once), else None."""
    if p.status != RUNNING:
        return None
    c = p.consumer
    if c.phase != MemberPhase.STABLE or c.heartbeat_inflight or p.requests or p.responses:
        return None
    return p.epoch, c


def _answer(system: System, group, s: int, p, due):
    """``(request, error)``: what slot ``s``'s member sends on ``due`` (HeartbeatDue or
    CommitDue: the member's handler) and the coordinator's answer to it in ``group``
    (its handler); None if it sends nothing."""
    sent = System.requests_of(system.step_member(p.consumer, due)[1])
    if not sent:
        return None
    # not memoised: a Heartbeat's or an OffsetCommit's answer is computed faster than the Group is hashed
    replies = system.coordinator_step(group, Receive(connection(s, p.epoch), sent[0]))[1]
    return sent[0], replies[0].response.error


def heartbeat_rule(group, req) -> Error:
    """R10 with R24, as spec/SPEC.md states them, for a Heartbeat ``req`` in ``group``:
    with a group.instance.id, UNKNOWN_MEMBER_ID if nobody holds it and
    FENCED_INSTANCE_ID if another member id does; without, UNKNOWN_MEMBER_ID for an
    unknown member id; then ILLEGAL_GENERATION for another generation,
    REBALANCE_IN_PROGRESS in PreparingRebalance, NONE otherwise."""
    if req.group_instance_id:
        holder = instance_holder(group, req.group_instance_id)
        if holder is None:
            return Error.UNKNOWN_MEMBER_ID
        if holder.member_id != req.member_id:
            return Error.FENCED_INSTANCE_ID
    elif not any(m.member_id == req.member_id for m in group.members):
        return Error.UNKNOWN_MEMBER_ID
    if req.generation != group.generation:
        return Error.ILLEGAL_GENERATION
    return Error.REBALANCE_IN_PROGRESS if group.phase == Phase.PREPARING_REBALANCE else Error.NONE


JUDGED = 1 << 14  # states whose progress verdicts System.judged keeps: more than a batch's distinct projections


def _progress(system: System, state: State) -> tuple:
    """The verdicts of ``heartbeat_answered``, ``commit_accepted`` and
    ``commit_progress`` on ``state``, computed together (the three read the same
    requests) and kept in ``System.judged`` by the State's identity: the engines
    decide the three, with the same projection, on the same State objects of a
    batch, one after the other (checker/engines/steps.py ``Projection``)."""
    hit = system.judged.get(id(state))
    if hit is not None and hit[0] is state:
        return hit[1]
    if len(system.judged) >= JUDGED:
        system.judged.clear()
    verdicts = _judge_progress(system, state.group, state.procs, tuple(map(_idle_member, state.procs)))
    system.judged[id(state)] = (state, verdicts)
    return verdicts


def _judge_progress(system: System, group, procs, idle) -> tuple:
    heartbeat = accepted = progress = None
    for s, p in enumerate(procs):
        if idle[s] is None:
            continue
        c = p.consumer
        sent = _answer(system, group, s, p, HEARTBEAT_DUE)
        if sent is not None and heartbeat is None:
            req, error = sent
            want = heartbeat_rule(group, req)
            if error != want:
                heartbeat = (f"{member_name(req.member_id)}'s Heartbeat at generation {req.generation} is answered "
                             f"{error.name}, not {want.name} (R10) ({group.phase.name} generation {group.generation})")
        if not c.owned or not can_commit(group, c.member_id, c.generation):
            continue
        sent = _answer(system, group, s, p, COMMIT_DUE)
        if sent is None:
            progress = progress or f"{member_name(c.member_id)}, Stable in generation {c.generation}, commits nothing"
            continue
        req, error = sent
        if error == Error.NONE:
            continue
        if accepted is None and req.member_id == c.member_id and req.generation == c.generation:
            accepted = (f"{member_name(c.member_id)}, Stable in generation {c.generation} owning "
                        f"{_names(system.cfg, c.owned)}, has its OffsetCommit refused with {error.name}")
        progress = progress or (f"{member_name(c.member_id)}, Stable in generation {c.generation}, commits as "
                                f"{member_name(req.member_id)} at generation {req.generation}: refused with {error.name}")
    return heartbeat, accepted, progress


@projected(_whole, _idle_member)
def heartbeat_answered(system: System, state: State):
    """Every Heartbeat a Stable member may send now is answered as R10 and R24 say
    (``heartbeat_rule``): a stale one with the error its rule names, a current one
    NONE, whether or not the answer changes anything (a Heartbeat answered NONE
    without a change is no transition, but is judged here)."""
    return _progress(system, state)[0]


@projected(_whole, _idle_member)
def commit_accepted(system: System, state: State):
    """An OffsetCommit that a Stable member owning partitions sends under its current
    member id and generation, while it can commit (CanCommit: a member of the
    current generation, the group Stable or PreparingRebalance; R9), is accepted.
    A coordinator that refuses a legitimate commit (a static member's, one in
    PreparingRebalance) breaks it."""
    return _progress(system, state)[1]


@projected(_whole, _idle_member)
def commit_progress(system: System, state: State):
    """A Stable member owning partitions that can commit (CanCommit, R9) commits (R41)
    and has its commit accepted: also one that lost its membership and rejoined, whose
    generation is current again. A member that commits what the coordinator must
    refuse (a generation it reset, a member id it forgot) or does not commit breaks it."""
    return _progress(system, state)[2]


def on_groups(step):
    """Mark a step check whose verdict reads nothing but the action's kind and the
    two states' Groups: the engines memoise it per (action kind, group before,
    group after) (checker/engines/steps.py)."""
    step.on_groups = True
    return step


@on_groups
def generations_grow(system: System, state: State, action, nxt: State):
    """Generations only grow (R4), but for a failover, which resumes at the stored
    record's generation (R72): one a completed round reached, never an older one."""
    if action.kind == FAILOVER:
        record = state.group.record
        stored = record.generation if record is not None else 0
        if nxt.group.generation != stored:
            return f"a failover resumed the group at generation {nxt.group.generation}, not the stored {stored}"
        return None
    if nxt.group.generation < state.group.generation:
        return f"generation went from {state.group.generation} to {nxt.group.generation}"
    return None


@on_groups
def rebalanced(system: System, state: State, action, nxt: State):
    """The step completes a generation (the JoinGroup barrier, R4): a rebalance.
    Seen on the step as it happens, before the successor is renamed."""
    if nxt.group.generation > state.group.generation:
        return f"generation {nxt.group.generation} completes"
    return None


@projected(lambda g: tuple((m.member_id, m.assignment.partitions) for m in g.members)
           if g.phase == Phase.STABLE else None, _owning)
def revoke_before_assign(system: System, state: State):
    """In a Stable group no member is assigned a partition another group member still
    owns (R23; seed 000, Design I)."""
    group = state.group
    if group.phase != Phase.STABLE:
        return None
    members = {m.member_id for m in group.members}
    for m in group.members:
        given = m.assignment.partitions
        for c in processing(state):
            if c.member_id != m.member_id and c.member_id in members and c.owned & given:
                return (f"{_names(system.cfg, c.owned & given)} assigned to {member_name(m.member_id)} "
                        f"while {member_name(c.member_id)} still owns it")
    return None


@on_groups
def moves_within_allowance(system: System, state: State, action, nxt: State):
    """A Design III round moves, of each resource kind, at most what ``max_moves``
    pays for at that kind's cost, max(1, ⌊max_moves / cost⌋) (R67; seed 000,
    Design III): when the leader's assignment is stored (the group turns Stable),
    the owned resources (each claim resolved as R22 says, ``claim_owners``) given
    to no one of their owners number at most that per kind. Lost resources (R68)
    and contested claims are no moves."""
    group = nxt.group
    if group.phase != Phase.STABLE or state.group.phase == Phase.STABLE:
        return None
    owners, _ = claim_owners(group.members)
    given = {m.member_id: m.assignment.partitions for m in group.members}
    moved = mask_of(p for p, mid in owners.items() if not given[mid] >> p & 1)
    for kind, pool, cost in system.cfg.kinds:
        allowed = max(1, system.cfg.max_moves // cost)
        if (moved & pool).bit_count() > allowed:
            return (f"generation {group.generation} moves {_names(system.cfg, moved & pool)} of {kind}, more than "
                    f"the {allowed} max_moves = {system.cfg.max_moves} pays for at {cost} a move")
    return None


def claim_owners(members) -> tuple:
    """R22 as spec/SPEC.md states it, over the coordinator's member records
    (MemberMetadata): ``({partition: member id}, contested bitmask)``, each claimed
    partition owned by the one member claiming it at the highest generation of its
    claims, none when two or more tie there (contested)."""
    best: dict = {}  # partition -> (highest generation claiming it, [member ids claiming it there])
    for m in members:
        sub = m.subscription
        for p in partitions_of(sub.owned):
            top = best.get(p)
            if top is None or sub.generation > top[0]:
                best[p] = (sub.generation, [m.member_id])
            elif sub.generation == top[0]:
                top[1].append(m.member_id)
    owners = {p: mids[0] for p, (_, mids) in best.items() if len(mids) == 1}
    return owners, mask_of(p for p, (_, mids) in best.items() if len(mids) > 1)


def newest_echo(group) -> tuple:
    """R31: the newest echo the members' recorded subscriptions carry
    (``(generation, assigned, deferred, revoked, successive)``, the highest
    generation's), zeros when none does."""
    return max((m.subscription.echo for m in group.members if m.subscription.echo), default=(0, 0, 0, 0, 0))


def can_commit(group, mid: int, generation: int) -> bool:
    """CanCommit (spec/SPEC.md section 7; R9): the member id is a member, its
    generation the group's, the group Stable or PreparingRebalance."""
    return (group.phase in (Phase.STABLE, Phase.PREPARING_REBALANCE) and generation == group.generation
            and any(m.member_id == mid for m in group.members))


def instance_holder(group, iid: int):
    """The coordinator's record of the member holding group.instance.id ``iid``, or None."""
    return next((m for m in group.members if m.instance_id == iid), None)


@projected(lambda g: g.phase, lambda p: (p.consumer.owned, p.consumer.topics, p.consumer.metadata, p.consumer.member_id)
           if p.status == RUNNING else None)
def balanced(system: System, state: State):
    """None when the group is Stable (or Empty with no running member), every
    partition owned by exactly one running member and loads within one; else why not."""
    return imbalance(system.cfg, state.group.phase, [p.consumer for p in state.procs if p.status == RUNNING])


def imbalance(cfg, phase: Phase, live) -> str | None:
    """Why a group in ``phase`` whose running members are the Consumers ``live``
    is not balanced, or None (also used by checker/simulation.py). A deleted connector's
    resources (R81) are owned by nobody."""
    if not live:
        return None if phase in (Phase.EMPTY, Phase.DEAD) else f"no members but group {phase.name}"
    if phase != Phase.STABLE:
        return f"group {phase.name}, not Stable"
    owned = 0
    for c in live:
        if owned & c.owned:
            return f"{_names(cfg, owned & c.owned)} owned twice"
        owned |= c.owned
    if not cfg.uniform:
        return _imbalance_subscribed(cfg, live, owned, [c.owned.bit_count() for c in live])
    deleted = cfg.deleted(live[0].metadata) if cfg.deletable_connectors else 0  # R81: every worker read it
    if owned & deleted:
        return f"{_names(cfg, owned & deleted)} deleted but still run"
    missing = cfg.all_partitions & ~owned & ~deleted
    if missing:
        return f"{_names(cfg, missing)} owned by nobody"
    for kind, pool, _ in cfg.kinds:  # each resource kind balanced on its own (R66)
        loads = [(c.owned & pool).bit_count() for c in live]
        if max(loads) - min(loads) > 1:
            return f"unbalanced loads {sorted(loads)}" + (f" of {kind}" if cfg.connectors else "")
    return None


def _imbalance_subscribed(cfg, live, owned: int, loads: list) -> str | None:
    """R65, with differing subscriptions: every partition of an existing topic some
    member subscribes to is owned, and, under the sticky assignors, none could move
    from its owner to a member subscribed to its topic with a load two or more
    below (Kafka's balance for non-uniform subscriptions, AbstractStickyAssignor's
    GeneralAssignmentBuilder; RangeAssignor and RoundRobinAssignor make no such
    promise across topics)."""
    allowed = [cfg.partitions_of_topics(c.topics & c.metadata) for c in live]
    missing = union(allowed) & ~owned
    if missing:
        return f"{_names(cfg, missing)} owned by nobody"
    if cfg.assignor not in ("sticky", "cooperative-sticky"):  # range and roundrobin do not balance across topics
        return None
    for c, load in zip(live, loads):
        for other, room in zip(live, allowed):
            if other.owned.bit_count() < load - 1 and c.owned & room:
                return (f"unbalanced: {_names(cfg, c.owned & room)} of {member_name(c.member_id)} (load {load}) "
                        f"could go to {member_name(other.member_id)} (load {other.owned.bit_count()})")
    return None


def subscribed_only(system: System, state: State):
    """R61: no live member owns a partition of a topic it does not subscribe to."""
    for c in processing(state):
        stray = c.owned & ~system.cfg.partitions_of_topics(c.topics)
        if stray:
            return f"{member_name(c.member_id)} owns {_names(system.cfg, stray)}, not of its subscribed topics"
    return None


def _subscriptions(system: System) -> bool:
    return not system.cfg.uniform


def _deferred_subscriptions(system: System) -> bool:
    return system.cfg.deferred and not system.cfg.uniform


def new_partitions_at_once(system: System, state: State, action, nxt: State):
    """R64 (seed 000, Design II case (a)): a round defers only partitions lost with a
    departed member: assigned or deferred in the previous round (the newest echo,
    R31) and not released by a present member dropping its topic. Partitions of a
    new topic or of a new subscription are given out at once. Checked on the step
    that installs a round's assignment."""
    group = nxt.group
    if group.phase != Phase.STABLE or state.group.phase == Phase.STABLE or not group.members:
        return None
    deferred = max((m.assignment.echo for m in group.members if m.assignment.echo), default=(0, 0))[1]
    previous = newest_echo(group)
    released = union(m.subscription.released for m in group.members)
    wrong = deferred & (~(previous[1] | previous[2]) | released)
    if wrong:
        return (f"{_names(system.cfg, wrong)} deferred in generation {group.generation}, though not lost with a "
                f"departed member (a new topic or subscription)")
    return None


def unique_instance(system: System, state: State):
    """At most one member per group.instance.id (R25; KIP-345)."""
    seen = set()
    for m in state.group.members:
        if m.instance_id:
            if m.instance_id in seen:
                holders = [member_name(x.member_id) for x in state.group.members if x.instance_id == m.instance_id]
                return f"{instance_name(m.instance_id)} held by {' and '.join(holders)}"
            seen.add(m.instance_id)
    return None


def static_restart_no_rebalance(system: System, state: State, action, nxt: State):
    """A static member restarting within session.timeout.ms causes no rebalance and
    gets its assignment back (R26; KIP-345), to the end: from the delivery of its new
    process's JoinGroup (no member id, its group.instance.id) to a Stable group until
    that process is Stable again (``Proc.restarting``), no request of the slot's
    makes the group leave Stable (a restart answered with a stale generation fails
    its SyncGroup and rejoins, a few steps later: caught here), and the JoinGroup's
    own step keeps the group Stable at its generation with the member's stored
    assignment. Within the session timeout: timed (checker/timed.py), the coordinator
    last heard from the slot less than session.timeout.ms before (``Proc.quiet``,
    whatever the coordinator still records: a rebalance timeout that dropped the old
    member is caught); untimed (R21), its old member is still recorded."""
    if action.kind != "deliver" or nxt.procs[action.slot].restarting != RESTARTING:
        return None
    why = None
    if state.group.phase == Phase.STABLE and nxt.group.phase != Phase.STABLE:
        why = f"went {nxt.group.phase.name}"
    else:
        old = _static_rejoin(state, action)
        new = old and instance_holder(nxt.group, old.instance_id)
        if old is not None and (nxt.group.generation != state.group.generation or new is None
                                or new.assignment != old.assignment):
            why = f"went to generation {nxt.group.generation}" if new is not None else "lost the member"
    if why is None:
        return None
    return (f"{instance_name(system.instance_of(action.slot))} restarted within the session timeout and, on its "
            f"{type(action.detail).__name__}, the group {why}")


def _static_rejoin(state: State, action):
    """The old member record, if ``action`` delivers a JoinGroup from a restarted
    static member (unknown member id, known instance id) to a Stable group."""
    if action.kind != "deliver" or type(action.detail) is not JoinGroup or state.group.phase != Phase.STABLE:
        return None
    req = action.detail
    if req.member_id != NO_MEMBER_ID or not req.group_instance_id:
        return None
    return instance_holder(state.group, req.group_instance_id)


# --- the timed mode's properties (checker/timed.py): timers that fire in their window ---------------


@projected(lambda g: g.clock, lambda p: p.status == RUNNING and p.consumer.phase != MemberPhase.LEFT)
def bounded_rebalance(system: System, state: State):
    """Timed: a rebalance that no fault interrupts ends, the group Stable or Empty,
    within the rebalance timeout of its start (R4: the barrier's deadline; R5: a
    leader that rejoined; R8: whose SyncGroup comes at once): ``Clock.rebalancing``
    at most the rebalance timeout in ticks. "Never fires" and "fires too late"
    break it, and so does a barrier that completes on a leader that cannot assign.
    A group with no running process is left to its members' session timeouts."""
    clock = state.group.clock
    if clock is None or clock.rebalancing <= system.timing.rebalance_ticks:
        return None
    if not any(p.status == RUNNING and p.consumer.phase != MemberPhase.LEFT for p in state.procs):
        return None
    return (f"the group is still {state.group.phase.name} at generation {state.group.generation} "
            f"more than {system.timing.rebalance_ticks} ticks (the rebalance timeout) after it began rebalancing, "
            f"no fault since")


def timers_in_window(system: System, state: State, action, nxt: State):
    """Timed: no timer fires too early. A session timeout expels no member whose
    process is running and holds its member id (it heartbeats in time: R11, each
    request restarts the session), and the barrier's deadline passes no earlier
    than the rebalance timeout after the rebalance began (R4)."""
    if action.kind != "timer":
        return None
    event = action.detail
    if type(event) is SessionTimeout:
        mid = event.member_id
        expelled = any(m.member_id == mid for m in state.group.members) and not any(
            m.member_id == mid for m in nxt.group.members)
        if expelled and any(mid in System.speaks_for(state.group, s, p) for s, p in enumerate(state.procs)):
            return f"{member_name(mid)}'s session expired while its process runs and heartbeats"
    elif type(event) is RebalanceTimeout and 0 <= state.group.clock.rebalancing < system.timing.rebalance_ticks:
        return (f"the rebalance timeout passed {state.group.clock.rebalancing} ticks into the rebalance, before "
                f"its {system.timing.rebalance_ticks}")
    return None


def _timed(system: System) -> bool:
    return system.timing is not None


def bounded_deferral(system: System, state: State):
    """Once a member reports that the ScheduledRebalanceTimeout passed, the round it
    triggers gives out every partition that was deferred (R33; seed 000, Design II):
    untimed, the delay ends with the first report, and the partitions are owned
    again one round later, whatever leader changes happened meanwhile."""
    group = state.group
    if group.phase != Phase.STABLE or not any(m.subscription.scheduled == 0 for m in group.members):
        return None
    still = _deferred_before(group) & ~union(m.assignment.partitions for m in group.members)
    if still and system.cfg.deletable_connectors:  # R81: a deleted connector's resources are given to nobody
        still &= ~system.cfg.deleted(state.procs[0].metadata)
    if still and not system.cfg.uniform:  # R61, R62: a partition nobody in the group can take is given to nobody
        still &= system.cfg.partitions_of_topics(union(m.subscription.topics for m in group.members)
                                                 & state.procs[0].metadata)
    if still:
        return (f"{_names(system.cfg, still)} still deferred in generation {group.generation} "
                f"after the ScheduledRebalanceTimeout passed")
    return None


def _deferred_before(group) -> int:
    """The partitions deferred in the newest echo the members' subscriptions carry,
    as the leader of this round read them (R31)."""
    return newest_echo(group)[2]


def _always(system: System) -> bool:
    return True


def _consumers(system: System) -> bool:
    return not system.cfg.streams


def _streams(system: System) -> bool:
    return system.cfg.streams


# --- Streams (seed 001; spec/SPEC.md R45-R55) --------------------------------------


def learner_ready_before_active(system: System, state: State, action, nxt: State):
    """On the step that stores a round's assignment (the group turns Stable): a
    stateful task revoked from the member running it in order to go to a member
    learning it, only once that learner is ready (R48; seed 001: active tasks go
    "to instances with learner tasks that indicate ready"). Ready is what
    happened, not what the learner's user data says: its process finished the
    task's restore (``Proc.restored``, R55) or runs the task's standby (R55: a
    learner placed there is ready at once; R57: KIP-441 ranks a standby within
    acceptable.recovery.lag as caught up). A task no member runs goes to its
    learner at once (the seed's "Leader Transfer During Scaling"), which this
    does not forbid. KIP-441's assignor (R57-R60): its warmup replicas are the
    learners."""
    group = nxt.group
    if group.phase != Phase.STABLE or state.group.phase == Phase.STABLE:
        return None
    stateful = system.cfg.all_partitions & ~system.cfg.stateless
    ready = {}  # member id -> what its process has restored or runs the standby of
    for x in group.members:
        p = nxt.procs[slot_of(x.conn)]
        if p.epoch == epoch_of(x.conn) and (p.status == RUNNING or p.status == PAUSED) and p.consumer.streams:
            ready[x.member_id] = p.restored | p.consumer.streams.standby
    for m in group.members:
        revoked = m.subscription.owned & ~m.assignment.partitions & stateful
        if not revoked:
            continue
        for x in group.members:
            if x.member_id not in ready:  # its process is gone, and what it had restored with it
                continue
            learning = (x.assignment.streams or (0, 0))[0]
            early = revoked & learning & ~ready[x.member_id]
            if early and x.member_id != m.member_id:
                return (f"{_names(system.cfg, early)} revoked from {member_name(m.member_id)} in generation "
                        f"{group.generation} for {member_name(x.member_id)}, whose learner has not restored it")
    return None


def bounded_warmups(system: System, state: State):
    """In a Stable group under KIP-441's assignor, at most max.warmup.replicas warmup
    replicas (R58): learner tasks whose task some member runs in this generation. A
    learner of a task nobody runs is a move withheld for a round (R23), not a warmup."""
    group = state.group
    if group.phase != Phase.STABLE:
        return None
    running = union(m.assignment.partitions for m in group.members)
    warmups = sum(((m.assignment.streams or (0, 0))[0] & running).bit_count() for m in group.members)
    if warmups > system.cfg.max_warmup_replicas:
        return (f"{warmups} warmup replicas in generation {group.generation}, above max.warmup.replicas "
                f"{system.cfg.max_warmup_replicas}")
    return None


def _high_availability(system: System) -> bool:
    return system.cfg.streams and system.cfg.assignor == "high-availability"


def no_learner(system: System, state: State):
    """None when no running member learns a task (``learner_progress``'s goal, R49)."""
    for p in state.procs:
        if p.status == RUNNING and p.consumer.streams and p.consumer.streams.learning:
            return f"{member_name(p.consumer.member_id)} still learns {_names(system.cfg, p.consumer.streams.learning)}"
    return None


def no_leaving_member(system: System, state: State):
    """None when no running member is marked leaving (``bounded_scale_down``'s goal, R54)."""
    for p in state.procs:
        if p.status == RUNNING and p.consumer.streams and p.consumer.streams.leaving:
            return f"{member_name(p.consumer.member_id)} is leaving and still runs"
    return None


def shuffled(system: System, state: State, action, nxt: State):
    """The step changes a member's active or learner tasks: what must stop once
    membership stops changing (``no_endless_shuffle``; seed 001, Version 1.0's
    "endless resource shuffling")."""
    if action.kind != "reply":
        return None
    before, after = state.procs[action.slot].consumer, nxt.procs[action.slot].consumer
    if after is None or (before.owned == after.owned and before.streams.learning == after.streams.learning):
        return None
    return (f"{member_name(after.member_id)} now runs {_names(system.cfg, after.owned) or 'nothing'} and learns "
            f"{_names(system.cfg, after.streams.learning) or 'nothing'}")


def _cooperative(system: System) -> bool:
    """Cooperative members, or a rolling upgrade to them (R79)."""
    return system.cfg.cooperative or bool(system.stages)


def _upgrading(system: System) -> bool:
    return bool(system.stages)


def refused_protocol(system: System, state: State, action, nxt: State):
    """R80: a member is refused with INCONSISTENT_GROUP_PROTOCOL: its assignor list
    shares no protocol with some member of the group (GroupCoordinator.handleJoinGroup,
    GroupMetadata.supportsProtocols), and the consumer stops
    (InconsistentGroupProtocolException is fatal to poll)."""
    if _reply(action, JoinGroupResponse, Error.INCONSISTENT_GROUP_PROTOCOL):
        def listed(assignors) -> str:
            return f"[{', '.join(assignors)}]"
        others = sorted({listed(m.subscription.assignors) for m in state.group.members})
        return (f"{lane(action.slot)}'s JoinGroup with {listed(state.procs[action.slot].consumer.assignors)} was "
                f"refused with INCONSISTENT_GROUP_PROTOCOL (the group's members list {', '.join(others)})")
    return None


def _upgraded(system, s, a, n) -> bool:
    """R80: the upgrade is over: every slot on the last assignor list, the group Stable
    on its first choice, every running process a member of the current generation."""
    path, g = system.stages, n.group
    if g.phase != Phase.STABLE or g.protocol != path[-1][0] or any(p.stage != len(path) - 1 for p in n.procs):
        return False
    running = [p.consumer for p in n.procs if p.status == RUNNING]
    return bool(running) and len(running) == len(g.members) and all(
        c.phase == MemberPhase.STABLE and c.generation == g.generation and c.assignors == path[-1] for c in running)


def _mixed_protocols(system, s, a, n) -> bool:
    """R78: a Stable generation whose members run different RebalanceProtocols (eager
    [cooperative-sticky, range] beside cooperative [cooperative-sticky])."""
    g = n.group
    return g.phase == Phase.STABLE and len({runs_cooperative(m.subscription.assignors)
                                             for m in g.members if m.subscription.assignors}) > 1


def runs_cooperative(assignors: tuple) -> bool:
    """R77: a consumer runs the cooperative protocol only when every assignor of its
    partition.assignment.strategy supports it, and of the built-in ones only the
    CooperativeStickyAssignor does (ConsumerPartitionAssignor.supportedProtocols)."""
    return all(a == "cooperative-sticky" for a in assignors)


def _static(system: System) -> bool:
    return bool(system.static)


def _deferred(system: System) -> bool:
    return system.cfg.deferred


def _incremental(system: System) -> bool:
    return system.cfg.protocol == "incremental"


def _zombies(system: System) -> bool:
    """Membership is lost with partitions in hand only by a silent live process: a paused one."""
    return "pause" in system.faults


def _can_empty(system: System) -> bool:
    """The group can empty and be joined again: every member leaves or crashes, then one (re)starts."""
    return (system.cfg.initial_rebalance_delay and system.max_faults > system.members
            and bool(system.faults & {"leave", "crash"}) and bool(system.faults & {"join", "restart"}))


PROPERTIES = (
    Property("exclusive_ownership", "invariant",
             "no partition is owned by two members that can both commit it at one instant (Stable, member id "
             "and generation current; R9, R41)", _consumers, exclusive_ownership),
    Property("exclusive_commits", "invariant",
             "no partition has OffsetCommits accepted from two members while both owned it without a break "
             "(R9, R41)", _consumers, exclusive_commits),
    Property("exclusive_active", "invariant",
             "no task has OffsetCommits accepted from two members while both ran it as an active task without a "
             "break (R9, R41 over tasks; exclusive_commits under streams)", _streams, exclusive_commits),
    Property("learner_ready_before_active", "invariant",
             "a task is revoked from the member running it for a learner only once that learner has restored it "
             "(R48, R55)", _streams, None, learner_ready_before_active),
    Property("bounded_warmups", "invariant",
             "at most max.warmup.replicas warmup replicas at a time (KIP-441's assignor, R58)",
             _high_availability, bounded_warmups),
    Property("exclusive_processing", "invariant",
             "no partition is processed by two live (running or paused) members", _always, exclusive_processing),
    Property("commit_accepted", "invariant",
             "an OffsetCommit of a Stable owner at its current member id and generation, while it can commit, is "
             "accepted (R9)", _always, commit_accepted),
    Property("commit_progress", "invariant",
             "a Stable owner that can commit commits and is accepted, also after losing its membership and "
             "rejoining (R41, R9)", _always, commit_progress),
    Property("heartbeat_answered", "invariant",
             "every Heartbeat a Stable member may send is answered as R10 and R24 say, a stale one with the error "
             "its rule names, whether or not the answer changes anything", _always, heartbeat_answered),
    Property("single_leader", "invariant",
             "at most one member leads each generation; generations only grow",
             _always, single_leader, generations_grow),
    Property("revoke_before_assign", "invariant",
             "a partition is never assigned to a member while another member still owns it",
             _cooperative, revoke_before_assign),
    Property("upgrade_compatible", "invariant",
             "no member of a rolling upgrade is refused with INCONSISTENT_GROUP_PROTOCOL (R80)",
             _upgrading, None, refused_protocol),
    Property("unique_instance", "invariant",
             "at most one member per group.instance.id (a duplicate is fenced)", _static, unique_instance),
    Property("static_restart_no_rebalance", "invariant",
             "a static member restarting within session.timeout.ms causes no rebalance and gets its "
             "assignment back, until it is Stable again", _static, None, static_restart_no_rebalance),
    Property("bounded_rebalance", "invariant",
             "timed: a rebalance that no fault interrupts ends within the rebalance timeout", _timed,
             bounded_rebalance),
    Property("timers_in_window", "invariant",
             "timed: no timer fires too early (a session never lapses while its member heartbeats; the barrier's "
             "deadline never before the rebalance timeout)", _timed, None, timers_in_window),
    Property("bounded_deferral", "liveness",
             "a lost partition is owned again in the round after its ScheduledRebalanceTimeout passes, and "
             "never stays unowned forever while time passes, whatever leader changes happen",
             _deferred, bounded_deferral, lasso=churn),
    Property("moves_within_allowance", "invariant",
             "a Design III round moves, of each resource kind, at most what max_moves pays for at the kind's "
             "cost (R67)", _incremental, None, moves_within_allowance),
    Property("subscribed_only", "invariant",
             "no member owns a partition of a topic it does not subscribe to (R61)", _subscriptions, subscribed_only),
    Property("new_partitions_at_once", "invariant",
             "Design II defers only partitions lost with a departed member: those of a new topic or "
             "subscription are given out at once (R64; seed 000, Design II case (a))",
             _deferred_subscriptions, None, new_partitions_at_once),
    Property("refinement", "invariant",
             "every step is an action of the declarative spec (spec/actions.py) and every state satisfies "
             "its inductive invariant", _always, None, refinement),
    Property("quiescent_balance", "quiescent",
             "when nothing but the environment (a fault) can act, the group is Stable, every partition owned "
             "once, loads within one", _always, balanced),
    Property("eventual_balance", "liveness",
             "once faults stop, every fair execution reaches a balanced Stable group and stays there "
             "(◇□ balanced)", _always, balanced),
    Property("no_rebalance_storm", "liveness",
             "once faults stop, every fair execution completes finitely many generations (◇□ no rebalance)",
             _always, None, rebalanced),
    Property("learner_progress", "liveness",
             "once faults stop, every learner task is eventually promoted or dropped (◇□ no learner; R49, R55)",
             _streams, no_learner),
    Property("bounded_scale_down", "liveness",
             "once faults stop, every member marked leaving shuts down (R54: assigned nothing, or its scale-down "
             "timeout passes, a bounded number of rounds later)", _streams, no_leaving_member),
    Property("no_endless_shuffle", "liveness",
             "once faults stop, the members' active and learner tasks stop changing (◇□ no move; seed 001, "
             "Version 1.0)", _streams, None, shuffled),
)


def applicable(system: System) -> tuple:
    return tuple(p for p in _table(system, "PROPERTIES") if p.applies(system))


def _table(system: System, name: str) -> tuple:
    """The properties (``name`` "PROPERTIES") or covers ("COVERS") of the system's protocol:
    KIP-848's consumer protocol has its own (checker/consumer_properties.py), and so has its
    online migration (checker/migration_properties.py)."""
    if system.cfg.protocol == KIP848 and system.cfg.migration:
        from . import migration_properties
        return getattr(migration_properties, name)
    if system.cfg.protocol == KIP848:
        from . import consumer_properties
        return getattr(consumer_properties, name)
    return globals()[name]


# --- covers: named situations whose reaching shows a pass is not a pass over nothing ---


class Cover(NamedTuple):
    name: str
    description: str
    reached: Callable  # (System, State, Action, State) -> bool, on every step
    applies: Callable = _always
    kinds: tuple = ()  # the action kinds that can reach it (the engines ask it of no other step); (): any


def _reply(action, kind, error=None) -> bool:
    return (action.kind == "reply" and type(action.detail) is kind
            and (error is None or action.detail.error == error))


def _consumer(state: State, slot: int):
    return state.procs[slot].consumer


def _revoked_and_rejoined(system, s, a, n) -> bool:
    if not _reply(a, SyncGroupResponse, Error.NONE):
        return False
    before, after = _consumer(s, a.slot), _consumer(n, a.slot)
    return bool(before.owned & ~after.owned) and after.phase == MemberPhase.JOINING


def _lost(system, s, a, n) -> bool:
    if a.kind != "reply":
        return False
    before, after = _consumer(s, a.slot), _consumer(n, a.slot)
    return before.owned != 0 and after.owned == 0 and after.generation == NO_GENERATION


def _zombie_fenced(system, s, a, n) -> bool:
    for p in n.procs:
        if p.status == PAUSED and p.consumer.owned and not can_commit(n.group, p.consumer.member_id,
                                                                      p.consumer.generation):
            return True
    return False


def _backed_off(group) -> bool:
    """A stored assignment of a round that held nothing back, marked revoking, with a
    rebalance scheduled: only a round held back by the backoff is (R40)."""
    return any(m.assignment.scheduled and not m.assignment.echo[1] and m.assignment.echo[2]
               for m in group.members if m.assignment.echo)


def _can_back_off(system: System) -> bool:
    """Two revoking rounds in a row need two changes of membership after the first
    imbalance: a budget of 3 with a member able to come (join or restart)."""
    return _deferred(system) and system.max_faults >= 3 and bool(system.faults & {"join", "restart"})


def _failover_retried(system, s, a, n) -> bool:
    return a.kind == FAILOVER and any(p.requests or p.responses for p in s.procs) and any(p.requests for p in n.procs)


def _downgraded(system, s, a, n) -> bool:
    """A dynamic member of a static slot joined (its JoinGroup answered)."""
    if not _reply(a, JoinGroupResponse, Error.NONE) or a.slot not in system.static:
        return False
    c = _consumer(n, a.slot)
    return not c.group_instance_id and c.member_id != NO_MEMBER_ID


def _timer(kind):
    return lambda system, s, a, n: a.kind == "timer" and type(a.detail) is kind


COVERS = (
    Cover("leader_change", "a generation completed with a new leader",
          lambda system, s, a, n: bool(s.group.leader and n.group.leader and s.group.leader != n.group.leader)),
    Cover("revoked_and_rejoined", "a member revoked partitions on an assignment and rejoined (Design I)",
          _revoked_and_rejoined),
    Cover("sync_rebalance_in_progress", "a SyncGroup was answered REBALANCE_IN_PROGRESS",
          lambda system, s, a, n: _reply(a, SyncGroupResponse, Error.REBALANCE_IN_PROGRESS)),
    Cover("partitions_lost", "a member lost its partitions with its membership", _lost, _zombies),
    Cover("session_timeout", "a silent member expired", _timer(SessionTimeout)),
    Cover("rebalance_timeout", "the JoinGroup barrier's deadline removed members", _timer(RebalanceTimeout)),
    Cover("sync_timeout", "members that did not send SyncGroup were removed", _timer(SyncTimeout)),
    Cover("initial_rebalance_delay", "an emptied group waited group.initial.rebalance.delay.ms (KIP-134)",
          _timer(InitialRebalanceDelay), _can_empty),
    Cover("zombie_fenced", "a paused member still owns partitions its commits are refused for", _zombie_fenced,
          _zombies),
    Cover("deferral_started", "a leader held lost partitions back and scheduled a rebalance",
          lambda system, s, a, n: any(m.assignment.scheduled for m in n.group.members), _deferred),
    Cover("returning_member_recognised", "deferred partitions went to a member that came back with nothing",
          lambda system, s, a, n: _returning(s, n), _deferred),
    Cover("leader_change_during_deferral", "the leader changed while a rebalance was scheduled",
          lambda system, s, a, n: bool(s.group.leader and n.group.leader != s.group.leader and any(
              p.consumer is not None and p.consumer.scheduled >= 0 for p in s.procs)), _deferred),
    Cover("revocation_backed_off", "a revoking round right after another revoked nothing and scheduled a "
          "rebalance (KAFKA-12495)", lambda system, s, a, n: _backed_off(n.group), _can_back_off),
    Cover("moves_capped", "a Design III round moved max_moves partitions and scheduled a rebalance to move "
          "the rest (R34)", lambda system, s, a, n: any(m.assignment.scheduled and not (m.assignment.echo and m.assignment.echo[1])
                                     for m in n.group.members), _incremental),  # scheduled, nothing deferred (R68)
    Cover("static_rejoin", "a static member rejoined a Stable group under a new process",
          lambda system, s, a, n: _static_rejoin(s, a) is not None, _static),
    Cover("mixed_protocols", "a Stable generation mixed eager and cooperative members (R78)", _mixed_protocols,
          _upgrading),
    Cover("upgraded_cooperative", "the rolling upgrade ended: every member on [cooperative-sticky], the group "
          "Stable on it (R80)", _upgraded, _upgrading),
    Cover("subscription_revoked", "a member revoked the partitions of a topic it stopped subscribing to (R63)",
          lambda system, s, a, n: a.kind == SUBSCRIBE and n.procs[a.slot].consumer.owned != s.procs[a.slot].consumer.owned,
          lambda system: SUBSCRIBE in system.faults and bool(system.cfg.resubscriptions)),
    Cover("new_topic_assigned", "a partition of a topic created mid-run was assigned (R62)",
          lambda system, s, a, n: _new_topic_owned(system, s, n),
          lambda system: CREATE_TOPIC in system.faults and bool(system.cfg.created_topics)),
    Cover("deleted_connector_revoked", "a worker stopped a connector or task deleted from the configuration (R81)",
          lambda system, s, a, n: _deleted_revoked(system, s, a, n),
          lambda system: DELETE_CONNECTOR in system.faults and bool(system.cfg.deletable_connectors)),
    Cover("admin_removal", "an admin client removed a static member by group.instance.id and the group "
          "rebalanced (R71)", lambda system, s, a, n: a.kind == REMOVE and n.group.phase != s.group.phase,
          lambda system: REMOVE in system.faults and bool(system.static)),
    Cover("coordinator_failover", "the coordinator failed over to its stored record while a request or response "
          "was in flight, and a member retried (R72)", _failover_retried, lambda system: FAILOVER in system.faults),
    Cover("static_downgrade", "a static member's process restarted without group.instance.id and joined as a "
          "dynamic member (R73)", _downgraded, lambda system: DOWNGRADE in system.faults and bool(system.static)),
)


def _new_topic_owned(system: System, s: State, n: State) -> bool:
    new = system.cfg.partitions_of_topics(system.cfg.created_topics)
    return bool(new & union(c.owned for c in processing(n)) & ~union(c.owned for c in processing(s)))


def _deleted_revoked(system: System, s: State, a, n: State) -> bool:
    """A reply made its member give up resources its metadata shows deleted (R81)."""
    if a.kind != "reply":
        return False
    before, after = _slot_consumers(s, a, n)
    return before is not None and after is not None and bool(
        before.owned & ~after.owned & system.cfg.deleted(after.metadata))


def _slot_consumers(s: State, a, n: State) -> tuple:
    return s.procs[a.slot].consumer, n.procs[a.slot].consumer


def _learner_promoted(system, s, a, n) -> bool:
    if not _reply(a, SyncGroupResponse, Error.NONE):
        return False
    before, after = _slot_consumers(s, a, n)
    return bool(after.owned & ~before.owned & before.streams.learning)


def _stateless_moved(system, s, a, n) -> bool:
    """A member that stays revokes a stateless task: it moves in KIP-415's two rounds, unlearned."""
    if not _reply(a, SyncGroupResponse, Error.NONE):
        return False
    before, after = _slot_consumers(s, a, n)
    return bool(before.owned & ~after.owned & system.cfg.stateless) and not before.streams.leaving


def _standby_learning(system, s, a, n) -> bool:
    """A learner placed where the task's standby ran is ready at once (seed 001, Standby Task Utilization)."""
    if not _reply(a, SyncGroupResponse, Error.NONE):
        return False
    before, after = _slot_consumers(s, a, n)
    return bool(after.streams.ready & ~before.streams.ready)


def _scaling(state: State) -> bool:
    return any(p.consumer is not None and p.consumer.streams and (p.consumer.streams.learning or
                                                                  p.consumer.streams.leaving) for p in state.procs)


def _leader_crash_scaling(system, s, a, n) -> bool:
    c = s.procs[a.slot].consumer if a.kind == "crash" else None
    return c is not None and c.member_id == s.group.leader and _scaling(s)


STREAMS_COVERS = (
    Cover("learner_promoted", "a member's learner task became one of its active tasks", _learner_promoted, _streams),
    Cover("leaving_member_shut_down", "a member marked leaving shut itself down (R54)",
          lambda system, s, a, n: a.kind == "shutdown", _streams),
    Cover("leader_crash_during_scaling", "the leader crashed while a member learned or was leaving (R52)",
          _leader_crash_scaling, _streams),
    Cover("stateless_moved_without_learning", "a member that stays revoked a stateless task (R47)",
          _stateless_moved, lambda system: _streams(system) and bool(system.cfg.stateless)),
    Cover("standby_used_for_learning", "a learner placed on a member with the task's standby was ready at once",
          _standby_learning, lambda system: _streams(system) and system.cfg.standby_replicas > 0),
)
COVERS += STREAMS_COVERS


def _returning(s: State, n: State) -> bool:
    if n.group.phase != Phase.STABLE or s.group.phase == Phase.STABLE:
        return False
    deferred = _deferred_before(n.group)
    return any(not m.subscription.owned and m.assignment.partitions & deferred for m in n.group.members)


def applicable_covers(system: System) -> tuple:
    return tuple(c for c in _table(system, "COVERS") if c.applies(system))


def concrete_reason(system: System, v) -> str:
    """A safety violation's reason said again on its concrete execution (``v``: an
    engines/explore.py Violation). The engines check properties on states up to
    renaming, where member ids and generations are renumbered 1, 2, ...; the
    counterexample replays the real ones, so its reason names them as its steps do
    (A2, not the canonical A1). A liveness reason, or one the concrete state does not
    reproduce, is kept as it is."""
    prop = next((p for p in _table(system, "PROPERTIES") if p.name == v.property), None)
    if prop is None or v.loop_start is not None or len(v.path) < 1:
        return v.reason
    action, last = v.path[-1]
    why = prop.invariant(system, last) if prop.invariant else None
    if not why and prop.step and action is not None and len(v.path) > 1:
        why = prop.step(system, v.path[-2][1], action, last)
    return why or v.reason

