"""Partition assignors: pure functions of the leader's view of the group.

``assign(cfg, members) -> ((member_id, Assignment), ...)`` where ``members`` is
the JoinGroup response's member list ``((member_id, group_instance_id,
Subscription), ...)``. Unless the configuration has subscriptions (R61-R64), every
member subscribes to every topic of ``cfg.topics`` and all exist; otherwise each
member may be given only partitions of the topics it subscribes to that exist in
the leader's metadata (``Subscribed``), as Kafka's assignors do.

* ``range`` (RangeAssignor): per topic, contiguous ranges; the first
  (partitions mod members) members get one more.
* ``roundrobin`` (RoundRobinAssignor): all partitions dealt in turn.
* ``sticky`` (StickyAssignor): balanced (loads within one), keeping as many
  owned partitions in place as balance allows.
* ``cooperative-sticky`` (CooperativeStickyAssignor): ``sticky``, then the
  cooperative adjustment of seed 000, Design I (leader process): a partition whose
  owner changes is left out of its new owner's assignment until the owner has
  revoked it and rejoined (the follow-up round), and so is a contested one.

With Kafka Connect's two resource kinds (``cfg.connectors``, deferred and
incremental protocols; R66) every load is counted per kind: ``_sticky`` and
``_deferring`` balance connectors and tasks each on its own, and Design III caps
the moves of each kind at its cost (``_move_allowance``, R67).

Owned-partition claims are weighed by generation (KIP-792; AbstractStickyAssignor
since KAFKA-14639): of several members claiming a partition, the one with the
highest generation keeps the claim; claims tied at the highest generation are
dropped from all of them, and the partition is *contested* (AbstractStickyAssignor
``partitionsWithMultiplePreviousOwners``): ``sticky`` gives it out at once, as
StickyAssignor does; the cooperative assignors withhold it this round, as
CooperativeStickyAssignor.adjustAssignment does with every partition in
``partitionsTransferringOwnership``, so it is given out once both claimants have
revoked it (R23).

The leader of a real group runs this code (``rebalance member``), so it scales
with the group: partitions are bitmasks worked on whole (``int.bit_count``,
shifts, ``partitions_of``), never bit by bit, and the only loops over single
partitions are over those given out by ``_fill``, a heap of members by load. A
Stable group of 1,000 members and 100,000 partitions with one joining takes
about 0.02 CPU-s (``benchmarks/assignors.py``; issue 17 item 9), as Kafka's
AbstractStickyAssignor.constrainedAssign made the sticky assignor linear in the
partitions for large groups (KAFKA-9987). The outputs are the same as the
bit-by-bit version's (tests/test_assignors_golden.py).
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from heapq import heapify, heappop, heapreplace
from itertools import groupby
from typing import NamedTuple

from .config import ConfigError, GroupConfig, rule
from .protocol import (ALL_TOPICS, NO_INSTANCE_ID, NOT_SCHEDULED, Assignment, mask_of, member_name, partitions_of,
                       slot_of, union)


class Subscribed(list):
    """The members in R29 order when subscriptions differ (R61): ``allowed``, member
    id -> the bitmask of partitions it may be given (its topics that exist in the
    leader's metadata); ``assignable``, their union (a partition nobody subscribes
    to, or of a topic not yet created, goes to nobody). A plain list of member ids
    stands for every member subscribing to every existing partition."""

    def __init__(self, mids, allowed: dict):
        super().__init__(mids)
        self.allowed = allowed
        self.assignable = union(allowed.values())


def _subscribers(cfg: GroupConfig, members, metadata: int) -> dict:
    """R61: member id -> the partitions it may be given: those of the topics it
    subscribes to that the leader's ``metadata`` (a topic bitmask) shows
    (AbstractPartitionAssignor.assign: partitionsPerTopic of the subscribed topics).
    Replaced by ``assign-unsubscribed`` (test-only)."""
    return {mid: cfg.partitions_of_topics(sub.topics & metadata) for mid, _, sub in members}


class AssignorError(ConfigError):
    """A plug-in assignor raised an exception or returned a wrong shape; the message
    names the assignor, the input and the problem (``rebalance`` exits 2)."""


class MemberSubscription(NamedTuple):
    """One member as a plug-in assignor sees it (ConsumerPartitionAssignor.Subscription):
    ``owned_partitions``, the partitions it claims (``("t-0", ...)``, KIP-429's
    ownedPartitions); ``generation``, the generation it was assigned them in
    (KIP-792's generationId; -1 when it claims nothing); ``group_instance_id``, its
    static membership id (KIP-345) or None."""

    owned_partitions: tuple
    generation: int
    group_instance_id: str | None


def _claim_weight(generation: int) -> int:
    """R22: a claim weighs as much as its generation (KIP-792; AbstractStickyAssignor
    since KAFKA-14639 compares the generations themselves). Replaced by
    ``generation-mod-4`` (test-only)."""
    return generation


def _counted_claims(claimants: list) -> list:
    """R22: every claim counts, whatever its generation ((member id, Subscription),
    ...). Replaced by ``ignore-owned-generation`` (KAFKA-12984's filter, Kafka
    3.0-3.4.0: only the newest generation's claims count)."""
    return claimants


def _contested(contested: int) -> int:
    """R22: partitions claimed by several members tied at the highest weight are
    contested (a bitmask). Replaced by ``contested-claims-unowned``."""
    return contested


class Claims(NamedTuple):
    """The claims resolved (R22): ``won``, member id -> the bitmask of partitions it
    owns (its claims of the highest weight, untied; 0 for a member that owns
    nothing), and ``contested``, the bitmask of partitions tied at the highest
    weight."""

    won: dict
    contested: int


def _claims(cfg: GroupConfig, members) -> Claims:
    """R22, by bitmasks: members grouped by claim weight (``_claim_weight``: the
    generation), heaviest first; at each weight, what no heavier claim took goes to
    its one claimant, and what two or more claim at that weight is contested.
    Mutations: see ``resolve_claims`` and ``contested_claims``."""
    claimants = rule(cfg, _counted_claims)([(mid, sub) for mid, _, sub in members if sub.owned])
    won, contested = rule(cfg, _weighed)(members, claimants, rule(cfg, _claim_weight))
    return Claims(won, rule(cfg, _contested)(contested))


def _weighed(members, claimants: list, weight) -> tuple:
    """R22: ``(won, contested)`` (see ``Claims``) from the ``claimants`` ((member id,
    Subscription), ...) by ``weight`` of generation: heaviest first, what no heavier
    claim took goes to its one claimant, what two or more claim at one weight is
    contested (AbstractStickyAssignor since KAFKA-14639). Replaced by
    ``sticky-user-data-without-generation`` (KAFKA-7026)."""
    won = {mid: 0 for mid, _, _ in members}
    heavier = contested = 0
    claimants.sort(key=lambda c: weight(c[1].generation), reverse=True)
    for _, same_weight in groupby(claimants, key=lambda c: weight(c[1].generation)):
        level = [(mid, sub.owned & ~heavier) for mid, sub in same_weight]  # what no heavier claim took
        once = twice = 0
        for _, claim in level:
            twice |= once & claim
            once |= claim
        for mid, claim in level:
            won[mid] = claim & ~twice
        contested |= twice
        heavier |= once
    return won, contested


def resolve_claims(cfg: GroupConfig, members) -> dict:
    """Owner of each claimed partition: ``{partition: member_id}`` (R22): the one
    claimant of the highest weight (``_claim_weight``: the generation). A partition
    whose claims tie at the highest weight has no owner (``contested_claims``).

    Mutations: ``_counted_claims``, ``_claim_weight``.
    """
    return {p: mid for mid, mask in _claims(cfg, members).won.items() for p in partitions_of(mask)}


def contested_claims(cfg: GroupConfig, members) -> int:
    """The bitmask of contested partitions (R22, R23): claimed by several members
    tied at the highest weight, so owned by none (AbstractStickyAssignor
    ``partitionsWithMultiplePreviousOwners``, Kafka 3.4.1+). Mutation
    ``contested-claims-unowned``: none (they count as unclaimed, as in this model
    before issue 15)."""
    return _claims(cfg, members).contested


def _range(cfg: GroupConfig, mids) -> dict:
    if isinstance(mids, Subscribed):
        return _range_subscribed(cfg, mids)
    out = {mid: 0 for mid in mids}
    n = len(mids)
    start = 0
    for _, count in cfg.topics:
        per, extra = divmod(count, n)
        for i, mid in enumerate(mids):
            size = per + (1 if i < extra else 0)
            out[mid] |= ((1 << size) - 1) << start
            start += size
    return out


def _range_subscribed(cfg: GroupConfig, mids: Subscribed) -> dict:
    """R61: RangeAssignor per topic among its subscribers only (in R29 order), as
    RangeAssignor.assign does with consumersPerTopic."""
    out = {mid: 0 for mid in mids}
    start = 0
    for _, count in cfg.topics:
        topic = ((1 << count) - 1) << start
        takers = [m for m in mids if mids.allowed[m] & topic]
        if takers:
            per, extra = divmod(count, len(takers))
            at = start
            for i, mid in enumerate(takers):
                size = per + (1 if i < extra else 0)
                out[mid] |= ((1 << size) - 1) << at
                at += size
        start += count
    return out


def _roundrobin_subscribed(mids: Subscribed) -> dict:
    """R61: RoundRobinAssignor: the partitions in order, each to the next member in
    the circle (R29 order) that subscribes to its topic."""
    out = {mid: [] for mid in mids}
    at = 0
    for p in partitions_of(mids.assignable):
        while not mids.allowed[mids[at]] >> p & 1:
            at = (at + 1) % len(mids)
        out[mids[at]].append(p)
        at = (at + 1) % len(mids)
    return {mid: mask_of(ps) for mid, ps in out.items()}


def _roundrobin(cfg: GroupConfig, mids) -> dict:
    """Partition p to member p mod n: member i's mask is a comb of teeth n apart
    (all ones in base 2**n: (2**(n*k) - 1) / (2**n - 1)) shifted by i."""
    if isinstance(mids, Subscribed):
        return _roundrobin_subscribed(mids)
    n = len(mids)
    comb = ((1 << n * -(-cfg.num_partitions // n)) - 1) // ((1 << n) - 1)
    return {mid: (comb << i) & cfg.all_partitions for i, mid in enumerate(mids)}


def _lowest(mask: int, k: int) -> int:
    """The ``k`` lowest partitions of ``mask`` (all of them if it has no more): a
    binary search for the width whose low bits hold exactly ``k``."""
    if mask.bit_count() <= k:
        return mask
    low, high = k, mask.bit_length()  # the low `low` bits hold at most k, the low `high` bits more
    while high - low > 1:
        mid = (low + high) // 2
        if (mask & ((1 << mid) - 1)).bit_count() <= k:
            low = mid
        else:
            high = mid
    return mask & ((1 << low) - 1)


def _fill(cfg: GroupConfig, mids, out: dict, taken: int, quota: dict | None = None, pool: int | None = None) -> dict:
    """Give each partition of ``pool`` (a bitmask, one resource kind; None: every
    partition) not in ``taken``, in ascending order, to the least loaded member in
    that pool (ties: member order) still under its ``quota`` (None: no quota): a
    heap of (load, member order) over the members that can take more. With differing
    subscriptions (``Subscribed``, one kind): ``_fill_subscribed``, no quota."""
    if isinstance(mids, Subscribed):
        return _fill_subscribed(mids, out, taken)
    pool = cfg.all_partitions if pool is None else pool
    heap = [((out[m] & pool).bit_count(), i, m) for i, m in enumerate(mids)]
    heap = [entry for entry in heap if quota is None or entry[0] < quota[entry[2]]]
    heapify(heap)
    given = {m: [] for m in mids}
    for p in partitions_of(pool & ~taken):
        if not heap:  # every member at its quota: only when one partition counts for two (KAFKA-7026's mutation)
            break
        load, i, m = heap[0]
        given[m].append(p)
        if quota is None or load + 1 < quota[m]:
            heapreplace(heap, (load + 1, i, m))
        else:
            heappop(heap)
    return {m: out[m] | mask_of(given[m]) for m in mids}


def _fill_subscribed(mids: Subscribed, out: dict, taken: int) -> dict:
    """R61: each assignable partition not in ``taken`` to the least loaded member
    subscribed to its topic (ties: member order), those with the fewest potential
    consumers first (AbstractStickyAssignor's GeneralAssignmentBuilder sorts the
    unassigned partitions so and gives each to the least loaded potential consumer)."""
    out = dict(out)
    todo = partitions_of(mids.assignable & ~taken)
    takers = {p: [m for m in mids if mids.allowed[m] >> p & 1] for p in todo}
    for p in sorted(todo, key=lambda p: (len(takers[p]), p)):
        m = min(takers[p], key=lambda m: out[m].bit_count())
        out[m] |= 1 << p
    return out


def _balance_subscribed(mids: Subscribed, out: dict) -> dict:
    """R65: move partitions until none can go from its member to a member subscribed
    to its topic with a load two or more below (GeneralAssignmentBuilder.balance's
    performReassignments: a partition moves when ``currentAssignment(consumer).size()
    > currentAssignment(otherConsumer).size() + 1``). Each move lowers the sum of
    squared loads, so it ends; the most loaded member gives first, its highest
    partition to the least loaded taker (ties: member order)."""
    out = dict(out)
    while True:
        by_load = sorted(mids, key=lambda m: -out[m].bit_count())
        for m in by_load:
            load = out[m].bit_count()
            move = next(((n, out[m] & mids.allowed[n]) for n in reversed(by_load)
                         if out[n].bit_count() < load - 1 and out[m] & mids.allowed[n]), None)
            if move is not None:
                n, movable = move
                p = 1 << (movable.bit_length() - 1)
                out[m] &= ~p
                out[n] |= p
                break
        else:
            return out


def _sticky(cfg: GroupConfig, mids, won: dict) -> dict:
    """Balanced assignment keeping owners in place where balance allows, each
    resource kind on its own (R66; ``cfg.kinds``, one kind but with connectors):
    ``_sticky_kind`` per kind, the results joined.

    With differing subscriptions (``Subscribed``; AbstractStickyAssignor.generalAssign,
    R65): each member keeps what it owns of its own topics, ``_fill_subscribed``
    gives the rest, and ``_balance_subscribed`` moves partitions until balanced
    as Kafka defines it for non-uniform subscriptions."""
    if isinstance(mids, Subscribed):
        kept = {m: won[m] & mids.allowed[m] for m in mids}
        return _balance_subscribed(mids, _fill_subscribed(mids, kept, union(kept.values())))
    kinds = cfg.kinds
    if len(kinds) == 1:
        return _sticky_kind(cfg, mids, won, cfg.all_partitions)
    out = {m: 0 for m in mids}
    for _, pool, _ in kinds:
        for m, mask in _sticky_kind(cfg, mids, {m: won[m] & pool for m in mids}, pool).items():
            out[m] |= mask
    return out


def _sticky_kind(cfg: GroupConfig, mids, won: dict, pool: int) -> dict:
    """Balanced assignment of the partitions of ``pool`` (a bitmask; ``won`` holds
    none outside it) keeping owners in place where balance allows: quotas of
    ``base`` and ``base + 1`` (AbstractStickyAssignor.constrainedAssign's minQuota
    and maxQuota, KAFKA-9987; Connect's loadBalancingRevocations per kind), the
    ``extra`` larger ones to the members owning the most (ties: member order); each
    member keeps its lowest owned partitions up to its quota, and ``_fill`` gives
    the rest to the members under quota."""
    base, extra = divmod(pool.bit_count(), len(mids))
    order = sorted(range(len(mids)), key=lambda i: (-won[mids[i]].bit_count(), i))
    quota = {mids[i]: base + (1 if k < extra else 0) for k, i in enumerate(order)}
    out = {m: _lowest(won[m], quota[m]) for m in mids}
    return _fill(cfg, mids, out, union(out.values()), quota, pool)


def _moving(won: dict, out: dict) -> int:
    """The bitmask of owned partitions that ``out`` gives to another member."""
    return union(mask & ~out[m] for m, mask in won.items())


def _withheld(claims: Claims, out: dict) -> int:
    """R23 (CooperativeStickyAssignor.adjustAssignment): the partitions withheld this
    round, those moving away from their owner and the contested ones. Replaced by
    ``assign-before-revoke``."""
    return claims.contested | _moving(claims.won, out)


def _cooperative_sticky(cfg: GroupConfig, mids, claims: Claims) -> dict:
    """``sticky``, then R23's adjustment (``_withheld``)."""
    out = _sticky(cfg, mids, claims.won)
    withheld = rule(cfg, _withheld)(claims, out)
    return {m: mask & ~withheld for m, mask in out.items()} if withheld else out


def _deferring(cfg: GroupConfig, mids, won: dict, withheld: int) -> dict:
    """No revocations while a delay is pending (seed 000, Design II): everyone keeps
    what it owns; unowned partitions other than the ``withheld`` ones (bitmask: lost
    partitions held back, contested ones) go to the least loaded members, loads
    counted per resource kind (R66; Connect's assignConnectors and assignTasks)."""
    out, taken = dict(won), withheld | union(won.values())
    for _, pool, _ in cfg.kinds:
        out = _fill(cfg, mids, out, taken, pool=pool)
    return out


def newest_echo(subscriptions) -> tuple:
    """The newest echo the Subscriptions carry (R31): ``(generation, assigned,
    deferred, revoked, successive)``, zeros when there is none. A member that
    missed the last assignment still echoes an older round."""
    echoes = [sub.echo for sub in subscriptions if sub.echo]
    return max(echoes) if echoes else (0, 0, 0, 0, 0)


def _design2(cfg: GroupConfig, members, mids, claims: Claims, memory: tuple) -> tuple:
    """A Design II round (seed 000, Design II, Leader process): ``(assignment,
    ScheduledRebalanceTimeout in ticks, echo)``. Lost partitions come first (R33):
    a round holding some back revokes nothing and clears "revoked" (R40); otherwise
    the backoff of revoking rounds decides (R40). ``left``: the fewest ticks left
    any member reports (NOT_SCHEDULED: none), the deadline a new leader inherits.
    ``contested`` partitions (R22) are claimed, so not lost: every round withholds
    them, as Connect revokes its duplicates from every holder (``duplicatedToRevoke``),
    and the next one gives them out with no delay. Under the incremental protocol
    (Design III on Design II, R68) a round that holds nothing back caps its moves
    (``_incremental``) instead of R40's backoff. Mutation ``incremental-reassigns-lost``:
    under the incremental protocol ``_deferral`` holds nothing back."""
    subs = [sub for _, _, sub in members]
    echo = newest_echo(subs)
    left = min((sub.scheduled for sub in subs if sub.scheduled >= 0), default=NOT_SCHEDULED)
    if cfg.removed:  # R81: a deleted resource is revoked from whoever runs it, and is not lost
        claims = Claims({m: won & ~cfg.removed for m, won in claims.won.items()}, claims.contested & ~cfg.removed)
    claimed = union(claims.won.values()) | claims.contested
    losable = (mids.assignable & ~union(sub.released for sub in subs) if isinstance(mids, Subscribed)
               else cfg.all_partitions & ~cfg.removed)
    held, delay = rule(cfg, _deferral)(cfg, subs, claimed, memory, echo, left, losable)
    if held:
        out = _deferring(cfg, mids, claims.won, held | claims.contested)
        return out, delay, (union(out.values()), held, 0, echo[4])
    if cfg.protocol == "incremental":  # Design III on Design II (R68): nothing held back, so moves are capped
        out, more = _incremental(cfg, mids, claims)
        return out, cfg.rejoin_ticks if more else 0, (union(out.values()), 0, 0, 0)
    out, delay, backoff = rule(cfg, _revoking_backoff)(cfg, mids, claims, echo, left)
    return out, delay, (union(out.values()), 0) + backoff


def _lost(previous: int, losable: int) -> int:
    """R33, R64 (seed 000, Design II case (a)): the partitions lost if nobody claims
    them: those the last round assigned or deferred (``previous``) that are
    ``losable``, assignable (a partition nobody subscribes to any more goes to
    nobody) and not released by a present member dropping its topic. Partitions
    of a new topic, or of a topic a member newly subscribes to, were not assigned
    last round: they and the released ones are given out at once. Replaced by
    ``defer-new-subscriptions``."""
    return previous & losable


def _previous_round(memory: tuple, echo: tuple) -> tuple:
    """R31, R33: what the leader knows of the last round, from the newest ``echo``:
    ``(assigned, deferred, delay running over, a member with nothing ends the delay)``,
    the first three bitmasks. Replaced by ``leader-forgets-delay`` and
    ``connect-leader-state`` (read from the leader's ``memory``)."""
    return echo[1], echo[2], echo[2], True


def _deferral(cfg: GroupConfig, subs, claimed: int, memory: tuple, echo: tuple, left: int, losable: int) -> tuple:
    """The Design II decision (seed 000, Design II, Leader process; R31-R33):
    ``(held, delay)``, the bitmask of lost partitions to hold back this round and
    the ScheduledRebalanceTimeout to send with them, in ticks (0 when none held).

    Lost partitions were assigned last round (the newest ``echo``) or deferred,
    are ``losable`` (``_lost``, R64), and are not in ``claimed`` (the bitmask of partitions some member claims, a
    contested claim included: Connect counts duplicates as active, not lost).
    They are given out at once when scheduled.rebalance.max.delay is 0
    (``cfg.scheduled_delay_ticks``; Connect's handleLostAssignments, maxDelay == 0),
    when a member with nothing (a candidate: a returning member,
    IncrementalCooperativeAssignor) is there, or, for those already deferred, once
    a member reports that the ScheduledRebalanceTimeout passed (0 ticks left).
    Otherwise they are held: a running delay keeps its deadline, the earliest any
    member reports, so a new leader inherits it; a new one runs
    ``cfg.scheduled_delay_ticks``.

    ``memory``: ``(previous, deferred)``, the bitmasks this leader assigned or held
    back, and held back, in the last round it led (read under the mutations
    only). Mutation ``leader-forgets-delay`` (the seed as written): which delay
    is running comes from ``memory``, not from the echo, so a new leader that sees
    the deferred partitions still lost starts the delay again; and a member with
    nothing does not end the delay. Mutation ``connect-leader-state`` (Kafka
    Connect): as ``leader-forgets-delay``, and what was assigned last round comes
    from ``memory`` too, which the member passes only if it led the last round
    (IncrementalCooperativeAssignor resets previousAssignment otherwise), so a
    new leader finds nothing lost and gives the old leader's partitions out at
    once.
    """
    assigned_prev, deferred_prev, running, candidates_end_delay = rule(cfg, _previous_round)(memory, echo)
    lost = rule(cfg, _lost)(assigned_prev | deferred_prev, losable) & ~claimed
    if not lost or not cfg.scheduled_delay_ticks or (candidates_end_delay and any(not sub.owned for sub in subs)):
        return 0, 0
    running &= lost
    if running and left <= 0:  # the delay passed: what it held goes out now
        held = lost & ~running
        return held, cfg.scheduled_delay_ticks if held else 0
    return lost, left if running else cfg.scheduled_delay_ticks


def _revoking_backoff(cfg: GroupConfig, mids, claims: Claims, echo: tuple, left: int) -> tuple:
    """KAFKA-12495 (IncrementalCooperativeAssignor since Kafka 3.4.0; R40), for a
    Design II round that holds nothing back: ``(assignment, delay in ticks,
    (revoked, successive))``, the last two for the echo.

    A round that would revoke for balance right after a revoking round revokes
    nothing, and schedules a rebalance after ``revoking_backoff_ticks[n - 1]`` for
    the n-th such round in a row. While that delay runs, rounds revoke nothing;
    once it has passed the revocation happens. The count of rounds in a row starts
    again only after a round after a revoking one revokes nothing. The state
    travels in the echo, so a new leader keeps the count (in Connect it is the
    leader's memory). ``contested`` partitions are withheld whatever the backoff
    (Connect's ``duplicatedToRevoke`` is not a load-balancing revocation).
    Replaced by ``skip-consecutive-revocation`` (Connect before KAFKA-12495).
    """
    revoked, successive = echo[3:]
    if revoked and left > 0:  # the backoff runs: keep everything where it is
        return _deferring(cfg, mids, claims.won, claims.contested), left, (0, successive)
    if left == 0:
        revoked = 0  # the backoff passed: revoking is allowed again
    out = _cooperative_sticky(cfg, mids, claims)
    if not _moving(claims.won, out):  # no revocation
        return out, 0, (0, 0 if revoked else successive)
    if not revoked:
        return out, 0, (1, successive)
    successive = min(successive + 1, len(cfg.revoking_backoff_ticks))
    delay = cfg.revoking_backoff_ticks[successive - 1]
    if not delay:  # scheduled.rebalance.max.delay 0: Connect revokes at once (testImmediateRevocationsWhenMaxDelayIs0)
        return out, 0, (1, successive)
    return _deferring(cfg, mids, claims.won, claims.contested), delay, (1, successive)


def _move_allowance(cfg: GroupConfig, cost: int) -> int:
    """R67: how many owned resources of a kind whose move costs ``cost`` a Design III
    round may move: as many as ``cfg.max_moves`` pays for, at least one (seed 000,
    Design III: a heavy connector's flush costs more than a light task's, so
    connectors move fewer at a time). Replaced by ``moves-ignore-cost``."""
    return max(1, cfg.max_moves // cost)


def _incremental(cfg: GroupConfig, mids, claims: Claims) -> tuple:
    """Design III (seed 000, Incremental Resolution of Imbalance; R34, R67): of the
    partitions the cooperative sticky target moves away from their owners, only
    the lowest ``_move_allowance`` of each resource kind are revoked this round;
    the others stay, and a rebalance is scheduled to move more. Returns
    ``(assignment, more to move)``. Under the incremental protocol it runs when
    Design II holds nothing back (``_design2``, R68)."""
    out = _cooperative_sticky(cfg, mids, claims)
    moving = _moving(claims.won, out)
    allowance = rule(cfg, _move_allowance)
    stay = union(moving & pool & ~_lowest(moving & pool, allowance(cfg, cost)) for _, pool, cost in cfg.kinds)
    return {m: mask | claims.won[m] & stay for m, mask in out.items()}, bool(stay)


def assign_plugin(cfg: GroupConfig, mids, members) -> dict:
    """R16 through a plug-in: ``cfg.plugin(partitions, subscriptions)`` where
    ``partitions`` is the group's partitions in order (``("t-0", "t-1", ...)``) and
    ``subscriptions`` a dict ``{member id: MemberSubscription}`` in member order
    (R29: static members by group.instance.id, then dynamic by member id; member
    ids read ``A1``, ``B2``, ...). It returns ``{member id: [partition, ...]}``;
    a member left out gets nothing. Under the cooperative protocol it is the whole
    decision, R23's adjustment included: a partition moving from its owner must be
    withheld until the owner revokes it. Giving a partition twice or to nobody is
    the plug-in's to get wrong (the properties and ``rebalance prove --assignor``
    catch it); an exception or another shape raises AssignorError naming it."""
    names = [cfg.partition_name(p) for p in range(cfg.num_partitions)]
    index = {n: p for p, n in enumerate(names)}
    subs = {mid: sub for mid, _, sub in members}
    iids = {mid: iid for mid, iid, _ in members}
    seen = {member_name(mid): MemberSubscription(
        tuple(names[p] for p in partitions_of(subs[mid].owned)),
        subs[mid].generation if subs[mid].owned else -1,
        None if iids[mid] == NO_INSTANCE_ID else f"instance-{chr(65 + slot_of(mid))}") for mid in mids}
    shown = f"assignor {cfg.assignor} on {dict(seen)}"
    try:
        result = cfg.plugin(tuple(names), seen)
    except Exception as e:  # the plug-in's own failure, reported as bad input with its input
        raise AssignorError(f"{shown} raised {type(e).__name__}: {e}") from None
    if not isinstance(result, dict):
        raise AssignorError(f"{shown} returned {type(result).__name__}, not a dict of member id -> partitions")
    by_name = {member_name(mid): mid for mid in mids}
    out = {mid: 0 for mid in mids}
    for name, given in result.items():
        if name not in by_name:
            raise AssignorError(f"{shown} assigned to {name!r}, not a member ({', '.join(by_name)})")
        if not isinstance(given, (list, tuple, set, frozenset)) or not all(p in index for p in given):
            raise AssignorError(f"{shown} gave {name} {given!r}: not a list of the group's partitions")
        out[by_name[name]] = mask_of(index[p] for p in given)
    return out


def _given(mids, out: dict) -> dict:
    """R16: the assignment given out is the assignor's (member id -> bitmask).
    Replaced by the test-only ``withhold-partition``, ``assign-twice`` and
    ``overload-first-member``."""
    return out


def _deleted(cfg: GroupConfig, metadata: int) -> int:
    """R81: the resources the leader reads as deleted from its ``metadata`` (Connect's
    config topic, a topic bitmask): a deleted connector and its tasks
    (IncrementalCooperativeAssignor.performTaskAssignment: ``deleted`` is the previous
    assignment less what the leader's configSnapshot configures). Replaced by
    ``deleted-connector-kept`` (test-only)."""
    return cfg.deleted(metadata)


@lru_cache(maxsize=64)
def configured(cfg: GroupConfig, removed: int) -> GroupConfig:
    """R81: ``cfg`` as a round whose leader reads the resources ``removed`` (a bitmask)
    deleted sees it: its resource kinds without them (``GroupConfig.kinds``)."""
    return replace(cfg, removed=removed) if removed else cfg


def assign(cfg: GroupConfig, members, memory: tuple = (0, 0), metadata: int = ALL_TOPICS) -> tuple:
    """The leader's assignment: ``((member_id, Assignment), ...)`` in member order.

    ``members``: ((member_id, group_instance_id, Subscription), ...), non-empty.
    Members are ordered static first by group.instance.id, then dynamic by member
    id (R29; AbstractPartitionAssignor.MemberInfo, KIP-345), so a restarted static
    member with a new member id keeps its place. ``memory``: ``(previous,
    deferred)`` bitmasks, what this leader assigned or held back, and held back,
    itself (``_deferral``; used by the ``leader-forgets-delay`` and
    ``connect-leader-state`` mutations only). ``metadata``: the topics (a bitmask)
    the leader's metadata shows exist (R62; ``ALL_TOPICS``: every one); with
    deletable connectors, Connect's config topic: a deleted connector and its tasks
    are given to nobody and revoked from their workers (R81). When the
    configuration has subscriptions (R61) each member is given only partitions of
    its subscribed topics that exist (``Subscribed``).
    Mutation ``assign-before-revoke``: the cooperative adjustment is skipped;
    ``withhold-partition`` (test-only): the first partition goes to nobody once
    there are 4 members or more; ``assign-twice`` (test-only): it also goes to the
    last member (R29 order) once there are 2 or more; ``overload-first-member``
    (test-only): the first member (R29 order) takes the last one's partitions.
    """
    if cfg.deletable_connectors:  # R81: the leader assigns what its configuration still has
        cfg = configured(cfg, rule(cfg, _deleted)(cfg, metadata))
    order = sorted(members, key=lambda x: (0, x[1]) if x[1] else (1, x[0]))
    mids = [mid for mid, _, _ in order]
    if not cfg.uniform:
        mids = Subscribed(mids, rule(cfg, _subscribers)(cfg, members, metadata))
    delay, echo = 0, ()
    if cfg.plugin is not None:
        out = assign_plugin(cfg, mids, members)
    elif cfg.assignor == "range":
        out = _range(cfg, mids)
    elif cfg.assignor == "roundrobin":
        out = _roundrobin(cfg, mids)
    elif cfg.assignor == "sticky":
        out = _sticky(cfg, mids, _claims(cfg, members).won)
    elif cfg.deferred:
        out, delay, echo = _design2(cfg, members, mids, _claims(cfg, members), memory)
    else:
        out = _cooperative_sticky(cfg, mids, _claims(cfg, members))
    out = rule(cfg, _given)(mids, out)
    return tuple((mid, Assignment(out[mid], delay, echo)) for mid, _, _ in members)


def _owes_second_round(claims: dict, assignments) -> bool:
    """R74: some member claims a partition it is not assigned, so it revokes it and a
    second round must hand it out (seed 000, Design I)."""
    return any(claims.get(mid, 0) & ~a.partitions for mid, a in assignments)


def flag_rejoin(cfg: GroupConfig, members, assignments) -> tuple:
    """R74, seed 000, Design I discussion ("an extra boolean indicator field to notify
    them immediately"): with ``cfg.rejoin_flag``, when the round owes a second one
    every member's assignment carries ``rejoin``, so the members that revoke nothing
    rejoin at once instead of waiting for a Heartbeat to answer
    REBALANCE_IN_PROGRESS (R19). ``members`` as ``assign`` takes them,
    ``assignments`` as it returns them; unchanged without the flag or a second round."""
    if not cfg.rejoin_flag or not assignments:
        return assignments
    claims = {mid: sub.owned for mid, _, sub in members}
    if not rule(cfg, _owes_second_round)(claims, assignments):
        return assignments
    return tuple((mid, a._replace(rejoin=True)) for mid, a in assignments)
