"""The assignors against a frozen copy of their outputs (tests/golden_assignors.json),
written from model/assignors.py before it was reworked for large groups (issue 17
item 9), so the rework changes no output on the small inputs the checker and the z3
transcription (checker/prove.py) use.

* Exhaustive families, one SHA-256 digest per (variant, members, partitions):
  disjoint claims, every owner map of up to 4 members x 6 partitions (claims at
  generation 1); and overlapping claims, every owned mask of up to 3 members x 3
  partitions and 4 members x 2 partitions (``-m slow``: 65,536 inputs) with every
  generation 0..3, which covers claims weighed by generation and contested ones
  (R22) with the cooperative withholding (R23).
* Seeded random inputs up to 8 members x 24 partitions over one to three topics,
  stored in full: overlapping claims at generations -1..5, Design II echoes,
  ScheduledRebalanceTimeouts and leader memory, every assignor, protocol and
  assignor mutation.

Regenerate only for an intended change of outputs: ``python tests/test_assignors_golden.py``.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import random
import sys
from pathlib import Path

import pytest

from rebalance.model.assignors import assign, contested_claims, resolve_claims
from rebalance.model.config import GroupConfig
from rebalance.model.protocol import EMPTY_SUBSCRIPTION, Subscription, member_id

FIXTURE = Path(__file__).with_name("golden_assignors.json")

# variant -> GroupConfig keywords (topics added per case)
VARIANTS = {
    "range": dict(protocol="eager", assignor="range"),
    "roundrobin": dict(protocol="eager", assignor="roundrobin"),
    "sticky": dict(protocol="eager", assignor="sticky"),
    "sticky/ignore-owned-generation": dict(protocol="eager", assignor="sticky",
                                           mutations=frozenset({"ignore-owned-generation"})),
    "cooperative": dict(protocol="cooperative"),
    "cooperative/assign-before-revoke": dict(protocol="cooperative", mutations=frozenset({"assign-before-revoke"})),
    "cooperative/contested-claims-unowned": dict(protocol="cooperative",
                                                 mutations=frozenset({"contested-claims-unowned"})),
    "cooperative/ignore-owned-generation": dict(protocol="cooperative",
                                                mutations=frozenset({"ignore-owned-generation"})),
    "cooperative/generation-mod-4": dict(protocol="cooperative", mutations=frozenset({"generation-mod-4"})),
    "incremental": dict(protocol="incremental"),
    "incremental/2-moves": dict(protocol="incremental", max_moves=2),
    "deferred": dict(protocol="deferred"),
    "deferred/no-delay": dict(protocol="deferred", scheduled_delay_ticks=0, revoking_backoff_ticks=(0,)),
    "deferred/leader-forgets-delay": dict(protocol="deferred", mutations=frozenset({"leader-forgets-delay"})),
    "deferred/connect-leader-state": dict(protocol="deferred", mutations=frozenset({"connect-leader-state"})),
}
# the variants each exhaustive family runs (claims do not matter to range and roundrobin)
DISJOINT = ("range", "roundrobin", "sticky", "cooperative", "cooperative/assign-before-revoke", "incremental",
            "deferred")
OVERLAPPING = ("sticky", "sticky/ignore-owned-generation", "cooperative", "cooperative/contested-claims-unowned",
               "cooperative/ignore-owned-generation", "incremental", "deferred")


def config(variant: str, topics: tuple, mutation: str | None = None) -> GroupConfig:
    keywords = dict(VARIANTS[variant])
    if mutation:
        keywords["mutations"] = keywords.get("mutations", frozenset()) | {mutation}
    return GroupConfig(topics=topics, **keywords)


def members_of(claims) -> tuple:
    """``((owned, generation), ...)`` -> the JoinGroup member list, member ids 1, 2, ..."""
    return tuple((member_id(i + 1, 1), 0, Subscription(owned, gen) if owned else EMPTY_SUBSCRIPTION)
                 for i, (owned, gen) in enumerate(claims))


def disjoint_family(n: int, p: int):
    """Every owner map of ``p`` partitions to ``n`` members or none, claims at generation 1."""
    for owners in itertools.product(range(n + 1), repeat=p):
        masks = [0] * n
        for q, owner in enumerate(owners):
            if owner:
                masks[owner - 1] |= 1 << q
        yield members_of((mask, 1) for mask in masks)


def overlapping_family(n: int, p: int):
    """Every owned mask of ``p`` partitions for each of ``n`` members, at every generation 0..3."""
    for masks in itertools.product(range(1 << p), repeat=n):
        for gens in itertools.product(range(4), repeat=n):
            yield members_of(zip(masks, gens))


# family -> (its generator, (members, partitions) sizes, variants); 4 x 2 overlapping is the largest (65,536 inputs)
FAMILIES = {"disjoint": (disjoint_family, [(n, p) for n in range(1, 5) for p in range(1, 7)], DISJOINT),
            "overlapping": (overlapping_family, [(n, p) for n in range(1, 4) for p in range(1, 4)] + [(4, 1)],
                            OVERLAPPING),
            "overlapping-4": (overlapping_family, [(4, 2)], ("sticky", "cooperative"))}


def outcome(cfg: GroupConfig, members, memory=(0, 0)) -> list:
    """What the frozen copy keeps of one call: the assignment, and the claim resolution it read."""
    return [[[mid, a.partitions, a.scheduled, list(a.echo)] for mid, a in assign(cfg, members, memory)],
            [[p, mid] for p, mid in sorted(resolve_claims(cfg, members).items())], contested_claims(cfg, members)]


def family_digest(family: str, variant: str, n: int, p: int) -> str:
    make = FAMILIES[family][0]
    cfg = config(variant, (("t", p),))
    h = hashlib.sha256()
    for members in make(n, p):
        h.update(json.dumps(outcome(cfg, members)).encode())
    return h.hexdigest()


def random_cases(seed: int = 17, count: int = 300) -> list:
    """Seeded random inputs: ``{variant, topics, claims: [[owned, generation, echo, scheduled]], memory}``."""
    rng = random.Random(seed)
    names = list(VARIANTS)
    cases = []
    for k in range(count):
        n, p = rng.randint(1, 8), rng.randint(1, 24)
        cuts = sorted(rng.sample(range(1, p), min(p - 1, rng.randint(0, 2))))
        topics = [[f"t{i}", b - a] for i, (a, b) in enumerate(zip([0] + cuts, cuts + [p]))]
        full = (1 << p) - 1
        owner = [rng.randint(0, n) for _ in range(p)]  # mostly disjoint claims, some overlapping
        claims = []
        for i in range(n):
            owned = sum(1 << q for q in range(p) if owner[q] == i + 1 or rng.random() < 0.08)
            gen = rng.randint(-1, 5) if owned else -1
            echo = [rng.randint(0, 4), rng.getrandbits(p) & full, rng.getrandbits(p) & full & ~owned,
                    rng.randint(0, 1), rng.randint(0, 4)] if rng.random() < 0.5 else []
            claims.append([owned, gen, echo, rng.choice([-1, -1, 0, 1, 2])])
        cases.append({"variant": names[k % len(names)], "topics": topics, "claims": claims,
                      "memory": [rng.getrandbits(p), rng.getrandbits(p)]})
    return cases


def run_case(case: dict, mutation: str | None = None) -> list:
    cfg = config(case["variant"], tuple((name, count) for name, count in case["topics"]), mutation)
    members = tuple((member_id(i + 1, 1), 0, Subscription(owned, gen, tuple(echo), scheduled))
                    for i, (owned, gen, echo, scheduled) in enumerate(case["claims"]))
    return outcome(cfg, members, tuple(case["memory"]))


def golden() -> dict:
    return json.loads(FIXTURE.read_text())


GOLDEN = golden() if FIXTURE.exists() else {"families": {}, "random": []}


# the largest families (2 to 4 s each on an idle 2-core machine) in the slow suite, and in CI by its subset (.ci/slow)
@pytest.mark.parametrize("key", [pytest.param(key, marks=pytest.mark.slow) if key.startswith("overlapping-4")
                                 or key.startswith("overlapping ") and key.endswith(" 3 3") else key
                                 for key in sorted(GOLDEN["families"])])
def test_exhaustive_family_matches_frozen_outputs(key):
    family, variant, n, p = key.split(" ")
    assert family_digest(family, variant, int(n), int(p)) == GOLDEN["families"][key], \
        f"{variant}: outputs changed on the {family} claims of {n} members x {p} partitions"


def test_random_inputs_match_frozen_outputs():
    assert len(GOLDEN["random"]) == 300
    for i, case in enumerate(GOLDEN["random"]):
        assert run_case(case) == case["outcome"], f"random case {i} ({case['variant']}): outputs changed"


@pytest.mark.parametrize("mutation", ["withhold-partition", "assign-twice", "overload-first-member"])
def test_a_wrong_assignor_is_caught(mutation):
    """The comparison fails on a deliberately wrong assignor (model/mutations.py REGISTRY)."""
    changed = [i for i, case in enumerate(GOLDEN["random"]) if run_case(case, mutation) != case["outcome"]]
    assert len(changed) >= 30, f"{mutation} changed only the random cases {changed}"


def write() -> None:
    families = {f"{family} {variant} {n} {p}": family_digest(family, variant, n, p)
                for family, (_, sizes, variants) in FAMILIES.items() for variant in variants for n, p in sizes}
    cases = [dict(case, outcome=run_case(case)) for case in random_cases()]
    FIXTURE.write_text(json.dumps({"families": families, "random": cases}, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    write()
    sys.exit(0)
