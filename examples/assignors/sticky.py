"""A third-party cooperative sticky assignor, written against ``rebalance``'s
plug-in signature (model/assignors.py ``assign_plugin``), as a user would write
one: it passes ``rebalance check --assignor rebalance.examples.assignors.sticky:assign``
and ``rebalance prove --assignor rebalance.examples.assignors.sticky:assign``.

``assign(partitions, subscriptions) -> {member id: [partition, ...]}``:
``partitions`` the group's partitions in order (``("t-0", ...)``);
``subscriptions`` ``{member id: MemberSubscription(owned_partitions, generation,
group_instance_id)}`` in the group's member order.

1. Claims (KIP-792): a partition claimed by several members stays with the claim
   of the highest generation; claims tied at the highest are contested.
2. Target: loads within one (quotas of n // m and n // m + 1, the larger ones to
   the members claiming most); each member keeps its claimed partitions up to its
   quota, the rest go one by one to the least loaded member under quota.
3. Cooperative (KIP-429, seed 000 Design I): a partition whose owner is not its
   target member, and a contested one, is withheld this round; the owner revokes
   it, rejoins, and the follow-up round gives it out.
"""
from __future__ import annotations


def claims(subscriptions: dict) -> tuple:
    """``(owner, contested)``: partition -> the member holding its newest claim, and
    the set of partitions claimed by several members at the newest generation."""
    newest: dict = {}
    for member, sub in subscriptions.items():
        for p in sub.owned_partitions:
            newest.setdefault(p, []).append((sub.generation, member))
    owner, contested = {}, set()
    for p, bids in newest.items():
        top = max(g for g, _ in bids)
        at_top = [m for g, m in bids if g == top]
        if len(at_top) == 1:
            owner[p] = at_top[0]
        else:
            contested.add(p)
    return owner, contested


def target(partitions, subscriptions: dict) -> tuple:
    """``(owner, contested, target)``: the claims and the balanced sticky target,
    member -> its partitions."""
    owner, contested = claims(subscriptions)
    members = list(subscriptions)
    base, extra = divmod(len(partitions), len(members))
    kept = {m: [p for p in partitions if owner.get(p) == m] for m in members}
    by_claims = sorted(members, key=lambda m: -len(kept[m]))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_claims)}
    out = {m: kept[m][:quota[m]] for m in members}
    taken = {p for ps in out.values() for p in ps}
    for p in partitions:
        if p not in taken:
            m = min((m for m in members if len(out[m]) < quota[m]), key=lambda m: (len(out[m]), members.index(m)))
            out[m].append(p)
    return owner, contested, out


def moving(members: list, owner: dict, out: dict) -> set:
    """The partitions the target gives to a member other than their owner."""
    return {p for m in members for p in out[m] if owner.get(p, m) != m}


def assign(partitions, subscriptions: dict) -> dict:
    owner, contested, out = target(partitions, subscriptions)
    withheld = moving(list(subscriptions), owner, out) | contested
    return {m: [p for p in ps if p not in withheld] for m, ps in out.items()}
