"""Kafka Streams incremental rebalancing with learner tasks (seed 001): the member's
Streams state, the user data it rides on in the consumer protocol, the leader's
memory and the Streams assignor, a pure function beside the consumer assignors.

Tasks take the place of partitions in the same coordinator: task ``i`` is bit
``i`` of the group's masks (``T1`` is bit 0); ``GroupConfig.stateless`` marks the
stateless ones. A member's *active* tasks are its ``Consumer.owned`` (so commits,
fencing and ``exclusive_ownership`` are the consumer protocol's own, R9, R41);
its *learner* and *standby* tasks and its restore progress are a
``StreamsState`` (R45). They travel in the consumer protocol's user data:
``Subscription.streams`` = ``(learning, ready, standby, leaving)``,
``Assignment.streams`` = ``(learning, standby)`` (R46).

``assign(cfg, members, memory) -> (((member_id, Assignment), ...), memory')``:
the seed's "Assignment Algorithm" (active, then learner, then standby, each
with its priority list, R48-R51), under its "Algorithm Iteration Plan"
versions 1.0 (only new-comers take learners, R50) and 2.0 (existing members
take the tasks of leaving ones, R51), then the cooperative adjustment of R23
(a task moving away from its current owner is withheld until it is revoked,
as StreamsPartitionAssignor does with its follow-up rebalance). ``memory`` is
the leader's ``StreamsMemory`` (R52): who took part in the last round it led
and who was leaving; it lives in the leader's process only.

Mutations: ``learners-to-anyone`` drops the version 1.0 rule (the seed's
"naive learner assignment"), ``promote-unready-learner`` gives an active task to
its learner before it is ready.
"""
from __future__ import annotations

from typing import NamedTuple

from .config import GroupConfig, rule
from .protocol import NOT_SCHEDULED, Assignment, partitions_of, union as _union

# a task: "T" and its 1-based number, as the seed writes them
def task_name(index: int) -> str:
    """``T1`` for task 0 (the seed's notation)."""
    return f"T{index + 1}"


def task_names(mask: int) -> str:
    """``[T1, T3]``: the seed's list notation for a bitmask of tasks."""
    return "[" + ", ".join(task_name(t) for t in partitions_of(mask)) + "]"


class StreamsState(NamedTuple):
    """A Streams member's tasks besides its active ones (R45): ``learning``,
    ``ready`` (the learners restored to within the acceptable lag, a subset of
    ``learning``) and ``standby`` are bitmasks of tasks; ``leaving``: the
    scale-down tool marked it "leaving soon" (R53); ``countdown``: ticks left of its
    scale-down timeout (``NOT_SCHEDULED``: none running, R54)."""

    learning: int = 0
    ready: int = 0
    standby: int = 0
    leaving: bool = False
    countdown: int = NOT_SCHEDULED

    def user_data(self) -> tuple:
        """R46: what the member's Subscription carries: ``(learning, ready, standby, leaving)``."""
        return (self.learning, self.ready, self.standby, self.leaving)


NEW_STREAMS = StreamsState()
NO_USER_DATA = (0, 0, 0, False)


class StreamsMemory(NamedTuple):
    """The leader's memory (R52; seed 001, "Backing up Information on Leader"): the
    member ids that took part in the last round it led, and those that said they
    were leaving, both sorted. ``participants == ()``: no memory (it led no round
    yet, or a new leader after a crash): nobody counts as a new-comer."""

    participants: tuple = ()
    leaving: tuple = ()


NO_MEMORY = StreamsMemory()


class View(NamedTuple):
    """The leader's view of one member: its resolved active claim and user data."""

    mid: int
    owned: int
    learning: int
    ready: int
    standby: int
    leaving: bool


def _views(cfg: GroupConfig, members, memory) -> list:
    """Members in R29 order with their claims resolved (R22) and user data read;
    a member is leaving if it says so or the leader remembers it did (R52)."""
    from .assignors import _claims  # the consumer assignors' R22, shared
    won = _claims(cfg, members).won
    remembered = set(memory.participants and memory.leaving)
    order = sorted(members, key=lambda x: (0, x[1]) if x[1] else (1, x[0]))
    out = []
    for mid, _, sub in order:
        learning, ready, standby, leaving = getattr(sub, "streams", ()) or NO_USER_DATA
        out.append(View(mid, won[mid], learning, ready & learning, standby, leaving or mid in remembered))
    return out


def _least(members, load) -> int:
    """The member of least ``load`` (ties: member order)."""
    return min(range(len(members)), key=lambda i: (load(members[i]), i))


def _promotable() -> str:
    """R48's first rule: a task goes to a member whose learner of it is *ready*
    (the view's field read). Replaced by ``promote-unready-learner``."""
    return "ready"


def _learner_takers(memory, takers, quota: dict, stateful: int) -> tuple:
    """R50 (version 1.0): who may take learners for balance, ``(members, load gap a
    donor must exceed, load limit per member)``: only new-comers (members not in
    the last round the leader remembers), from a donor two tasks heavier, up to
    their quota. Replaced by ``learners-to-anyone``."""
    new = [v for v in takers if v.mid not in memory.participants] if memory.participants else []
    return new, 2, quota


def _actives(cfg: GroupConfig, views, takers) -> dict:
    """R48: each stateful task to, in order of priority, a member whose learner of
    it is ready, its previous owner, a member learning it (not ready: no one else
    runs it, the seed's "transfer will happen immediately"), a member with its
    standby; the rest to the member with the fewest stateful tasks. Mutation
    ``promote-unready-learner``: the first rule takes any learner."""
    out = {v.mid: 0 for v in views}
    ready_rule = rule(cfg, _promotable)()
    left = []
    for t in partitions_of(cfg.all_partitions & ~cfg.stateless):
        bit = 1 << t
        owner = next((v for v in views if v.owned & bit), None)
        pick = (next((v for v in takers if getattr(v, ready_rule) & bit), None)
                or owner
                or next((v for v in takers if v.learning & bit), None)
                or next((v for v in takers if v.standby & bit), None))
        if pick is None:
            left.append(bit)
        else:
            out[pick.mid] |= bit
    stateful = cfg.all_partitions & ~cfg.stateless
    for bit in left:
        i = _least(takers, lambda v: (out[v.mid] & stateful).bit_count())
        out[takers[i].mid] |= bit
    return out


def _quotas(views, load, total: int) -> dict:
    """Loads of ``total`` tasks spread within one: ``base`` each, ``base + 1`` for the
    ``extra`` members of the highest ``load`` (ties: member order)."""
    base, extra = divmod(total, len(views))
    ranked = sorted(range(len(views)), key=lambda i: (-load(views[i]), i))
    return {views[i].mid: base + (1 if k < extra else 0) for k, i in enumerate(ranked)}


def _learners(cfg: GroupConfig, views, takers, active: dict, memory: StreamsMemory) -> dict:
    """R49-R51: existing learners kept while their task is active elsewhere; the
    tasks of leaving members learned by the others (version 2.0: a member with
    the task's standby first, then the first member under its quota); new-comers
    (not in the leader's memory of the last round; version 1.0's rule: only they
    take learners for balance) take the lowest task of the most loaded member,
    while under their quota and two tasks lighter. Mutation ``learners-to-anyone``
    (the seed's "naive learner assignment"): every member under the mean load
    takes learners from any heavier member. Only members that stay learn (``takers``):
    with everyone leaving there is nobody to hand over to."""
    stateful = cfg.all_partitions & ~cfg.stateless
    learning = {v.mid: 0 for v in views}
    learned = 0
    for v in takers:  # R49: keep, once per task, while another member runs it
        keep = v.learning & ~active[v.mid] & ~learned & stateful
        keep &= _union(active[w.mid] for w in views if w.mid != v.mid)
        learning[v.mid] = keep
        learned |= keep

    def load(v):  # stateful tasks it runs and does not hand over, plus those it learns
        return ((active[v.mid] & stateful & ~learned).bit_count() + learning[v.mid].bit_count())

    def running(v):  # the stateful tasks it runs, keeps and nobody learns: what it can hand over
        return active[v.mid] & v.owned & stateful & ~learned

    quota = _quotas(takers, load, stateful.bit_count())
    leaving_tasks = 0
    for v in views:
        if v.leaving:
            leaving_tasks |= active[v.mid] & stateful
    if cfg.streams_version != "1.0":  # R51
        for t in partitions_of(leaving_tasks & ~learned):
            bit = 1 << t
            pick = (next((v for v in takers if v.standby & bit and not active[v.mid] & bit), None)
                    or next((v for v in takers if load(v) < quota[v.mid] and not active[v.mid] & bit), None))
            if pick is not None:
                learning[pick.mid] |= bit
                learned |= bit
    new, gap, limit = rule(cfg, _learner_takers)(memory, takers, quota, stateful)
    for c in new:
        while load(c) < limit[c.mid]:
            donors = [v for v in takers if v.mid != c.mid and load(v) - load(c) >= gap and running(v)]
            if not donors:
                break
            donor = donors[_least(donors, lambda v: -load(v))]
            offered = running(donor)
            offered = offered & c.standby or offered  # a warm standby first (seed: Standby Task Utilization)
            bit = offered & -offered  # the lowest
            learning[c.mid] |= bit
            learned |= bit
    return learning


def _standbys(cfg: GroupConfig, views, takers, active: dict, learning: dict) -> dict:
    """R51's last step: ``cfg.standby_replicas`` standbys of each stateful task on
    members that neither run nor learn it: its previous standby holders, then its
    previous owner that lost it this round, then the member with the fewest
    standbys (ties: member order)."""
    standby = {v.mid: 0 for v in views}
    if not cfg.standby_replicas:
        return standby
    for t in partitions_of(cfg.all_partitions & ~cfg.stateless):
        bit = 1 << t
        free = [v for v in takers if not (active[v.mid] | learning[v.mid]) & bit]
        ranked = sorted(range(len(free)), key=lambda i: (
            not free[i].standby & bit, not (free[i].owned & bit), standby[free[i].mid].bit_count(), i))
        for i in ranked[:cfg.standby_replicas]:
            standby[free[i].mid] |= bit
    return standby


def _stateless(cfg: GroupConfig, views, takers, active: dict) -> None:
    """R47: stateless tasks need no learning (KIP-415's two rounds): they even out the
    loads the stateful tasks leave. A member that stays keeps its stateless tasks
    while its load (all its active tasks) is under its quota (loads within one,
    the larger quotas to the members running the most); the rest go to the least
    loaded member. R23's adjustment then withholds a moving one for a round."""
    stateless = cfg.stateless
    if not stateless:
        return
    quota = _quotas(takers, lambda v: active[v.mid].bit_count() + (v.owned & stateless).bit_count(),
                    cfg.num_partitions)
    given = 0
    for v in takers:
        for t in partitions_of(v.owned & stateless):
            if active[v.mid].bit_count() < quota[v.mid]:
                active[v.mid] |= 1 << t
                given |= 1 << t
    for t in partitions_of(stateless & ~given):
        i = _least(takers, lambda v: active[v.mid].bit_count())
        active[takers[i].mid] |= 1 << t


def target(cfg: GroupConfig, members, memory: StreamsMemory = NO_MEMORY) -> tuple:
    """The leader's decision before R23's adjustment, as the seed prints it:
    ``(views, active, learning, standby)``, the three dicts member id -> bitmask."""
    views = _views(cfg, members, memory)
    stay = [v for v in views if not v.leaving]
    takers = stay or views  # when everyone leaves, they keep running until their timeouts (R54)
    active = _actives(cfg, views, takers)
    _stateless(cfg, views, takers, active)
    learning = _learners(cfg, views, stay, active, memory) if stay else {v.mid: 0 for v in views}
    return views, active, learning, _standbys(cfg, views, takers, active, learning)


def assign(cfg: GroupConfig, members, memory: StreamsMemory = NO_MEMORY) -> tuple:
    """The Streams assignor (R48-R52): ``(((member_id, Assignment), ...) in
    ``members``' order, the leader's new StreamsMemory)``. ``members``: the
    JoinGroup response's ((member_id, group_instance_id, Subscription), ...),
    non-empty. A task moving away from the member that runs it is withheld this
    round (R23): the owner revokes it and rejoins, and its learner, still
    learning it, takes it next round (StreamsPartitionAssignor's follow-up
    rebalance for tasks pending revocation)."""
    views, active, learning, standby = target(cfg, members, memory)
    out = withheld(cfg, members, views, active, learning, standby)
    remembered = StreamsMemory(tuple(sorted(v.mid for v in views)), tuple(sorted(v.mid for v in views
                                                                                 if v.leaving)))
    return out, remembered


def _moving(views, active: dict) -> int:
    """R23, R48: the tasks moving away from the member that runs them, withheld from
    their new owner this round. Replaced by ``assign-before-revoke``."""
    moving = 0
    for v in views:
        moving |= v.owned & ~active[v.mid]
    return moving


def withheld(cfg: GroupConfig, members, views, active: dict, learning: dict, standby: dict,
             scheduled: int = 0) -> tuple:
    """R23 for Streams: the assignments ``((member_id, Assignment), ...)`` in
    ``members``' order from the leader's decision (dicts member id -> bitmask): a
    task moving away from the member that runs it (``_moving``) is withheld from its
    new owner this round and learned there instead (stateful ones) until it is
    revoked. ``scheduled``: every assignment's ScheduledRebalanceTimeout in ticks (0:
    none; the probing rebalance, R60)."""
    moving = rule(cfg, _moving)(views, active)
    return tuple((mid, Assignment(active[mid] & ~(moving & ~_owned(views, mid)), scheduled,
                                  (), (learning[mid] | (active[mid] & moving & ~_owned(views, mid)
                                                        & ~cfg.stateless), standby[mid])))
                 for mid, _, _ in members)


def _owned(views, mid: int) -> int:
    return next(v.owned for v in views if v.mid == mid)
