"""``rebalance prove``: proof obligations discharged with z3 (spec/SPEC.md, section 9).

(a) The assignors, for every input up to a bound (``max_members`` members,
    ``max_partitions`` partitions, any previous ownership with any generations):
    every partition assigned exactly once, loads within one (per topic for
    ``range``), and the cooperative adjustment never gives a partition to anyone
    but the member holding its newest claim (R22, R23); moving partitions are
    withheld, all others assigned exactly once.

    * ``range`` and ``roundrobin`` read no subscription: their inputs are the member
      count and the topic layout, enumerated exhaustively (every composition of
      every partition count into topics) and each output of model/assignors.py
      checked.
    * ``sticky`` and ``cooperative-sticky`` read the claims: inputs are encoded
      symbolically (a claim bit per member and partition, an integer generation per
      member) through ``transcribe_sticky``, a transcription of model/assignors.py
      written once over a logic (like spec/actions.py), and z3 searches, for each
      member and partition count, for an input breaking the contract: ``unsat`` is a
      proof *about the transcription* for every input of that size. The
      transcription is held to the model's assignors by the obligation
      ``transcription agrees with model/assignors.py``, which is not a proof for
      every input: whole assignments agree on every input with up to 3 members
      and 3 partitions (all claims, generations 0..2) and on a seeded sample up
      to the bound (generations 0..7); claim resolution (R22, where generations
      are read) agrees on every generation vector in 0..7 for every member count
      up to the bound and every set of claimants. About the model, the sticky
      obligations hold as far as that comparison reaches.

    * Differing subscriptions (R61, R65): every assignor, exhaustively on small
      inputs (``subscriptions_obligation``): every topic layout, every member's
      subscription, and for the sticky assignors every claim: each partition
      given once and only to a subscriber of its topic, every partition some
      member subscribes to given (the cooperative assignor withholding only
      claimed ones, never one another member claims), and the sticky target
      balanced as Kafka defines it for non-uniform subscriptions.

(b) Stickiness: the number of owned partitions the cooperative sticky target
    moves, against the minimum over all balanced assignments (z3's Optimize), as a
    ratio over a seeded sample; and, for each size up to the bound, z3 searches
    for an input and a balanced assignment moving fewer: ``unsat`` proves the
    assignor minimal there.

(c) The inductive invariant of spec/actions.py (``INVARIANT``) over the spec's
    actions at a fixed size (``SLOTS`` client slots, ``PARTITIONS`` partitions,
    unbounded generations): Init ⇒ Inv, Inv ∧ Next ⇒ Inv′ for every action, and
    Inv ⇒ exclusive_ownership.

A counterexample is concrete: (a) and (b) give the input (each member's claimed
partitions and generation) and what the model's own assignor returns on it; (c)
gives the abstract states and the action.
"""
from __future__ import annotations

import itertools
import random
import time
from typing import Callable, NamedTuple

import z3

from rebalance.model.assignors import assign, contested_claims, resolve_claims
from rebalance.model.config import GroupConfig
from rebalance.model.mutations import REGISTRY
from rebalance.model.protocol import (EMPTY_SUBSCRIPTION, Subscription, mask_of, member_id, partitions_of, slot_of,
                                      union)
from rebalance.spec import actions as spec
from rebalance.spec.actions import PYTHON, View

from . import round_obligations
from .render import lane, partitions

from .prove_bounds import (COUNTING_PARTITIONS, LIMITS, MAX_MEMBERS, MAX_PARTITIONS, PLUGIN_EXAMPLES,  # noqa: F401
                           PLUGIN_GENERATIONS, PLUGIN_MEMBERS, PLUGIN_PARTITIONS)
SLOTS, PARTITIONS = 3, 4  # the size of the inductive-invariant proof
TIMEOUT_MS = 120_000  # per z3 query
WITHHELD, NOBODY = -1, -2  # transcription: a moving partition given to nobody; no member could take it
CONTESTED = -3  # resolve: claims tied at the highest generation, so no owner (R22)
SAMPLE, SEED = 200, 5


class Obligation(NamedTuple):
    """One proof obligation's outcome. ``status``: "proved", "not violated" (a search found nothing), "counterexample" or
    "unknown" (z3 gave up); ``bound``: exactly what was covered; ``method``: how."""

    name: str
    bound: str
    method: str
    status: str
    seconds: float
    counterexample: object = None
    detail: str = ""

    def as_json(self) -> dict:
        return {"name": self.name, "bound": self.bound, "method": self.method, "status": self.status,
                "seconds": round(self.seconds, 3), "counterexample": self.counterexample, "detail": self.detail}


# --- the sticky assignors, transcribed over a logic ------------------------------

WIDTH = 6  # bits of the transcription's numbers: counts up to 16 partitions, -2..31
GENERATIONS = 8  # claim generations range over 0..7: as many orders (with ties) as 8 members can have


class Z3BitVectors:
    """The logic of spec/actions.py for z3, numbers as WIDTH-bit vectors (signed
    comparisons): bit-blasted, z3 decides these counting problems far faster than
    over integers."""

    And, Or, Not, Implies = (staticmethod(f) for f in (z3.And, z3.Or, z3.Not, z3.Implies))

    @staticmethod
    def If(c, a, b):
        if isinstance(a, int) and isinstance(b, int):
            a = z3.BitVecVal(a, WIDTH)
        return z3.If(c, a, b)


Z3 = Z3BitVectors()


def resolve(L, claims, generations, mutations=frozenset()) -> list:
    """R22 over a logic: per partition, the member holding the newest claim (the
    only claimant with the highest generation), CONTESTED if several claims tie at
    the highest generation (model/assignors.py, contested_claims), or -1 if none.
    ``claims[k][p]``: member k claims partition p; ``generations[k]``: its claim's
    generation. Mutation ``ignore-owned-generation``: claims older than the newest
    in the group are ignored (model/assignors.py, resolve_claims); mutation
    ``contested-claims-unowned``: a contested partition is -1."""
    m, n = len(claims), len(claims[0])
    if "ignore-owned-generation" in mutations:
        claiming = [L.Or(*claims[k]) for k in range(m)]
        claims = [[L.And(claims[k][p], *(L.Implies(claiming[j], generations[j] <= generations[k])
                                           for j in range(m))) for p in range(n)] for k in range(m)]
    owners = []
    for p in range(n):
        owner = -1
        if "contested-claims-unowned" not in mutations:
            tied = [L.And(claims[k][p], claims[j][p], generations[k] == generations[j],
                          *(L.Implies(claims[i][p], generations[i] <= generations[k]) for i in range(m)))
                    for k in range(m) for j in range(k + 1, m)]
            owner = L.If(L.Or(*tied), CONTESTED, -1) if tied else -1
        for k in reversed(range(m)):
            newest = L.And(claims[k][p], *(L.Implies(claims[j][p], generations[j] < generations[k])
                                           for j in range(m) if j != k))
            owner = L.If(newest, k, owner)
        owners.append(owner)
    return owners


class Sticky(NamedTuple):
    """A transcribed sticky assignment: per member its ``quota`` and ``kept`` load
    (claims kept before the fill); per partition its ``owners`` (``resolve``), the
    balanced ``target`` and the ``final`` assignment of this round."""

    owners: list
    quota: list
    kept: list
    target: list
    final: list
    fill: object  # the fill's choices are legal: each member ends at most at its quota


def transcribe_sticky(L, m: int, owners: list, cooperative: bool, mutations=frozenset(), choices=None) -> Sticky:
    """model/assignors.py's ``_sticky`` (and ``_cooperative_sticky``) over a logic, for
    ``m`` members in assignor order and ``owners`` from ``resolve``.

    The fill gives each partition not kept by its owner, in partition order, to a
    member under quota. Without ``choices`` it is the model's: the least loaded
    (ties: assignor order), NOBODY if none is under quota. With ``choices`` (one
    term per partition) it is any member under quota: ``choices[p]`` takes the
    partition, and ``fill`` says every member ends at or under its quota, which
    is what the greedy choice guarantees at every step (loads only grow). That
    abstraction covers the greedy choice, so a proof with it is a proof for the
    model; z3 stays fast on it, and its counterexamples are replayed on the model.
    """
    n = len(owners)
    base, extra = divmod(n, m)
    count = [sum(L.If(o == k, 1, 0) for o in owners) for k in range(m)]
    # the `extra` larger quotas go to the members with the most claims (ties: order)
    quota = [base + L.If(sum(L.If(count[j] >= count[k] if j < k else count[j] > count[k], 1, 0)
                             for j in range(m) if j != k) < extra, 1, 0) for k in range(m)]
    kept = []
    for p, o in enumerate(owners):
        position = sum(L.If(owners[q] == o, 1, 0) for q in range(p))
        kept.append(L.And(o >= 0, position < sum(L.If(o == k, quota[k], 0) for k in range(m))))
    load = [sum(L.If(L.And(kept[p], owners[p] == k), 1, 0) for p in range(n)) for k in range(m)]
    kept_load = list(load)
    target = []
    for p in range(n):
        if choices is None:  # the least loaded member under quota
            under = [load[k] < quota[k] for k in range(m)]
            choose = [L.And(under[k], *(L.Not(L.And(under[j], load[j] <= load[k] if j < k else load[j] < load[k]))
                                        for j in range(m) if j != k)) for k in range(m)]
        else:
            choose = [choices[p] == k for k in range(m)]
        chosen = NOBODY
        for k in reversed(range(m)):
            chosen = L.If(choose[k], k, chosen)
        target.append(L.If(kept[p], owners[p], chosen))
        load = [load[k] + L.If(L.And(L.Not(kept[p]), choose[k]), 1, 0) for k in range(m)]
    fill = L.And(*(load[k] <= quota[k] for k in range(m)))
    if not cooperative or "assign-before-revoke" in mutations:
        final = list(target)
    else:  # moving or contested: withheld (R23)
        final = [L.If(L.Or(L.And(o >= 0, t != o), o == CONTESTED), WITHHELD, t) for o, t in zip(owners, target)]
    return Sticky(owners, quota, kept_load, target, final, fill)


def contract(L, m: int, claims: list, x: Sticky, cooperative: bool) -> list:
    """The assignor's contract as named conditions, ``[(name, condition), ...]``;
    ``claims``: the newest claim per partition (``resolve`` without mutations)."""
    n = len(x.target)
    loads = [sum(L.If(t == k, 1, 0) for t in x.target) for k in range(m)]
    out = [("the fill never runs out of members under quota",
            L.And(sum(x.quota) == n, *(x.kept[k] <= x.quota[k] for k in range(m)))),
           ("every partition assigned exactly once", L.And(*(L.And(t >= 0, t < m) for t in x.target))),
           ("loads within one", L.And(*(loads[j] - loads[k] <= 1 for j in range(m) for k in range(m))))]
    if cooperative:
        out.append(("nothing assigned while another member holds its newest claim (R23)",
                    L.And(*(L.Or(f < 0, o < 0, f == o) for f, o in zip(x.final, claims)))))
        out.append(("a partition claimed by several members at its newest generation assigned to nobody (R23; "
                    "CooperativeStickyAssignor.adjustAssignment)",
                    L.And(*(L.Implies(o == CONTESTED, f == WITHHELD) for f, o in zip(x.final, claims)))))
        out.append(("only moving and contested partitions withheld, the rest assigned as targeted",
                    L.And(*(L.If(f == WITHHELD, L.Or(L.And(o >= 0, t != o), o == CONTESTED), f == t)
                            for f, o, t in zip(x.final, x.owners, x.target)))))
    return out


def moves(L, owners: list, target: list):
    """Owned partitions the target gives to another member."""
    return sum(L.If(L.And(o >= 0, t != o), 1, 0) for o, t in zip(owners, target))


def _symbolic_sticky(m: int, n: int, cooperative: bool, mutations) -> tuple:
    """z3 terms for a symbolic input: (claims, generations, domain and legal fill, claim owners, Sticky)."""
    claims = [[z3.Bool(f"claim_{k}_{p}") for p in range(n)] for k in range(m)]
    generations = [z3.BitVec(f"generation_{k}", WIDTH) for k in range(m)]
    choices = [z3.BitVec(f"fill_{p}", WIDTH) for p in range(n)]
    x = transcribe_sticky(Z3, m, resolve(Z3, claims, generations, mutations), cooperative, mutations, choices)
    domain = [*(z3.And(g >= 0, g < GENERATIONS) for g in generations), *(z3.And(c >= 0, c < m) for c in choices),
              x.fill]
    return claims, generations, domain, resolve(Z3, claims, generations), x


# --- concrete inputs and the model's own answer ------------------------------------

def _members(claims, generations, ids=lambda k: k + 1) -> tuple:
    """The JoinGroup member list for the model's assignor: member k has id
    ``ids(k)`` (by default k + 1, so assignor order is index order) and subscribes
    with its claims."""
    out = []
    for k, row in enumerate(claims):
        mask = mask_of(p for p, c in enumerate(row) if c)
        out.append((ids(k), 0, Subscription(mask, generations[k]) if mask else EMPTY_SUBSCRIPTION))
    return tuple(out)


def model_assignment(assignor: str, n: int, claims, generations, mutations=frozenset()) -> list:
    """What model/assignors.py assigns, per partition: the member index, -1 for
    nobody. Raises AssertionError if it gives a partition twice."""
    protocol = "cooperative" if assignor == "cooperative-sticky" else "eager"
    cfg = GroupConfig(topics=(("t", n),), protocol=protocol, assignor=assignor,
                      mutations=frozenset(mutations), initial_rebalance_delay=False)
    out = [-1] * n
    for mid, a in assign(cfg, _members(claims, generations)):
        for p in partitions_of(a.partitions):
            assert out[p] == -1, f"partition {p} assigned twice"
            out[p] = mid - 1
    return out


def _input_json(claims, generations) -> list:
    return [{"member": lane(k), "claims": [f"t-{p}" for p, c in enumerate(row) if c],
             "generation": generations[k] if any(row) else None} for k, row in enumerate(claims)]


def _assignment_json(per_partition: list, m: int) -> dict:
    return {lane(k): [f"t-{p}" for p, x in enumerate(per_partition) if x == k] for k in range(m)}


def _concrete_input(model, claims, generations) -> tuple:
    c = [[z3.is_true(model.eval(x, model_completion=True)) for x in row] for row in claims]
    g = [model.eval(x, model_completion=True).as_long() for x in generations]
    return c, g


def _solver(bits: bool = False) -> z3.Solver:
    """A solver with the per-query timeout; ``bits``: bit-blast to SAT."""
    s = z3.Then("simplify", "solve-eqs", "bit-blast", "sat").solver() if bits else z3.Solver()
    s.set("timeout", TIMEOUT_MS)
    return s


# --- (a) the assignors --------------------------------------------------------------

def _compositions(n: int):
    """Every topic layout of n partitions: ordered partition counts summing to n."""
    for cuts in itertools.product((False, True), repeat=n - 1):
        sizes, size = [], 1
        for cut in cuts:
            if cut:
                sizes.append(size)
                size = 1
            else:
                size += 1
        sizes.append(size)
        yield tuple(sizes)


def exhaustive_obligation(assignor: str, max_members: int, max_partitions: int, mutations=frozenset()) -> Obligation:
    """``range`` or ``roundrobin``: every member count and topic layout within the
    bound, the model's output checked: each partition exactly once, loads within
    one (range: within each topic, its documented imbalance across topics)."""
    t0 = time.perf_counter()
    cases = 0
    for n in range(1, max_partitions + 1):
        for sizes in _compositions(n):
            topics = tuple((f"t{i}", c) for i, c in enumerate(sizes))
            cfg = GroupConfig(topics=topics, protocol="eager", assignor=assignor, mutations=frozenset(mutations))
            for m in range(1, max_members + 1):
                cases += 1
                result = assign(cfg, tuple((k + 1, 0, EMPTY_SUBSCRIPTION) for k in range(m)))
                why = _check_output(result, topics if assignor == "range" else ((None, n),), n)
                if why:
                    return Obligation(f"{assignor}: exactly once, balanced", _bound(max_members, max_partitions),
                                      "exhaustive", "counterexample", time.perf_counter() - t0, {
                                          "members": m, "topics": dict(topics), "violates": why,
                                          "model_assignment": {lane(mid - 1): [cfg.partition_name(p) for p in partitions_of(a.partitions)]
                                                               for mid, a in result}})
    return Obligation(f"{assignor}: exactly once, balanced{' per topic' if assignor == 'range' else ''}",
                      _bound(max_members, max_partitions) + f", every topic layout ({cases:,} inputs; "
                      "the assignor reads no subscription)", "exhaustive", "proved", time.perf_counter() - t0)


SUBSCRIPTION_MEMBERS, SUBSCRIPTION_PARTITIONS = 3, 3  # the non-uniform obligation's largest inputs


def _subscribed_violation(cfg: GroupConfig, members, result) -> str | None:
    """Why ``result`` (``assign``'s) breaks R61/R65's contract on ``members``, or None."""
    allowed = {mid: cfg.partitions_of_topics(sub.topics) for mid, _, sub in members}
    claimed = {mid: sub.owned for mid, _, sub in members}
    given = {mid: a.partitions for mid, a in result}
    seen = 0
    for mid, mask in given.items():
        if seen & mask:
            return f"{partitions(cfg, seen & mask)} assigned twice"
        if mask & ~allowed[mid]:
            return f"{partitions(cfg, mask & ~allowed[mid])} assigned to {lane(slot_of(mid))}, not subscribed"
        seen |= mask
    missing = union(allowed.values()) & ~seen
    cooperative = cfg.assignor == "cooperative-sticky"
    if missing & ~(union(claimed.values()) if cooperative else 0):
        return f"{partitions(cfg, missing)} assigned to nobody"
    if cooperative:
        for mid, mask in given.items():
            elsewhere = union(c for m, c in claimed.items() if m != mid) & mask
            if elsewhere:
                return f"{partitions(cfg, elsewhere)} assigned to {lane(slot_of(mid))} while claimed elsewhere"
    elif cfg.assignor == "sticky":
        for mid, mask in given.items():
            for other, room in allowed.items():
                if given[other].bit_count() < mask.bit_count() - 1 and mask & room:
                    return (f"unbalanced: {partitions(cfg, mask & room)} of {lane(slot_of(mid))} could go to "
                            f"{lane(slot_of(other))}")
    return None


def subscriptions_obligation(max_members: int, max_partitions: int, mutations=frozenset()) -> Obligation:
    """R61, R65: every assignor on differing subscriptions, exhaustively up to
    ``SUBSCRIPTION_MEMBERS`` members and ``SUBSCRIPTION_PARTITIONS`` partitions
    (capped by the bound): every topic layout, every non-empty subscription per
    member, and for the sticky assignors every claim of each partition by one
    member or none (one generation). The model's output is checked by
    ``_subscribed_violation``; the cooperative assignor's target, the eager
    sticky one's output on the same input, is held to the balance."""
    t0 = time.perf_counter()
    name = "differing subscriptions: subscribers only, exactly once, balanced (R61, R65)"
    mm, mp = min(max_members, SUBSCRIPTION_MEMBERS), min(max_partitions, SUBSCRIPTION_PARTITIONS)
    cases = 0
    for n in range(1, mp + 1):
        for sizes in _compositions(n):
            topics = tuple((f"t{i}", c) for i, c in enumerate(sizes))
            every = (1 << len(topics)) - 1
            for m in range(1, mm + 1):
                for subs in itertools.product(range(1, every + 1), repeat=m):
                    for assignor in ("range", "roundrobin", "sticky", "cooperative-sticky"):
                        cfg = GroupConfig(topics=topics, protocol="cooperative" if assignor == "cooperative-sticky"
                                          else "eager", assignor=assignor, mutations=frozenset(mutations),
                                          subscriptions=subs)
                        claim_sets = (itertools.product(range(-1, m), repeat=n) if "sticky" in assignor
                                      else [(-1,) * n])
                        for owners in claim_sets:
                            members = tuple((member_id(k, 1), 0, Subscription(
                                mask_of(p for p in range(n) if owners[p] == k), 1 if k in owners else -1,
                                topics=subs[k])) for k in range(m))
                            cases += 1
                            result = assign(cfg, members)
                            why = _subscribed_violation(cfg, members, result)
                            if why:
                                return Obligation(name, _bound(mm, mp), "exhaustive", "counterexample",
                                                  time.perf_counter() - t0, {
                                    "assignor": assignor, "topics": dict(topics), "violates": why,
                                    "subscriptions": {lane(k): [topics[i][0] for i in range(len(topics))
                                                                if subs[k] >> i & 1] for k in range(m)},
                                    "claims": {lane(k): partitions(cfg, members[k][2].owned) for k in range(m)},
                                    "model_assignment": {lane(slot_of(mid)): partitions(cfg, a.partitions)
                                                         for mid, a in result}})
    return Obligation(name, _bound(mm, mp) + f", every topic layout, subscription and claim ({cases:,} inputs)",
                      "exhaustive", "proved", time.perf_counter() - t0)


def _check_output(result, groups, n: int) -> str | None:
    seen = 0
    for _, a in result:
        if seen & a.partitions:
            return "a partition assigned twice"
        seen |= a.partitions
    if seen != (1 << n) - 1:
        return "a partition assigned to nobody"
    start = 0
    for _, count in groups:
        span = ((1 << count) - 1) << start
        loads = [bin(a.partitions & span).count("1") for _, a in result]
        if max(loads) - min(loads) > 1:
            return f"loads {sorted(loads)} not within one"
        start += count
    return None


def _bound(max_members: int, max_partitions: int) -> str:
    return f"members 1..{max_members}, partitions 1..{max_partitions}"


COUNTING = frozenset({"loads within one"})  # conditions whose proofs are counting arguments: slow in z3


def sticky_obligation(assignor: str, max_members: int, max_partitions: int, mutations=frozenset(),
                      on_size: Callable | None = None, counting: bool = False) -> Obligation:
    """``sticky`` or ``cooperative-sticky``: for each size, z3 looks for claims and
    generations breaking the contract (``contract``): the conditions in COUNTING
    if ``counting``, the others otherwise. An input found with the abstracted
    fill is replayed through the exact transcription and the model; if they keep
    the contract on it (the greedy fill chose differently), the input is excluded
    and z3 asked again."""
    cooperative = assignor == "cooperative-sticky"
    if counting:
        name = f"{assignor}: loads within one"
    else:
        name = f"{assignor}: exactly once" + (", never assigned while claimed elsewhere" if cooperative else "")
    bound = (f"the transcription: {_bound(max_members, max_partitions)}, any claims, any generations "
             f"(0..{GENERATIONS - 1}); the model: as far as 'transcription agrees' reaches")
    method = "z3 symbolic (fill abstracted to any member under quota)"
    t0 = time.perf_counter()
    for m, n in _sizes(max_members, max_partitions):
        claims, generations, domain, newest, x = _symbolic_sticky(m, n, cooperative, mutations)
        s = _solver(bits=True)
        s.add(*domain, z3.Or(*(z3.Not(c) for name_, c in contract(Z3, m, newest, x, cooperative)
                               if (name_ in COUNTING) == counting)))
        while True:
            verdict = s.check()
            if verdict != z3.sat:
                break
            c, g = _concrete_input(s.model(), claims, generations)
            found = _assignor_counterexample(assignor, m, n, c, g, mutations, cooperative)
            if found["violates"]:
                return Obligation(name, bound, method, "counterexample", time.perf_counter() - t0, found)
            s.add(z3.Or(*(v != z3.BoolVal(b) for row, bits in zip(claims, c) for v, b in zip(row, bits)),
                        *(v != b for v, b in zip(generations, g))))
        if on_size:
            on_size(name, m, n)
        if verdict == z3.unknown:
            return Obligation(name, bound, method, "unknown", time.perf_counter() - t0,
                              detail=f"z3 gave up at {m} members, {n} partitions: {s.reason_unknown()}")
    return Obligation(name, bound, method, "proved", time.perf_counter() - t0)


def _sizes(max_members: int, max_partitions: int):
    return ((m, n) for m in range(1, max_members + 1) for n in range(1, max_partitions + 1))


def _assignor_counterexample(assignor, m, n, claims, generations, mutations, cooperative) -> dict:
    """The input z3 found, which condition it breaks, and the model's own answer."""
    x = transcribe_sticky(PYTHON, m, resolve(PYTHON, claims, generations, mutations), cooperative, mutations)
    broken = [name for name, ok in contract(PYTHON, m, resolve(PYTHON, claims, generations), x, cooperative)
              if not ok]
    try:
        model = _assignment_json(model_assignment(assignor, n, claims, generations, mutations), m)
    except (AssertionError, ValueError) as e:
        model = f"the model's assignor fails: {e}"
    return {"members": m, "partitions": n, "input": _input_json(claims, generations), "violates": broken,
            "model_assignment": model}


def transcription_obligation(max_members: int, max_partitions: int, mutations=frozenset()) -> Obligation:
    """The exact transcription (greedy fill) agrees with model/assignors.py run with
    ``mutations``, on three sets of inputs (the z3 obligations above are about the
    transcription; this one is what ties them to the model):

    * whole assignments, ``sticky`` (the target) and ``cooperative-sticky`` (the
      final assignment): every input with up to 3 members and 3 partitions (every
      claim pattern, generations 0..2: every order of 3 claims, ties included);
    * whole assignments: a seeded sample of ``SAMPLE`` inputs up to the bound,
      generations 0..GENERATIONS - 1;
    * claim resolution (R22): ``resolve`` against the model's ``resolve_claims``
      and ``contested_claims`` (through which the sticky assignors read
      generations), for every member
      count up to the bound and every vector of generations in
      0..GENERATIONS - 1, the very domain of the z3 obligations, on inputs whose
      partitions carry every non-empty set of claimants (spread over several
      inputs when there are more sets than ``max_partitions``)."""
    t0 = time.perf_counter()
    small = (min(3, max_members), min(3, max_partitions))
    inputs = []
    for m, n in _sizes(*small):
        for bits in itertools.product((False, True), repeat=m * n):
            claims = [list(bits[k * n:(k + 1) * n]) for k in range(m)]
            for g in itertools.product(range(3), repeat=m):
                if all(any(row) or x == 0 for row, x in zip(claims, g)):  # a generation only for claimers
                    inputs.append((m, n, claims, list(g)))
    exhaustive = len(inputs)
    rng = random.Random(SEED)
    sample = [_random_input(rng, max_members, max_partitions) for _ in range(SAMPLE)]
    resolutions = [0]
    found = (_assignment_mismatch(inputs, mutations) or _resolution_mismatch(max_members, max_partitions, mutations,
                                                                             resolutions)
             or _assignment_mismatch(sample, mutations))
    name = "transcription agrees with model/assignors.py"
    bound = (f"whole assignments of sticky and cooperative-sticky: every input with members 1..{small[0]}, "
             f"partitions 1..{small[1]}, generations 0..2 ({exhaustive:,} inputs), and {SAMPLE} sampled up to "
             f"{max_members} members, {max_partitions} partitions, generations 0..{GENERATIONS - 1} (seed {SEED}); "
             f"claim resolution (R22): members 1..{max_members}, every generation vector in 0..{GENERATIONS - 1}, "
             f"every set of claimants")
    if found:
        return Obligation(name, bound, "comparison", "counterexample", time.perf_counter() - t0, found)
    return Obligation(name, f"{bound} ({resolutions[0]:,} inputs)", "comparison", "proved", time.perf_counter() - t0)


def _assignment_mismatch(inputs, mutations) -> dict | None:
    """The first input ``(members, partitions, claims, generations)`` on which the
    transcription's sticky target or cooperative final assignment differs from the
    model's, as a counterexample; None if there is none."""
    for m, n, claims, g in inputs:
        x = transcribe_sticky(PYTHON, m, resolve(PYTHON, claims, g, mutations), True, mutations)
        for assignor, ours in (("sticky", x.target), ("cooperative-sticky", x.final)):
            try:
                model = model_assignment(assignor, n, claims, g, mutations)
            except (AssertionError, ValueError) as e:
                model = str(e)
            if [max(v, WITHHELD) for v in ours] != model:
                return {"assignor": assignor, "members": m, "partitions": n,
                        "input": _input_json(claims, g), "transcription": _assignment_json(ours, m),
                        "model_assignment": model if isinstance(model, str) else _assignment_json(model, m)}
    return None


def _resolution_mismatch(max_members: int, max_partitions: int, mutations, count: list) -> dict | None:
    """R22 over the whole generation domain: the first input (every member count up
    to ``max_members``, every generation vector in 0..GENERATIONS - 1, the claims
    of ``_every_claimant_set``) on which ``resolve`` and the model's
    ``resolve_claims`` and ``contested_claims`` give a partition different owners
    (CONTESTED included), as a counterexample with
    both whole cooperative assignments; None if there is none. ``count[0]`` is
    increased by the inputs compared."""
    for m in range(1, max_members + 1):
        for claims in _every_claimant_set(m, max_partitions):
            n = len(claims[0])
            cfg = GroupConfig(topics=(("t", n),), protocol="eager", assignor="sticky",
                              mutations=frozenset(mutations), initial_rebalance_delay=False)
            ours_by_order: dict = {}
            for g in itertools.product(range(GENERATIONS), repeat=m):
                count[0] += 1
                # resolve reads generations only through < and <=: its answer depends on their order
                order = tuple(sorted(set(g)).index(x) for x in g)
                ours = ours_by_order.get(order)
                if ours is None:
                    ours = ours_by_order[order] = resolve(PYTHON, claims, list(order), mutations)
                members = _members(claims, g)
                owner, contested = resolve_claims(cfg, members), contested_claims(cfg, members)
                theirs = [owner[p] - 1 if p in owner else CONTESTED if contested >> p & 1 else -1 for p in range(n)]
                if theirs != ours:
                    g = list(g)
                    return {"rule": "R22: claims weighed by generation (model/assignors.py, resolve_claims)",
                            "members": m, "partitions": n, "input": _input_json(claims, g),
                            "transcription_owners": _assignment_json(ours, m),
                            "model_owners": _assignment_json(theirs, m),
                            "transcription": _assignment_json(transcribe_sticky(PYTHON, m, ours, True, mutations).final,
                                                              m),
                            "model_assignment": _assignment_json(
                                model_assignment("cooperative-sticky", n, claims, g, mutations), m)}
    return None


def _every_claimant_set(m: int, max_partitions: int) -> list:
    """Claim matrices (``claims[k][p]``) of ``m`` members whose partitions, together,
    carry every non-empty set of claimants once, at most ``max_partitions`` each."""
    columns = [c for c in itertools.product((False, True), repeat=m) if any(c)]
    chunks = [columns[i:i + max_partitions] for i in range(0, len(columns), max_partitions)]
    return [[[c[k] for c in chunk] for k in range(m)] for chunk in chunks]


def _random_input(rng: random.Random, max_members: int, max_partitions: int) -> tuple:
    m, n = rng.randint(1, max_members), rng.randint(1, max_partitions)
    density = rng.choice((0.1, 0.3, 0.6))
    claims = [[rng.random() < density for _ in range(n)] for _ in range(m)]
    return m, n, claims, [rng.randrange(GENERATIONS) if any(row) else 0 for row in claims]


# --- (b) stickiness ---------------------------------------------------------------------

def minimum_moves(m: int, owners: list) -> int:
    """z3's minimum number of owned partitions moved by a balanced assignment of
    ``len(owners)`` partitions to ``m`` members (``owners``: member index or -1)."""
    n = len(owners)
    base, extra = divmod(n, m)
    x = [z3.Int(f"x_{p}") for p in range(n)]
    opt = z3.Optimize()
    opt.add(*(z3.And(v >= 0, v < m) for v in x))
    loads = [z3.Sum([z3.If(v == k, 1, 0) for v in x]) for k in range(m)]
    opt.add(*(z3.And(load >= base, load <= base + (1 if extra else 0)) for load in loads))
    cost = z3.Sum([z3.If(v == o, 0, 1) for v, o in zip(x, owners) if o >= 0] or [z3.IntVal(0)])
    handle = opt.minimize(cost)
    if opt.check() != z3.sat:
        raise RuntimeError("no balanced assignment exists")  # cannot happen: m >= 1
    return opt.lower(handle).as_long()


def stickiness_obligation(max_members: int, max_partitions: int, symbolic_partitions: int, mutations=frozenset(),
                          on_size: Callable | None = None) -> Obligation:
    """The cooperative sticky target's moves against the balanced minimum: the ratio
    over a seeded sample (the model's assignor against z3's Optimize), and for every
    size up to the bound a z3 search for an input and a balanced assignment that
    moves fewer (``unsat``: proven equal)."""
    name = "cooperative-sticky: moves no more than the balanced minimum"
    t0 = time.perf_counter()
    rng = random.Random(SEED)
    total = best = equal = 0
    for _ in range(SAMPLE):
        m, n, claims, g = _random_input(rng, max_members, max_partitions)
        owners = resolve(PYTHON, claims, g, mutations)
        target = model_assignment("sticky", len(owners), claims, g, mutations)
        moved, least = moves(PYTHON, owners, target), minimum_moves(m, owners)
        total, best, equal = total + moved, best + least, equal + (moved == least)
    ratio = total / best if best else 1.0
    sample = (f"sample of {SAMPLE} (seed {SEED}): {total} moves against a minimum of {best}, "
              f"ratio {ratio:.3f}, equal on {equal}/{SAMPLE}")
    bound = (f"the model: a sample up to {max_members} members, {max_partitions} partitions; the transcription: "
             f"every input (any claims, generations 0..{GENERATIONS - 1}) up to {max_members} members, "
             f"{symbolic_partitions} partitions")
    method = "z3 Optimize on a sample; z3 symbolic for every input (fill abstracted)"
    for m, n in _sizes(max_members, symbolic_partitions):
        claims, generations, domain, _, x = _symbolic_sticky(m, n, False, mutations)
        base, extra = divmod(n, m)
        alt = [z3.BitVec(f"alt_{p}", WIDTH) for p in range(n)]
        s = _solver(bits=True)
        s.add(*domain, *(z3.And(v >= 0, v < m) for v in alt))
        s.add(*(z3.And(load >= base, load <= base + (1 if extra else 0))
                for load in (sum(Z3.If(v == k, 1, 0) for v in alt) for k in range(m))))
        s.add(moves(Z3, x.owners, alt) < moves(Z3, x.owners, x.target))
        verdict = s.check()
        if on_size:
            on_size(name, m, n)
        if verdict == z3.unknown:
            return Obligation(name, bound, method, "unknown", time.perf_counter() - t0,
                              detail=f"z3 gave up at {m} members, {n} partitions; {sample}")
        if verdict == z3.sat:
            model = s.model()
            c, g = _concrete_input(model, claims, generations)
            exact = transcribe_sticky(PYTHON, m, resolve(PYTHON, c, g, mutations), False, mutations)
            better = [model.eval(v, model_completion=True).as_long() for v in alt]
            return Obligation(name, bound, method, "counterexample", time.perf_counter() - t0, {
                "members": m, "partitions": n, "input": _input_json(c, g),
                "target_moves": moves(PYTHON, exact.owners, exact.target),
                "fewer_moves": moves(PYTHON, exact.owners, better),
                "balanced_assignment_moving_fewer": _assignment_json(better, m)}, sample)
    return Obligation(name, bound, method, "proved", time.perf_counter() - t0, detail=sample)


# --- (c) the inductive invariant ------------------------------------------------------

def symbolic_view(prefix: str, slots: int = SLOTS, partitions: int = PARTITIONS) -> View:
    """An abstract state of z3 constants (spec/actions.py, View)."""
    def per_slot(field, make):
        return tuple(make(f"{prefix}_{field}_{i}") for i in range(slots))

    def mask(name):
        return z3.BitVec(name, partitions)
    return View(z3.Int(f"{prefix}_phase"), z3.Int(f"{prefix}_generation"),
                per_slot("live", z3.Bool), per_slot("known", z3.Bool), per_slot("member_generation", z3.Int),
                per_slot("owned", mask), per_slot("assigned", mask), per_slot("granting", z3.Bool),
                per_slot("grant", mask), per_slot("stable", z3.Bool), per_slot("grant_generation", z3.Int),
                per_slot("claim", mask), per_slot("claim_generation", z3.Int))


def _view_json(model, v: View) -> dict:
    def val(x):
        x = model.eval(x, model_completion=True)
        if z3.is_bool(x):
            return z3.is_true(x)
        return x.as_long() if z3.is_bv(x) or z3.is_int(x) else str(x)

    def masked(x):
        bits = val(x)
        return [f"t-{p}" for p in range(PARTITIONS) if bits >> p & 1]
    phase = val(v.phase)
    out = {"phase": spec.Phase(phase).name if 0 <= phase <= 4 else phase, "generation": val(v.generation)}
    for i in range(len(v.live)):
        granting = val(v.granting[i])
        out[lane(i)] = {"live": val(v.live[i]), "known": val(v.known[i]), "stable": val(v.stable[i]),
                        "member_generation": val(v.member_generation[i]), "owned": masked(v.owned[i]),
                        "assigned": masked(v.assigned[i]),
                        "claim": masked(v.claim[i]), "claim_generation": val(v.claim_generation[i]),
                        "grant": masked(v.grant[i]) if granting else None,
                        "grant_generation": val(v.grant_generation[i]) if granting else None}
    return out


def induction_obligations(spec_mutations=frozenset()) -> list:
    """Init ⇒ Inv, Inv ∧ Next ⇒ Inv′ (each action, each acting slot) and
    Inv ⇒ exclusive_ownership, over the spec's actions at SLOTS x PARTITIONS."""
    L = spec.z3_logic()
    s, t = symbolic_view("s"), symbolic_view("t")
    bound = f"{SLOTS} client slots, {PARTITIONS} partitions, any generations, every abstract state"
    out = []

    def discharge(name, query, describe):
        t0 = time.perf_counter()
        solver = _solver()
        solver.add(query)
        verdict = solver.check()
        seconds = time.perf_counter() - t0
        if verdict == z3.unsat:
            return Obligation(name, bound, "z3 induction", "proved", seconds)
        if verdict == z3.unknown:
            return Obligation(name, bound, "z3 induction", "unknown", seconds, detail=solver.reason_unknown())
        return Obligation(name, bound, "z3 induction", "counterexample", seconds, describe(solver.model()))

    out.append(discharge("inductive invariant: init ⇒ inv", z3.And(spec.initial(L, s), z3.Not(spec.invariant(L, s))),
                         lambda model: {"state": _view_json(model, s)}))
    t0 = time.perf_counter()
    step = None
    for name in spec.ACTIONS:
        for i in range(SLOTS):
            query = z3.And(spec.invariant(L, s), spec.encode(L, name, s, t, i, spec_mutations),
                           z3.Not(spec.invariant(L, t)))
            step = discharge("inductive invariant: inv ∧ next ⇒ inv′", query, lambda model, name=name, i=i: {
                "action": name, "slot": lane(i), "state": _view_json(model, s), "next_state": _view_json(model, t),
                "broken": spec.invariant_failure(_concrete_view(model, t))})
            if step.status != "proved":
                break
        if step.status != "proved":
            break
    out.append(step._replace(seconds=time.perf_counter() - t0,
                             detail=f"{len(spec.ACTIONS)} actions x {SLOTS} acting slots" if step.status == "proved"
                             else step.detail))
    out.append(discharge("inductive invariant: inv ⇒ exclusive_ownership",
                         z3.And(spec.invariant(L, s), z3.Not(spec.exclusive_ownership(L, s))),
                         lambda model: {"state": _view_json(model, s)}))
    return out


def _concrete_view(model, v: View) -> View:
    def val(x):
        x = model.eval(x, model_completion=True)
        return z3.is_true(x) if z3.is_bool(x) else x.as_long()
    return View(*(tuple(val(x) for x in f) if isinstance(f, tuple) else val(f) for f in v))


# --- (d) a plug-in assignor (rebalance prove --assignor) ------------------------------------

SEARCH_MEMBERS, SEARCH_PARTITIONS = 6, 10  # the hypothesis search's largest inputs


def plugin_conditions(cooperative: bool) -> tuple:
    """The obligations that apply to a plug-in assignor (its contract, R16 and R23),
    by name, for the eager or the cooperative protocol."""
    if not cooperative:
        return ("every partition assigned exactly once", "loads within one")
    return ("every partition assigned at most once, and withheld only while claimed",
            "loads within one when nothing is withheld",
            "never assigning a claimed partition: nothing given but to the member holding its newest claim, "
            "a contested one to nobody (R22, R23)")


def plugin_violations(cfg: GroupConfig, claims, generations) -> dict:
    """What the plug-in of ``cfg`` breaks on one input, ``{condition: why}``
    (``plugin_conditions``); ``claims[k][p]``: member k claims partition p,
    ``generations[k]`` its claim's generation. The claims are resolved by the
    model's rule (R22: ``resolve_claims``, ``contested_claims``). Raises
    AssignorError (bad input) when the plug-in fails or returns a wrong shape."""
    n = cfg.num_partitions
    members = _members(claims, generations, ids=lambda k: member_id(k, 1))
    given = [[] for _ in range(n)]
    loads = {}
    for mid, a in assign(cfg, members):
        loads[lane(slot_of(mid))] = a.partitions.bit_count()
        for p in partitions_of(a.partitions):
            given[p].append(lane(slot_of(mid)))
    names = plugin_conditions(cfg.cooperative)
    out = {}
    twice = [f"t-{p} to {' and '.join(g)}" for p, g in enumerate(given) if len(g) > 1]
    if not cfg.cooperative:
        nobody = [f"t-{p}" for p, g in enumerate(given) if not g]
        if twice or nobody:
            out[names[0]] = "; ".join(twice + ([f"{', '.join(nobody)} to nobody"] if nobody else []))
        if max(loads.values()) - min(loads.values()) > 1:
            out[names[1]] = f"loads {loads} not within one"
        return out
    owner = {p: lane(slot_of(mid)) for p, mid in resolve_claims(cfg, members).items()}
    contested = set(partitions_of(contested_claims(cfg, members)))
    unclaimed = [f"t-{p}" for p, g in enumerate(given) if not g and p not in owner and p not in contested]
    if twice or unclaimed:
        out[names[0]] = "; ".join(twice + ([f"{', '.join(unclaimed)} claimed by nobody and withheld"]
                                           if unclaimed else []))
    if all(given) and max(loads.values()) - min(loads.values()) > 1:
        out[names[1]] = f"loads {loads} not within one"
    wrong = [f"t-{p} given to {', '.join(g)} while {owner[p]} holds its newest claim" for p, g in enumerate(given)
             if p in owner and any(x != owner[p] for x in g)]
    wrong += [f"t-{p} (contested) given to {', '.join(g)}" for p, g in enumerate(given) if p in contested and g]
    if wrong:
        out[names[2]] = "; ".join(wrong)
    return out


def _plugin_cfg(base: GroupConfig, n: int) -> GroupConfig:
    return GroupConfig(topics=(("t", n),), protocol=base.protocol, assignor=base.assignor, plugin=base.plugin,
                       initial_rebalance_delay=False)


def _plugin_counterexample(cfg: GroupConfig, claims, generations, why: str) -> dict:
    members = _members(claims, generations, ids=lambda k: member_id(k, 1))
    return {"input": _input_json(claims, generations), "violates": why,
            "assignment": {lane(slot_of(mid)): partitions(cfg, a.partitions) for mid, a in assign(cfg, members)}}


def _plugin_inputs(m: int, n: int, cooperative: bool, generations: int):
    """Every input of ``m`` members and ``n`` partitions: each member claims any set of
    partitions at a generation in 1..``generations`` (eager: nobody claims, R14)."""
    if not cooperative:
        yield [[False] * n for _ in range(m)], [-1] * m
        return
    rows = [(tuple(bool(mask >> p & 1) for p in range(n)), g if mask else -1)
            for mask in range(1 << n) for g in (range(1, generations + 1) if mask else (-1,))]
    for combo in itertools.product(rows, repeat=m):
        yield [list(r) for r, _ in combo], [g for _, g in combo]


def plugin_obligations(base: GroupConfig, max_members: int = PLUGIN_MEMBERS, max_partitions: int = PLUGIN_PARTITIONS,
                       generations: int = PLUGIN_GENERATIONS, examples: int = PLUGIN_EXAMPLES) -> list:
    """The obligations of ``plugin_conditions`` for ``base``'s plug-in assignor
    (``base.plugin``, ``base.protocol``). z3 cannot see inside a Python function, so:
    exhaustively on every input up to ``max_members`` members, ``max_partitions``
    partitions and claim generations 1..``generations`` (sizes in increasing
    order, so the first counterexample is among the smallest), one Obligation per
    condition; then a hypothesis search (``examples`` inputs, derandomized: the
    same every run; shrunk; "not violated" when it finds nothing) up to SEARCH_MEMBERS members, SEARCH_PARTITIONS
    partitions and generations 0..7 for any condition. A counterexample gives the
    input (each member's claims and generation), the plug-in's assignment and
    what it breaks."""
    from hypothesis import HealthCheck, find, settings, strategies as st
    from hypothesis.errors import NoSuchExample

    names = plugin_conditions(base.cooperative)
    found: dict = {}
    cases = 0
    t0 = time.perf_counter()
    for m in range(1, max_members + 1):
        for n in range(1, max_partitions + 1):
            cfg = _plugin_cfg(base, n)
            for claims, gens in _plugin_inputs(m, n, base.cooperative, generations):
                cases += 1
                for name, why in plugin_violations(cfg, claims, gens).items():
                    found.setdefault(name, _plugin_counterexample(cfg, claims, gens, why))
    seconds = time.perf_counter() - t0
    bound = (f"{_bound(max_members, max_partitions)}" + (f", every claim at generations 1..{generations}"
                                                         if base.cooperative else ", no claims (eager, R14)")
             + f" ({cases:,} inputs)")
    out = [Obligation(f"{base.assignor}: {name}", bound, "exhaustive (a Python function: z3 cannot see inside)",
                      "counterexample" if name in found else "proved", seconds / len(names), found.get(name))
           for name in names]

    @st.composite
    def inputs(draw):
        m = draw(st.integers(1, SEARCH_MEMBERS))
        n = draw(st.integers(1, SEARCH_PARTITIONS))
        if not base.cooperative:
            return [[False] * n for _ in range(m)], [-1] * m
        claims = [draw(st.lists(st.booleans(), min_size=n, max_size=n)) for _ in range(m)]
        return claims, [draw(st.integers(0, GENERATIONS - 1)) if any(row) else -1 for row in claims]

    def breaks(x):
        return bool(plugin_violations(_plugin_cfg(base, len(x[0][0])), *x))

    t0 = time.perf_counter()
    try:
        claims, gens = find(inputs(), breaks, settings=settings(
            max_examples=examples, database=None, deadline=None, derandomize=True,
            suppress_health_check=list(HealthCheck)))
        cfg = _plugin_cfg(base, len(claims[0]))
        why = "; ".join(f"{k}: {v}" for k, v in plugin_violations(cfg, claims, gens).items())
        result = ("counterexample", _plugin_counterexample(cfg, claims, gens, why))
    except NoSuchExample:
        result = ("not violated", None)
    out.append(Obligation(f"{base.assignor}: every condition above, beyond the bound",
                          f"{examples:,} inputs up to {SEARCH_MEMBERS} members, {SEARCH_PARTITIONS} partitions, "
                          f"generations 0..{GENERATIONS - 1}", "hypothesis search (shrunk, derandomized): evidence, "
                          "not a proof", result[0], time.perf_counter() - t0, result[1]))
    return out


# --- everything ---------------------------------------------------------------------------

def obligations(max_members: int = MAX_MEMBERS, max_partitions: int = MAX_PARTITIONS, mutations=frozenset(),
                spec_mutations=frozenset(), on_size: Callable | None = None,
                counting_partitions: int = COUNTING_PARTITIONS):
    """Every obligation, in order, as it is discharged (a generator of Obligation).
    ``mutations``: model mutations (model/config.py) the assignors run with;
    ``spec_mutations``: spec mutations (spec/actions.py) the induction uses;
    ``on_size(name, members, partitions)`` is called after each size a symbolic
    obligation covers; ``counting_partitions`` caps the partitions of the
    counting proofs (balance, minimal moves), whose z3 time grows steeply. The
    deferral's mutations reach only the rounds of Designs II and III
    (checker/round_obligations.py), the assignors called alone having no deferral."""
    rounds = mutations
    mutations = frozenset(m for m in mutations if REGISTRY[m].protocols != ("deferred",))
    for assignor in ("range", "roundrobin"):
        yield exhaustive_obligation(assignor, max_members, max_partitions, mutations)
    for assignor in ("sticky", "cooperative-sticky"):
        yield sticky_obligation(assignor, max_members, max_partitions, mutations, on_size)
        yield sticky_obligation(assignor, max_members, min(max_partitions, counting_partitions), mutations, on_size,
                                counting=True)
    yield transcription_obligation(max_members, max_partitions, mutations)
    yield stickiness_obligation(max_members, max_partitions, min(max_partitions, counting_partitions), mutations,
                                on_size)
    yield subscriptions_obligation(max_members, max_partitions, mutations)
    for name, bound, why, cx, seconds in round_obligations.obligations(max_members, max_partitions, rounds):
        yield Obligation(name, bound, "exhaustive", "counterexample" if why else "proved", seconds,
                         cx and {**cx, "violates": why})
    yield from induction_obligations(spec_mutations)
