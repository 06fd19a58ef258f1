"""Proof obligations on single rounds of Designs II and III (issue 43; spec/SPEC.md
R31-R34, R40, R67, R68), discharged by exhaustive enumeration: every input within
a small bound is given to the model's own assignor (model/assignors.py ``assign``,
the subject) and its output judged by conditions written here from the SPEC
rules, never by the model's rule functions (tests/test_independence.py).

* **Design III: moves within the allowance** (R34, R67, R68). Every round that
  holds nothing back (no partition lost: the echo's assigned partitions are all
  claimed) with 1..3 members, 1..5 tasks, or 1..4 connectors beside a task,
  each resource claimed by at most one member, ``max_moves`` 1..3 and a
  connector's cost 1..3: each kind's owned resources (R22) given to no
  one of their owners number at most max(1, ⌊max_moves / cost⌋); the round gives
  each resource once; and a round that leaves the group unbalanced in a kind
  either revokes (its revoking members rejoin at once, R18) or sends the rejoin
  interval as its ScheduledRebalanceTimeout (R34: "and moves K more, until it is
  balanced").

* **Design II: the deferral's timing** (R32, R33, R40). Every round of the
  deferred protocol with 1..3 members and 1..3 partitions, each claimed by at
  most one member, an echo of the last round (what it assigned and deferred,
  whether it revoked and the backoff count) and the ScheduledRebalanceTimeout
  left that the members report (none, passed, 1 or 2 ticks; a leader reads the
  fewest, R33): lost partitions (assigned or deferred last
  round, claimed by nobody now) are held back only under a ScheduledRebalanceTimeout
  of 1..scheduled.rebalance.max.delay ticks; a delay already running keeps its
  deadline (no more ticks than the fewest any member reports); those deferred are
  given out in the round a member reports the timeout passed; nothing is held
  with a member that owns nothing present; and while a revocation backoff runs
  (the last round revoked, a member reports ticks left) no owned partition moves.
"""
from __future__ import annotations

import itertools
import time

from rebalance.model.assignors import assign
from rebalance.model.config import GroupConfig
from rebalance.model.mutations import REGISTRY
from rebalance.model.protocol import EMPTY_SUBSCRIPTION, NOT_SCHEDULED, Subscription, mask_of, member_id, union

from .properties import claim_owners
from .render import lane

ALLOWANCE = (3, 5)  # the largest rounds: members, resources (four connectors beside a task: two connector moves)
DEFERRAL = (3, 3)  # members, partitions
LEFT = (NOT_SCHEDULED, 0, 1, 2)  # a member's ScheduledRebalanceTimeout left: none, passed, 1 or 2 ticks


class _Member:
    """A member as ``claim_owners`` reads the coordinator's records (member id, Subscription)."""

    __slots__ = ("member_id", "subscription")

    def __init__(self, mid: int, sub: Subscription):
        self.member_id, self.subscription = mid, sub


def _applicable(mutations, protocol: str) -> frozenset:
    """The ``mutations`` that change anything under ``protocol`` (model/mutations.py REGISTRY)."""
    return frozenset(m for m in mutations if protocol in REGISTRY[m].protocols)


def _claim_vectors(members: int, resources: int):
    """Every way ``resources`` resources are claimed by at most one of ``members``
    members: per resource its claimant's index, or -1 for none."""
    return itertools.product(range(-1, members), repeat=resources)


def _given(result) -> dict:
    return {mid: a.partitions for mid, a in result}


def _twice(given: dict) -> int:
    seen = twice = 0
    for mask in given.values():
        twice |= seen & mask
        seen |= mask
    return twice


def _unbalanced(cfg: GroupConfig, given: dict) -> str | None:
    for kind, pool, _ in cfg.kinds:
        loads = [(mask & pool).bit_count() for mask in given.values()]
        held = union(given.values()) & pool
        if held != pool:
            return f"{kind} given to nobody"
        if max(loads) - min(loads) > 1:
            return f"{kind} loads {sorted(loads)}"
    return None


def _input_json(cfg: GroupConfig, members) -> list:
    return [{"member": lane(k), "claims": [cfg.partition_name(p) for p in range(cfg.num_partitions) if sub.owned >> p & 1],
             "generation": sub.generation, "echo": list(sub.echo), "scheduled": sub.scheduled}
            for k, (_, _, sub) in enumerate(members)]


def _output_json(cfg: GroupConfig, result) -> dict:
    return {lane(k): {"assigned": [cfg.partition_name(p) for p in range(cfg.num_partitions) if a.partitions >> p & 1],
                      "scheduled": a.scheduled} for k, (_, a) in enumerate(result)}


def _allowance_violation(cfg: GroupConfig, members, result) -> str | None:
    """Why a Design III round breaks R34/R67 (see the module docstring), or None."""
    given = _given(result)
    if _twice(given):
        return "a resource given twice"
    owners, _ = claim_owners(_Member(mid, sub) for mid, _, sub in members)
    moved = mask_of(p for p, mid in owners.items() if not given[mid] >> p & 1)
    for kind, pool, cost in cfg.kinds:
        allowed = max(1, cfg.max_moves // cost)
        if (moved & pool).bit_count() > allowed:
            return f"moves {(moved & pool).bit_count()} {kind}, more than the {allowed} max_moves {cfg.max_moves} pays for"
    scheduled = {a.scheduled for _, a in result}
    why = _unbalanced(cfg, given)
    if why and not moved and scheduled != {cfg.rejoin_ticks}:
        return (f"leaves {why}, revokes nothing and schedules {sorted(scheduled)} ticks, not the rejoin "
                f"interval {cfg.rejoin_ticks}")
    return None


def _allowance_layouts(resources: int):
    """``(connectors, tasks)``: tasks alone (1..``resources``), then 1..``resources`` - 1
    connectors beside one task (two connector moves need four)."""
    yield from ((0, t) for t in range(1, resources + 1))
    yield from ((c, 1) for c in range(1, resources))


def allowance_obligation(largest: int, resources: int, mutations=frozenset()) -> tuple:
    """Design III's moves within the allowance (module docstring) up to ``largest``
    members and ``resources`` resources: ``(why or None, counterexample, rounds)``.
    One claimant per resource, so the claims' generations (R22's tie-break)
    change nothing and are all 1."""
    mutations = _applicable(mutations, "incremental")
    cases = 0
    for connectors, tasks in _allowance_layouts(resources):
        for max_moves, cost in itertools.product((1, 2, 3), (1, 2, 3) if connectors else (2,)):
            cfg = GroupConfig(protocol="incremental", topics=(("t", tasks),), connectors=connectors,
                              connector_cost=cost, max_moves=max_moves, mutations=mutations)
            n = cfg.num_partitions
            for m in range(1, largest + 1):
                for claims in _claim_vectors(m, n):
                    cases += 1
                    members = _allowance_input(cfg, m, claims)
                    result = assign(cfg, members)
                    why = _allowance_violation(cfg, members, result)
                    if why:
                        return why, {"max_moves": max_moves, "connector_cost": cost,
                                     "input": _input_json(cfg, members), "output": _output_json(cfg, result)}, cases
    return None, None, cases


def _allowance_input(cfg: GroupConfig, m: int, claims: tuple) -> tuple:
    """Members claiming per ``claims`` (at generation 1), each echoing a last
    round that assigned every claimed resource and deferred nothing (so nothing is
    lost: the round holds nothing back, R68); a member claiming nothing is new."""
    claimed = mask_of(p for p, k in enumerate(claims) if k >= 0)
    out = []
    for k in range(m):
        owned = mask_of(p for p, c in enumerate(claims) if c == k)
        sub = Subscription(owned, 1, (1, claimed, 0, 0, 0)) if owned else EMPTY_SUBSCRIPTION
        out.append((member_id(k, 1), 0, sub))
    return tuple(out)


def _deferral_violation(cfg: GroupConfig, members, echo: tuple, result) -> str | None:
    """Why a Design II round breaks R32/R33/R40's timing (module docstring), or None."""
    given = _given(result)
    if _twice(given):
        return "a partition given twice"
    subs = [sub for _, _, sub in members]
    claimed = union(sub.owned for sub in subs)
    lost = (echo[1] | echo[2]) & ~claimed
    held = lost & ~union(given.values())
    delays = {a.scheduled for _, a in result}
    reported = [sub.scheduled for sub in subs if sub.scheduled != NOT_SCHEDULED]
    if held:
        if len(delays) != 1 or not 1 <= min(delays) <= cfg.scheduled_delay_ticks:
            return (f"holds lost partitions back under a ScheduledRebalanceTimeout of {sorted(delays)} ticks, "
                    f"not 1..{cfg.scheduled_delay_ticks}")
        if echo[2] & held and reported and min(reported) > 0 and min(delays) > min(reported):
            return f"a running delay with {min(reported)} ticks left is extended to {min(delays)}"
        if echo[2] & held and reported and min(reported) == 0:
            return "partitions deferred under a delay that passed are held back again"
        if any(not sub.owned for sub in subs):
            return "lost partitions held back while a member that owns nothing is there"
    backoff = echo[3] and reported and min(reported) > 0 and not lost
    owners, _ = claim_owners(_Member(mid, sub) for mid, _, sub in members)
    if backoff and any(not given[mid] >> p & 1 for p, mid in owners.items()):
        return "an owned partition moves while the revocation backoff runs"
    return None


def deferral_obligation(largest: int, partitions: int, mutations=frozenset()) -> tuple:
    """Design II's deferral timing (module docstring) up to ``largest`` members and
    ``partitions`` partitions: ``(why, counterexample, cases)``."""
    mutations = _applicable(mutations, "deferred")
    cases = 0
    for n in range(1, partitions + 1):
        cfg = GroupConfig(protocol="deferred", topics=(("t", n),), mutations=mutations)
        every = cfg.all_partitions
        for m in range(1, largest + 1):
            for claims in _claim_vectors(m, n):
                claimed = mask_of(p for p, k in enumerate(claims) if k >= 0)
                for assigned, deferred in _echo_masks(every, claimed):
                    for revoked, successive in ((0, 0), (1, 1), (1, 2)):
                        echo = (1, assigned, deferred, revoked, successive)
                        for left in LEFT:
                            cases += 1
                            members = tuple((member_id(k, 1), 0, Subscription(
                                mask_of(p for p, c in enumerate(claims) if c == k), 1, echo, left))
                                for k in range(m))
                            result = assign(cfg, members)
                            why = _deferral_violation(cfg, members, echo, result)
                            if why:
                                return why, {"scheduled_rebalance_max_delay_ticks": cfg.scheduled_delay_ticks,
                                             "input": _input_json(cfg, members),
                                             "output": _output_json(cfg, result)}, cases
    return None, None, cases


def _echo_masks(every: int, claimed: int):
    """The last round's (assigned, deferred) partitions: disjoint, assigned covering
    every claim (what members own they were assigned), deferred among the rest."""
    rest = every & ~claimed
    for extra in _submasks(rest):
        for deferred in _submasks(rest & ~extra):
            yield claimed | extra, deferred


def _submasks(mask: int):
    sub = mask
    while True:
        yield sub
        if not sub:
            return
        sub = (sub - 1) & mask


def obligations(max_members: int, max_partitions: int, mutations=frozenset()):
    """Both obligations, up to ``prove``'s bound and at most ``ALLOWANCE`` and
    ``DEFERRAL``, as ``(name, bound, why or None, counterexample, seconds)``."""
    t0 = time.perf_counter()
    members, resources = min(max_members, ALLOWANCE[0]), min(max_partitions, ALLOWANCE[1])
    why, cx, cases = allowance_obligation(members, resources, mutations)
    yield ("Design III: moves within the allowance, the rest scheduled (R34, R67)",
           f"members 1..{members}, tasks 1..{resources} or connectors 1..{resources - 1} beside a task, "
           f"max_moves 1..3, connector cost 1..3, every claim, nothing lost ({cases:,} rounds)",
           why, cx, time.perf_counter() - t0)
    t0 = time.perf_counter()
    members, partitions = min(max_members, DEFERRAL[0]), min(max_partitions, DEFERRAL[1])
    why, cx, cases = deferral_obligation(members, partitions, mutations)
    yield ("Design II: lost partitions held once, a running delay kept, none held past it (R32, R33, R40)",
           f"members 1..{members}, partitions 1..{partitions}, every claim, echo and "
           f"ScheduledRebalanceTimeout left (none, 0, 1, 2) ({cases:,} rounds)", why, cx, time.perf_counter() - t0)
