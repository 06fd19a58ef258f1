"""``rebalance prove``'s KIP-848 obligations (spec/KIP848.md, K5 and K16): the server
assignors and reconciliation's release rule, each by exhaustive enumeration of every
input within its bound (a proof for that bound), the model's own functions checked.

(a) ``uniform`` (K16): for every member count, partition count and current target
    assignment (each partition held by a member or by nobody): every partition
    assigned exactly once, loads within one, and no more partitions moved than a
    balanced assignment must move (the fewest: each member keeps up to the floor
    quota, the extra places going first to members holding more; KAFKA-18688).
(b) ``range`` (K16): every member count, topic layout and static/dynamic mix: every
    partition exactly once, loads within one per topic.
(c) Reconciliation (K5, CurrentAssignmentBuilder): for every member record (state,
    epoch, assigned and pending-revocation partitions), target, partitions held by
    other members and report of owned partitions (or none): a partition joins the
    member's assignment only if no other member holds it (the release rule); the
    member is UNREVOKED_PARTITIONS only while it reports owning a partition it must
    revoke, at its own epoch; its epoch never passes the target's; UNRELEASED_PARTITIONS
    only while another member holds a target partition; STABLE at the target epoch
    with its whole target.
"""
from __future__ import annotations

import itertools
import time

from rebalance.model.config import GroupConfig, rule
from rebalance.model.consumer_group.assignors import assign
from rebalance.model.consumer_group.group import ConsumerGroupMember
from rebalance.model.consumer_group.messages import MemberState
from rebalance.model.consumer_group.reconciliation import reconcile
from rebalance.model.protocol import ALL_TOPICS, member_id

from .prove import Obligation, _compositions

ASSIGNOR_MEMBERS, ASSIGNOR_PARTITIONS = 4, 6  # (M + 1) ** P current targets per size: 15,625 at 4 x 6
RECONCILE_PARTITIONS = 4  # every record, target, holding and report over 4 partitions


def _fewest_moves(counts: list, total: int) -> int:
    """The fewest partitions a balanced assignment of ``total`` takes from members holding
    ``counts`` (spec/KIP848.md K16; the checker's sticky_target computes it alike)."""
    quota, extras = divmod(total, len(counts))
    over = sum(max(0, n - quota) for n in counts)
    return over - min(extras, sum(1 for n in counts if n > quota))


def _assignment_problem(result: tuple, everything: int) -> str | None:
    given = 0
    for _, parts in result:
        if parts & given:
            return "a partition assigned twice"
        given |= parts
    if given != everything:
        return "a partition left unassigned"
    loads = [bin(p).count("1") for _, p in result]
    return "loads differ by more than one" if max(loads) - min(loads) > 1 else None


def uniform_obligation(max_members: int, max_partitions: int, mutations=frozenset()) -> Obligation:
    t0 = time.perf_counter()
    cases = 0
    name = "uniform: exactly once, balanced, fewest moves"
    for n in range(1, max_partitions + 1):
        cfg = GroupConfig(topics=(("t", n),), protocol="consumer", assignor="uniform", mutations=frozenset(mutations))
        everything = (1 << n) - 1
        for m in range(1, max_members + 1):
            ids = [member_id(k, 1) for k in range(m)]
            members = tuple((mid, 0, ALL_TOPICS) for mid in ids)
            for holders in itertools.product(range(m + 1), repeat=n):  # m: nobody
                current = {mid: sum(1 << p for p, h in enumerate(holders) if h == k) for k, mid in enumerate(ids)}
                cases += 1
                result = rule(cfg, assign)(cfg, members, current, 1)
                why = _assignment_problem(result, everything)
                if why is None:
                    moved = sum(bin(current[mid] & ~parts).count("1") for mid, parts in result)
                    least = _fewest_moves([bin(current[mid]).count("1") for mid in ids], n)
                    why = f"moved {moved} partitions where {least} balance it" if moved > least else None
                if why:
                    return Obligation(name, f"members 1..{max_members}, partitions 1..{max_partitions}", "exhaustive",
                                      "counterexample", time.perf_counter() - t0, {
                                          "members": m, "partitions": n, "violates": why,
                                          "current": {cfg.partition_name(p): f"member {h}" for p, h in enumerate(holders)
                                                      if h < m},
                                          "model_target": {f"member {ids.index(mid)}": [cfg.partition_name(p) for p in
                                                                                         range(n) if parts >> p & 1]
                                                           for mid, parts in result}})
    return Obligation(name, f"members 1..{max_members}, partitions 1..{max_partitions}, every current target "
                      f"({cases:,} inputs)", "exhaustive", "proved", time.perf_counter() - t0)


def range_obligation(max_members: int, max_partitions: int, mutations=frozenset()) -> Obligation:
    t0 = time.perf_counter()
    cases = 0
    name = "range: exactly once, balanced per topic"
    for n in range(1, max_partitions + 1):
        for sizes in _compositions(n):
            topics = tuple((f"t{i}", c) for i, c in enumerate(sizes))
            cfg = GroupConfig(topics=topics, protocol="consumer", assignor="range", mutations=frozenset(mutations))
            for m in range(1, max_members + 1):
                for static in itertools.product((0, 1), repeat=m):
                    cases += 1
                    members = tuple((member_id(k, 1), (m - k) if s else 0, ALL_TOPICS) for k, s in enumerate(static))
                    result = rule(cfg, assign)(cfg, members, {}, (1 << len(topics)) - 1)
                    why = None
                    for t in range(len(topics)):
                        mask = cfg.partitions_of_topics(1 << t)
                        why = why or _assignment_problem(tuple((mid, p & mask) for mid, p in result), mask)
                    if why:
                        return Obligation(name, f"members 1..{max_members}, partitions 1..{max_partitions}",
                                          "exhaustive", "counterexample", time.perf_counter() - t0,
                                          {"members": m, "topics": dict(topics), "violates": why})
    return Obligation(name, f"members 1..{max_members}, partitions 1..{max_partitions}, every topic layout and "
                      f"static/dynamic mix ({cases:,} inputs)", "exhaustive", "proved", time.perf_counter() - t0)


def reconcile_problem(before: ConsumerGroupMember, after: ConsumerGroupMember, target_epoch: int, target: int,
                      held: int, owned) -> str | None:
    """What of K5's contract one reconciliation breaks (the docstring's (c)), or None."""
    added = after.assigned & ~(before.assigned | before.revoking)
    if added & held:
        return "a partition another member holds joined the assignment"
    if after.assigned & after.revoking:
        return "a partition both assigned and pending revocation"
    if after.epoch > target_epoch:
        return f"member epoch {after.epoch} past the target epoch {target_epoch}"
    if after.state == MemberState.UNREVOKED_PARTITIONS:
        if not after.revoking or (owned is not None and not owned & after.revoking):
            return "UNREVOKED_PARTITIONS without reporting a partition to revoke"
        if after.epoch != before.epoch:
            return "a member revoking moved epochs"
    if after.state == MemberState.UNRELEASED_PARTITIONS and not (target & ~after.assigned & held):
        return "UNRELEASED_PARTITIONS with no target partition held by another member"
    if after != before and after.state == MemberState.STABLE and after.epoch == target_epoch and after.assigned != target:
        return "STABLE at the target epoch without its whole target"
    return None


def reconcile_obligation(partitions: int = RECONCILE_PARTITIONS, mutations=frozenset()) -> Obligation:
    t0 = time.perf_counter()
    cfg = GroupConfig(topics=(("t", partitions),), protocol="consumer", assignor="uniform",
                      mutations=frozenset(mutations))
    every = (1 << partitions) - 1
    name = "reconciliation: a partition assigned only once released, epochs within the target's"
    cases = 0
    for places in itertools.product(range(3), repeat=partitions):  # 0: none, 1: assigned, 2: pending revocation
        assigned = sum(1 << p for p, x in enumerate(places) if x == 1)
        revoking = sum(1 << p for p, x in enumerate(places) if x == 2)
        states = [MemberState.UNREVOKED_PARTITIONS] if revoking else [MemberState.STABLE,
                                                                      MemberState.UNRELEASED_PARTITIONS]
        for state, (epoch, target_epoch), target in itertools.product(states, ((2, 2), (2, 3)), range(every + 1)):
            member = ConsumerGroupMember(member_id(0, 1), 0, epoch, epoch - 1, state, assigned, revoking)
            free = every & ~(assigned | revoking)
            for held in _subsets(free):
                for owned in (None, *_subsets(assigned | revoking)):
                    cases += 1
                    after = reconcile(cfg, member, target_epoch, target, held | assigned | revoking, owned, every,
                                      False)
                    why = reconcile_problem(member, after, target_epoch, target, held, owned)
                    if why:
                        return Obligation(name, f"partitions {partitions}", "exhaustive", "counterexample",
                                          time.perf_counter() - t0, {
                                              "member": {"state": state.name, "epoch": epoch,
                                                         "assigned": _names(cfg, assigned),
                                                         "pending_revocation": _names(cfg, revoking)},
                                              "target_epoch": target_epoch, "target": _names(cfg, target),
                                              "held_by_others": _names(cfg, held),
                                              "reported_owned": None if owned is None else _names(cfg, owned),
                                              "model_result": {"state": after.state.name, "epoch": after.epoch,
                                                               "assigned": _names(cfg, after.assigned),
                                                               "pending_revocation": _names(cfg, after.revoking)},
                                              "violates": why})
    return Obligation(name, f"every member record, target, holding and report over {partitions} partitions "
                      f"({cases:,} inputs)", "exhaustive", "proved", time.perf_counter() - t0)


def _subsets(mask: int):
    sub = mask
    while True:
        yield sub
        if sub == 0:
            return
        sub = (sub - 1) & mask


def _names(cfg: GroupConfig, mask: int) -> list:
    return [cfg.partition_name(p) for p in range(mask.bit_length()) if mask >> p & 1]


def obligations(max_members: int, max_partitions: int, mutations=frozenset()):
    """The KIP-848 obligations, in order (each an Obligation), within prove's bound."""
    consumer = frozenset(m for m in mutations)
    yield uniform_obligation(min(max_members, ASSIGNOR_MEMBERS), min(max_partitions, ASSIGNOR_PARTITIONS), consumer)
    yield range_obligation(min(max_members, ASSIGNOR_MEMBERS), min(max_partitions, ASSIGNOR_PARTITIONS), consumer)
    yield reconcile_obligation(min(max_partitions, RECONCILE_PARTITIONS), consumer)
