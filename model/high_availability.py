"""KIP-441's HighAvailabilityTaskAssignor: a second assignor for ``--protocol
streams`` (``--assignor high-availability``), beside the seed's learner
assignor (model/streams.py, the default ``streams``). Rules R57-R60 in
spec/SPEC.md section 4e′.

It reads the same user data (R46): ``Subscription.streams`` = ``(learning,
ready, standby, leaving)``, where a member's *warmup replicas* ride as its
learner tasks and ``ready`` says which of them restored to within
acceptable.recovery.lag; it writes the same ``Assignment.streams`` =
``(warmups, standbys)`` and reuses the seed assignor's views, quotas, standby
placement, stateless balance and R23 withholding.

The lag is abstracted to caught-up or not (R57; ClientState.lagFor,
HighAvailabilityTaskAssignor.buildClientRankingsByTask): a member is caught up on
a stateful task it runs (rank -1), holds a standby of (rank 0: a standby keeps
restoring) or holds a warmup of that said it is ready. A warmup catches up by a
nondeterministic ``ready`` step of the checker (R55's LearnerReady), which under
this assignor sends no JoinGroup: the probing rebalance finds it (R60).

``assign(cfg, members, memory) -> (((member_id, Assignment), ...), NO_MEMORY)``:
the assignor keeps no leader memory (Kafka's recomputes from the subscriptions).
Mutations: ``active-to-lagging-client``: the balanced owner takes an active task
whether or not it is caught up (R58's constraint dropped); ``unbounded-warmups``:
every movement gets a warmup, max.warmup.replicas ignored.
"""
from __future__ import annotations

from .config import GroupConfig, rule
from .protocol import partitions_of
from .streams import NO_MEMORY, _quotas, _standbys, _stateless, _views, withheld


def caught_up(v) -> int:
    """R57: the stateful tasks member view ``v`` is caught up on, a bitmask: those it
    runs (its resolved claim), holds a standby of, or warms up and reported ready
    (HighAvailabilityTaskAssignor.buildClientRankingsByTask: rank -1 for a running
    active task, 0 within acceptable.recovery.lag)."""
    return v.owned | v.standby | v.ready


def _destination_caught_up(v, bit: int, anyone_caught_up: bool) -> bool:
    """R58: whether the balanced owner ``v`` may take task ``bit`` now: it is caught up
    on it, or no member is (TaskMovement.taskIsCaughtUpOnClientOrNoCaughtUpClientsExist).
    Replaced by ``active-to-lagging-client``."""
    return bool(caught_up(v) & bit) or not anyone_caught_up


def _warmup_budget(cfg: GroupConfig) -> int:
    """R58: how many warmup replicas one assignment may hand out: max.warmup.replicas
    (TaskMovement's remainingWarmupReplicas). Replaced by ``unbounded-warmups``."""
    return cfg.max_warmup_replicas


def _balanced(cfg: GroupConfig, takers) -> dict:
    """R58's balanced assignment of the stateful tasks over ``takers`` (the members not
    leaving), member id -> bitmask: each task stays with its owner while the owner is
    under its quota (loads within one, the larger quotas to the members running the
    most); the rest, in task order, to the taker with the fewest so far, a caught-up
    one first on a tie, then member order (HighAvailabilityTaskAssignor.assign's
    balanced stateful active assignment, DefaultBalancedAssignor)."""
    stateful = cfg.all_partitions & ~cfg.stateless
    quota = _quotas(takers, lambda v: (v.owned & stateful).bit_count(), stateful.bit_count())
    out = {v.mid: 0 for v in takers}
    left = []
    for t in partitions_of(stateful):
        bit = 1 << t
        owner = next((v for v in takers if v.owned & bit), None)
        if owner is not None and out[owner.mid].bit_count() < quota[owner.mid]:
            out[owner.mid] |= bit
        else:
            left.append(bit)
    for bit in left:
        pick = min(range(len(takers)), key=lambda i: (out[takers[i].mid].bit_count(),
                                                      not caught_up(takers[i]) & bit, i))
        out[takers[pick].mid] |= bit
    return out


def _actives(cfg: GroupConfig, views, takers) -> tuple:
    """R58: ``(active, warmups, movements)``: each stateful task to its balanced owner
    if that owner is caught up on it (or nobody is); otherwise the task stays on a
    caught-up member, its current owner if it runs it, else the caught-up member
    with the fewest active tasks so far (ties: member order), and the balanced owner
    gets a warmup replica of it, at most ``cfg.max_warmup_replicas`` warmups in all,
    the tasks with the fewest caught-up members first (TaskMovement.assignTaskMovements,
    moveActiveAndTryToWarmUp). ``movements``: how many tasks were kept off their
    balanced owner (the probing rebalance's trigger, R60)."""
    balanced = _balanced(cfg, takers)
    active = {v.mid: 0 for v in views}
    warmups = {v.mid: 0 for v in views}
    moves = []
    destination_rule = rule(cfg, _destination_caught_up)
    for t in partitions_of(cfg.all_partitions & ~cfg.stateless):
        bit = 1 << t
        dest = next(v for v in takers if balanced[v.mid] & bit)
        warm = [v for v in views if caught_up(v) & bit]
        if destination_rule(dest, bit, bool(warm)):
            active[dest.mid] |= bit
        else:
            moves.append((len(warm), t, dest, warm))
    budget = rule(cfg, _warmup_budget)(cfg)
    for _, t, dest, warm in sorted(moves, key=lambda m: m[:2]):
        bit = 1 << t
        source = next((v for v in warm if v.owned & bit), None) or min(
            warm, key=lambda v: (active[v.mid].bit_count(), views.index(v)))
        active[source.mid] |= bit
        if budget > 0:
            warmups[dest.mid] |= bit
            budget -= 1
    return active, warmups, len(moves)


def target(cfg: GroupConfig, members) -> tuple:
    """The leader's decision before R23's adjustment: ``(views, active, warmups,
    standby, movements)``, the three dicts member id -> bitmask (R58, R59).
    Members marked leaving (R53) take no task in the balanced assignment but stay
    caught up on what they run, so they hand it over only to a caught-up member."""
    views = _views(cfg, members, NO_MEMORY)
    takers = [v for v in views if not v.leaving] or views  # when everyone leaves, they keep running (R54)
    active, warmups, movements = _actives(cfg, views, takers)
    _stateless(cfg, views, takers, active)
    return views, active, warmups, _standbys(cfg, views, takers, active, warmups), movements


def assign(cfg: GroupConfig, members, memory=NO_MEMORY) -> tuple:
    """The HighAvailabilityTaskAssignor (R57-R60): ``(((member_id, Assignment), ...) in
    ``members``' order, NO_MEMORY)``. ``members``: the JoinGroup response's
    ((member_id, group_instance_id, Subscription), ...), non-empty; ``memory`` is
    ignored. A task moving away from the member that runs it is withheld this
    round (R23, as the seed's assignor does). While any task is kept off its
    balanced owner, every assignment carries ``scheduled`` =
    ``cfg.probing_ticks``: each member rejoins when that passes, the probing
    rebalance (R60; StreamsPartitionAssignor encodes nextScheduledRebalanceMs =
    now + probing.rebalance.interval.ms in its AssignmentInfo)."""
    views, active, warmups, standby, movements = target(cfg, members)
    return withheld(cfg, members, views, active, warmups, standby, cfg.probing_ticks if movements else 0), NO_MEMORY
