"""Partition assignors: pure functions of the leader's view of the group.

``assign(cfg, members) -> ((member_id, Assignment), ...)`` where ``members`` is
the JoinGroup response's member list ``((member_id, group_instance_id,
Subscription), ...)``. Every member subscribes to every topic of ``cfg.topics``.

* ``range`` (RangeAssignor): per topic, contiguous ranges; the first
  (partitions mod members) members get one more.
* ``roundrobin`` (RoundRobinAssignor): all partitions dealt in turn.
* ``sticky`` (StickyAssignor): balanced (loads within one), keeping as many
  owned partitions in place as balance allows.
* ``cooperative-sticky`` (CooperativeStickyAssignor): ``sticky``, then the
  cooperative adjustment of seed 000, Design I (leader process): a partition whose
  owner changes is left out of its new owner's assignment until the owner has
  revoked it and rejoined (the follow-up round), and so is a contested one.

Owned-partition claims are weighed by generation (KIP-792; AbstractStickyAssignor
since KAFKA-14639): of several members claiming a partition, the one with the
highest generation keeps the claim; claims tied at the highest generation are
dropped from all of them, and the partition is *contested* (AbstractStickyAssignor
``partitionsWithMultiplePreviousOwners``): ``sticky`` gives it out at once, as
StickyAssignor does; the cooperative assignors withhold it this round, as
CooperativeStickyAssignor.adjustAssignment does with every partition in
``partitionsTransferringOwnership``, so it is given out once both claimants have
revoked it (R23).
"""
from __future__ import annotations

from .config import GroupConfig
from .protocol import NOT_SCHEDULED, Assignment, mask_of, union


def _claim_weight(generation: int) -> int:
    """R22: a claim weighs as much as its generation (KIP-792; AbstractStickyAssignor
    since KAFKA-14639 compares the generations themselves)."""
    return generation


def _claim_weight_mod_4(generation: int) -> int:
    """Mutation ``generation-mod-4``: generations compared modulo 4, so a claim
    from generation 4 ties with one from generation 0 (test-only)."""
    return generation % 4


# mutation -> its replacement of the claim-weighing rule (R22)
CLAIM_WEIGHTS = {"generation-mod-4": _claim_weight_mod_4}


def _weigh_claims(cfg: GroupConfig, members) -> dict:
    """R22: per claimed partition, ``(weight, member_id)`` of its newest claim, or
    ``(weight, None)`` when several claims tie at the highest weight (``_claim_weight``:
    the generation). Mutations: see ``resolve_claims``."""
    best: dict = {}  # partition -> (weight, member_id or None when tied)
    weight = next((CLAIM_WEIGHTS[m] for m in sorted(cfg.mutations) if m in CLAIM_WEIGHTS), _claim_weight)
    newest = None
    if "ignore-owned-generation" in cfg.mutations:
        newest = max((sub.generation for _, _, sub in members if sub.owned), default=None)
    for mid, _, sub in members:
        owned, gen = sub.owned, weight(sub.generation)
        if newest is not None and sub.generation < newest:
            continue
        p = 0
        while owned:
            if owned & 1:
                prev = best.get(p)
                if prev is None or gen > prev[0]:
                    best[p] = (gen, mid)
                elif gen == prev[0]:
                    best[p] = (gen, None)
            owned >>= 1
            p += 1
    return best


def resolve_claims(cfg: GroupConfig, members) -> dict:
    """Owner of each claimed partition: ``{partition: member_id}`` (R22): the one
    claimant of the highest weight (``_claim_weight``: the generation). A partition
    whose claims tie at the highest weight has no owner (``contested_claims``).

    Mutation ``ignore-owned-generation``: claims made in an older generation than
    the newest claim in the group are ignored instead of weighed, so their
    partitions count as unowned (AbstractStickyAssignor before KAFKA-14639, which
    used the generation of KAFKA-12984 as a filter). Mutation ``generation-mod-4``
    (``CLAIM_WEIGHTS``): claims weigh their generation modulo 4.
    """
    return {p: mid for p, (_, mid) in _weigh_claims(cfg, members).items() if mid is not None}


def contested_claims(cfg: GroupConfig, members) -> int:
    """The bitmask of contested partitions (R22, R23): claimed by several members
    tied at the highest weight, so owned by none (AbstractStickyAssignor
    ``partitionsWithMultiplePreviousOwners``, Kafka 3.4.1+). Mutation
    ``contested-claims-unowned``: none (they count as unclaimed, as in this model
    before issue 15)."""
    if "contested-claims-unowned" in cfg.mutations:
        return 0
    return mask_of(p for p, (_, mid) in _weigh_claims(cfg, members).items() if mid is None)


def _range(cfg: GroupConfig, mids) -> dict:
    out = {mid: 0 for mid in mids}
    n = len(mids)
    base = 0
    for _, count in cfg.topics:
        per, extra = divmod(count, n)
        start = base
        for i, mid in enumerate(mids):
            size = per + (1 if i < extra else 0)
            for p in range(start, start + size):
                out[mid] |= 1 << p
            start += size
        base += count
    return out


def _roundrobin(cfg: GroupConfig, mids) -> dict:
    out = {mid: 0 for mid in mids}
    for p in range(cfg.num_partitions):
        out[mids[p % len(mids)]] |= 1 << p
    return out


def _fill(cfg: GroupConfig, mids, out: dict, taken: int, quota: dict | None = None) -> dict:
    """Give each partition not in ``taken`` to the least loaded member (ties: member
    order) still under its ``quota`` (None: no quota)."""
    rank = {m: i for i, m in enumerate(mids)}
    load = {m: bin(out[m]).count("1") for m in mids}
    for p in range(cfg.num_partitions):
        if not taken >> p & 1:
            m = min((m for m in mids if quota is None or load[m] < quota[m]), key=lambda m: (load[m], rank[m]))
            out[m] |= 1 << p
            load[m] += 1
    return out


def _sticky(cfg: GroupConfig, mids, owners: dict) -> dict:
    """Balanced assignment keeping owners in place where balance allows."""
    base, extra = divmod(cfg.num_partitions, len(mids))
    rank = {m: i for i, m in enumerate(mids)}
    claimed = {mid: [] for mid in mids}
    for p in sorted(owners):
        claimed[owners[p]].append(p)
    # the members with the most claims get the `extra` larger quotas
    order = sorted(mids, key=lambda m: (-len(claimed[m]), rank[m]))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    out = {m: mask_of(claimed[m][: quota[m]]) for m in mids}
    return _fill(cfg, mids, out, union(out.values()), quota)


def _cooperative_sticky(cfg: GroupConfig, mids, owners: dict, contested: int) -> dict:
    """``sticky``, then R23's adjustment (CooperativeStickyAssignor.adjustAssignment):
    a partition moving away from its owner, and a ``contested`` one (bitmask), is
    withheld this round. Mutation ``assign-before-revoke``: no adjustment."""
    out = _sticky(cfg, mids, owners)
    if "assign-before-revoke" not in cfg.mutations:
        withheld = contested | mask_of(p for p, owner in owners.items() if not out[owner] >> p & 1)
        out = {m: mask & ~withheld for m, mask in out.items()}
    return out


def _deferring(cfg: GroupConfig, mids, owners: dict, withheld: int) -> dict:
    """No revocations while a delay is pending (seed 000, Design II): everyone keeps
    what it owns; unowned partitions other than the ``withheld`` ones (bitmask: lost
    partitions held back, contested ones) go to the least loaded members."""
    out = {m: 0 for m in mids}
    for p, m in owners.items():
        out[m] |= 1 << p
    return _fill(cfg, mids, out, withheld | union(out.values()))


def newest_echo(subscriptions) -> tuple:
    """The newest echo the Subscriptions carry (R31): ``(generation, assigned,
    deferred, revoked, successive)``, zeros when there is none. A member that
    missed the last assignment still echoes an older round."""
    echoes = [sub.echo for sub in subscriptions if sub.echo]
    return max(echoes) if echoes else (0, 0, 0, 0, 0)


def _design2(cfg: GroupConfig, members, mids, owners: dict, contested: int, memory: tuple) -> tuple:
    """A Design II round (seed 000, Design II, Leader process): ``(assignment,
    ScheduledRebalanceTimeout in ticks, echo)``. Lost partitions come first (R33):
    a round holding some back revokes nothing and clears "revoked" (R40); otherwise
    the backoff of revoking rounds decides (R40). ``left``: the fewest ticks left
    any member reports (NOT_SCHEDULED: none), the deadline a new leader inherits.
    ``contested`` partitions (R22) are claimed, so not lost: every round withholds
    them, as Connect revokes its duplicates from every holder (``duplicatedToRevoke``),
    and the next one gives them out with no delay."""
    subs = [sub for _, _, sub in members]
    echo = newest_echo(subs)
    left = min((sub.scheduled for sub in subs if sub.scheduled >= 0), default=NOT_SCHEDULED)
    held, delay = _deferral(cfg, subs, mask_of(owners) | contested, memory, echo, left)
    if held:
        out = _deferring(cfg, mids, owners, held | contested)
        return out, delay, (union(out.values()), held, 0, echo[4])
    out, delay, backoff = _revoking_backoff(cfg, mids, owners, contested, echo, left)
    return out, delay, (union(out.values()), 0) + backoff


def _deferral(cfg: GroupConfig, subs, claimed: int, memory: tuple, echo: tuple, left: int) -> tuple:
    """The Design II decision (seed 000, Design II, Leader process; R31-R33):
    ``(held, delay)``, the bitmask of lost partitions to hold back this round and
    the ScheduledRebalanceTimeout to send with them, in ticks (0 when none held).

    Lost partitions were assigned last round (the newest ``echo``) or deferred,
    and are not in ``claimed`` (the bitmask of partitions some member claims, a
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
    connect = "connect-leader-state" in cfg.mutations
    assigned_prev, deferred_prev = memory if connect else echo[1:3]
    lost = (assigned_prev | deferred_prev) & ~claimed
    forgets = connect or "leader-forgets-delay" in cfg.mutations
    if not lost or not cfg.scheduled_delay_ticks or (not forgets and any(not sub.owned for sub in subs)):
        return 0, 0
    running = (memory[1] if forgets else deferred_prev) & lost
    if running and left <= 0:  # the delay passed: what it held goes out now
        held = lost & ~running
        return held, cfg.scheduled_delay_ticks if held else 0
    return lost, left if running else cfg.scheduled_delay_ticks


def _revoking_backoff(cfg: GroupConfig, mids, owners: dict, contested: int, echo: tuple, left: int) -> tuple:
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
    """
    revoked, successive = echo[3:]
    if revoked and left > 0:  # the backoff runs: keep everything where it is
        return _deferring(cfg, mids, owners, contested), left, (0, successive)
    if left == 0:
        revoked = 0  # the backoff passed: revoking is allowed again
    out = _cooperative_sticky(cfg, mids, owners, contested)
    if all(out[owner] >> p & 1 for p, owner in owners.items()):  # no revocation
        return out, 0, (0, 0 if revoked else successive)
    if not revoked:
        return out, 0, (1, successive)
    successive = min(successive + 1, len(cfg.revoking_backoff_ticks))
    delay = cfg.revoking_backoff_ticks[successive - 1]
    if not delay:  # scheduled.rebalance.max.delay 0: Connect revokes at once (testImmediateRevocationsWhenMaxDelayIs0)
        return out, 0, (1, successive)
    return _deferring(cfg, mids, owners, contested), delay, (1, successive)


def _incremental(cfg: GroupConfig, mids, owners: dict, contested: int) -> tuple:
    """Design III (seed 000, Incremental Resolution of Imbalance; R34): of the
    partitions the cooperative sticky target moves away from their owners, only
    the first ``cfg.max_moves`` are revoked this round; the others stay, and a
    rebalance is scheduled to move more. Returns ``(assignment, more to move)``."""
    out = _cooperative_sticky(cfg, mids, owners, contested)
    moving = sorted(p for p, owner in owners.items() if not out[owner] >> p & 1)
    for p in moving[cfg.max_moves:]:
        out[owners[p]] |= 1 << p
    return out, len(moving) > cfg.max_moves


def assign(cfg: GroupConfig, members, memory: tuple = (0, 0)) -> tuple:
    """The leader's assignment: ``((member_id, Assignment), ...)`` in member order.

    ``members``: ((member_id, group_instance_id, Subscription), ...), non-empty.
    Members are ordered static first by group.instance.id, then dynamic by member
    id (R29; AbstractPartitionAssignor.MemberInfo, KIP-345), so a restarted static
    member with a new member id keeps its place. ``memory``: ``(previous,
    deferred)`` bitmasks, what this leader assigned or held back, and held back,
    itself (``_deferral``; used by the ``leader-forgets-delay`` and
    ``connect-leader-state`` mutations only).
    Mutation ``assign-before-revoke``: the cooperative adjustment is skipped;
    ``withhold-partition`` (test-only): the first partition goes to nobody once
    there are 4 members or more; ``assign-twice`` (test-only): it also goes to the
    last member (R29 order) once there are 2 or more; ``overload-first-member``
    (test-only): the first member (R29 order) takes the last one's partitions.
    """
    order = sorted(members, key=lambda x: (0, x[1]) if x[1] else (1, x[0]))
    mids = [mid for mid, _, _ in order]
    delay, echo = 0, ()
    if cfg.assignor == "range":
        out = _range(cfg, mids)
    elif cfg.assignor == "roundrobin":
        out = _roundrobin(cfg, mids)
    elif cfg.assignor == "sticky":
        out = _sticky(cfg, mids, resolve_claims(cfg, members))
    elif cfg.protocol == "incremental":
        out, more = _incremental(cfg, mids, resolve_claims(cfg, members), contested_claims(cfg, members))
        delay = cfg.rejoin_ticks if more else 0
    elif cfg.deferred:
        out, delay, echo = _design2(cfg, members, mids, resolve_claims(cfg, members), contested_claims(cfg, members),
                                    memory)
    else:
        out = _cooperative_sticky(cfg, mids, resolve_claims(cfg, members), contested_claims(cfg, members))
    if "withhold-partition" in cfg.mutations and len(mids) >= 4:
        out = {m: mask & ~1 for m, mask in out.items()}
    if "assign-twice" in cfg.mutations and len(mids) >= 2:
        out[mids[-1]] |= 1
    if "overload-first-member" in cfg.mutations and len(mids) >= 2:
        out[mids[0]], out[mids[-1]] = out[mids[0]] | out[mids[-1]], 0
    return tuple((mid, Assignment(out[mid], delay, echo)) for mid, _, _ in members)
