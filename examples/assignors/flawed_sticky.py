"""A third-party cooperative sticky assignor with a subtle flaw, for
``rebalance check --assignor`` and ``rebalance prove --assignor`` to catch.

It is examples/assignors/sticky.py but for one step: to find the partitions
that move, it compares each member's target with the claims of the member just
before it in the group's order only (a loop that looked right with two
members, where the other member is always the one before). With three or more
members, a partition moving from A to C is not withheld: C is given it while A
still owns it (revoke_before_assign, R23). With one or two members it is
correct, which is why tests with two members never saw it.
"""
from __future__ import annotations

from .sticky import target


def assign(partitions, subscriptions: dict) -> dict:
    owner, contested, out = target(partitions, subscriptions)
    members = list(subscriptions)
    withheld = set(contested)
    for i, m in enumerate(members):
        before = members[i - 1]  # the flaw: only the previous member's claims are compared
        withheld |= {p for p in out[m] if owner.get(p) == before and before != m}
    return {m: [p for p in ps if p not in withheld] for m, ps in out.items()}
