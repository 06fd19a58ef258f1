"""The coordinator's server-side assignors (KIP-848): ``uniform`` (the default) and ``range``.

``assign(cfg, members, current, existing) -> ((member_id, partitions), ...)``, a target
assignment by member id: ``members`` is ``((member_id, instance_id, topics), ...)`` in
member-id order (``topics`` a topic bitmask, ``ALL_TOPICS`` for every one),
``current`` the current target assignment ``{member_id: partitions}`` (what stickiness
keeps) and ``existing`` the topics that exist (a topic bitmask). Partitions are
bitmasks over the configuration's topics (model/config.py). Pure and deterministic:
where Kafka iterates a HashMap, the model iterates members by member id and
partitions in ascending order.

Sources: org.apache.kafka.coordinator.group.assignor.UniformAssignor,
UniformHomogeneousAssignmentBuilder (with KAFKA-18688's fix, PR #19677: any member may
keep the extra partition, so a balanced assignment is kept as it is),
UniformHeterogeneousAssignmentBuilder (KAFKA-17710's three stages: keep what is valid,
give the unassigned to the least loaded subscriber, move while that improves the
balance), RangeAssignor (per topic, contiguous ranges in member order, static members
first by instance id).
"""
from __future__ import annotations

from ..config import GroupConfig, rule
from ..protocol import ALL_TOPICS, NO_INSTANCE_ID, partitions_of, union


def _subscribed(cfg: GroupConfig, topics: int, existing: int) -> int:
    """The partitions of the topics in ``topics`` that exist (``ALL_TOPICS`` bitmasks allowed)."""
    return cfg.partitions_of_topics(topics & existing if topics != ALL_TOPICS else existing)


def _extras_to_holders(kept: list, counts: list, quota: int, extras: int) -> list:
    """KAFKA-18688's fix: who keeps a partition above ``quota`` (the minimum quota):
    members holding more than it, in member order, while ``extras`` last; the
    remaining extras go to the others in member order. ``kept``: each member's valid
    current partitions (bitmasks), ``counts``: their sizes. Returns each member's quota."""
    quotas = []
    for n in counts:
        if n > quota and extras:
            quotas.append(quota + 1)
            extras -= 1
        else:
            quotas.append(quota)
    for i, n in enumerate(counts):
        if extras and quotas[i] == quota:
            quotas[i] += 1
            extras -= 1
    return quotas


def _homogeneous(cfg: GroupConfig, ids: list, partitions: int, current: dict) -> dict:
    """UniformHomogeneousAssignmentBuilder: every member keeps up to its quota of what it
    holds (lowest partitions first), the rest is handed out in member order."""
    total = bin(partitions).count("1")
    quota, extras = divmod(total, len(ids))
    kept = [current.get(m, 0) & partitions for m in ids]
    counts = [bin(k).count("1") for k in kept]
    quotas = rule(cfg, _extras_to_holders)(kept, counts, quota, extras)
    out = {}
    for m, k, q in zip(ids, kept, quotas):
        out[m] = _lowest(k, q)
    free = [p for p in partitions_of(partitions & ~union(out.values()))]
    for m, q in zip(ids, quotas):
        while bin(out[m]).count("1") < q and free:
            out[m] |= 1 << free.pop(0)
    return out


def _heterogeneous(cfg: GroupConfig, ids: list, subs: dict, current: dict) -> dict:
    """UniformHeterogeneousAssignmentBuilder's stages (KAFKA-17710), each partition only
    to a member subscribed to its topic: keep what is still valid; give each unassigned
    partition (ascending) to the least loaded subscriber (ties in member order); then
    move a partition from its owner to the least loaded subscriber while the owner has
    at least two more."""
    out = {m: current.get(m, 0) & subs[m] for m in ids}
    taken = 0
    for m in ids:
        out[m] &= ~taken
        taken |= out[m]
    every = union(subs.values())

    def load(m):
        return bin(out[m]).count("1")
    for p in partitions_of(every & ~taken):
        eligible = [m for m in ids if subs[m] >> p & 1]
        out[min(eligible, key=load)] |= 1 << p
    moved = True
    while moved:
        moved = False
        for p in partitions_of(every):
            owner = next(m for m in ids if out[m] >> p & 1)
            eligible = [m for m in ids if subs[m] >> p & 1]
            least = min(eligible, key=load)
            if load(owner) - load(least) >= 2:
                out[owner] &= ~(1 << p)
                out[least] |= 1 << p
                moved = True
    return out


def uniform(cfg: GroupConfig, members, current: dict, existing: int) -> tuple:
    """K16: UniformAssignor: balanced (loads differ by at most one among members with the same
    subscription) and sticky. Homogeneous when every member subscribes to the same topics."""
    if not members:
        return ()
    ids = [m for m, _, _ in members]
    subs = {m: _subscribed(cfg, topics, existing) for m, _, topics in members}
    if len(set(subs.values())) == 1:
        out = _homogeneous(cfg, ids, subs[ids[0]], current)
    else:
        out = _heterogeneous(cfg, ids, subs, current)
    return tuple((m, out[m]) for m in ids)


def range_(cfg: GroupConfig, members, current: dict, existing: int) -> tuple:
    """RangeAssignor: per topic, its partitions in contiguous ranges over the members
    subscribed to it, sorted static first (by instance id) then by member id, the first
    ``P mod M`` taking one more."""
    order = sorted(members, key=lambda m: (m[1] == NO_INSTANCE_ID, m[1], m[0]))
    out = {m: 0 for m, _, _ in members}
    for t in range(len(cfg.topics)):
        mask = cfg.partitions_of_topics(1 << t)
        if not existing >> t & 1 and existing != ALL_TOPICS:
            continue
        takers = [m for m, _, topics in order if topics == ALL_TOPICS or topics >> t & 1]
        if not takers:
            continue
        ps = partitions_of(mask)
        quota, extras = divmod(len(ps), len(takers))
        start = 0
        for i, m in enumerate(takers):
            end = start + quota + (i < extras)
            for p in ps[start:end]:
                out[m] |= 1 << p
            start = end
    return tuple((m, out[m]) for m, _, _ in members)


ASSIGNORS = {"uniform": uniform, "range": range_}


def assign(cfg: GroupConfig, members, current: dict, existing: int, name: str | None = None) -> tuple:
    """The target assignment by the server assignor ``name`` (one of ``ASSIGNORS``), by
    default the configuration's (``cfg.assignor``: group.consumer.assignors' first, the one
    a group whose members name none uses; K16)."""
    return ASSIGNORS[name or cfg.assignor](cfg, members, current, existing)


def _lowest(mask: int, n: int) -> int:
    """The ``n`` lowest partitions of ``mask``."""
    out = 0
    for p in partitions_of(mask)[:n]:
        out |= 1 << p
    return out
