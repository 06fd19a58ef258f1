"""Running test vectors (spec/VECTORS.md) against the model: what an implementation
in another language does against its own code, done here against the model's own
handlers (model/coordinator.py ``handle``, model/assignors.py ``assign``; for the
consumer cases, KIP-848's coordinator model/consumer_group/coordinator.py ``handle``, or
the online migration's model/consumer_group/migration.py ``handle``).

``run_case(case, mutations) -> [failure, ...]`` (empty: the case passes);
``mutations`` switches on known-bad behaviours (model/mutations.py REGISTRY) on top
of the case's configuration, to show that the vectors catch a wrong model.
"""
from __future__ import annotations

from rebalance.model import coordinator
from rebalance.model.assignors import assign
from rebalance.model.config import KIP848, GroupConfig
from rebalance.model.consumer_group import coordinator as consumer_coordinator, migration

from .kafka_json import Codec, config_of


def run_case(case: dict, mutations=frozenset()) -> list:
    """Replay one case; its failures as strings, naming the step or property."""
    cfg = config_of(case["config"], mutations)
    if case["kind"] in ("coordinator", "consumer"):
        return _run_coordinator(cfg, case)
    return _run_assignor(cfg, case)


def coordinator_handler(cfg: GroupConfig):
    """The coordinator handler ``handle(cfg, group, event) -> (group', replies)`` of
    ``cfg``'s protocol: the classic coordinator's, KIP-848's consumer group coordinator's,
    or, with ``cfg.migration``, the online migration's (a classic or a consumer group)."""
    if cfg.protocol != KIP848:
        return coordinator.handle
    return migration.handle if cfg.migration else consumer_coordinator.handle


def _run_coordinator(cfg, case: dict) -> list:
    """Every step's responses (in order) and the group after it must be as expected;
    the first step that differs ends the case (the states have parted)."""
    codec = Codec(cfg)
    handle = coordinator_handler(cfg)
    group = codec.group_of(case["initial_group"])
    for i, step in enumerate(case["steps"]):
        group, replies = handle(cfg, group, codec.decode(step["input"]))
        got = {"responses": [codec.encode(r) for r in replies], "group": codec.summary(group)}
        for key in ("responses", "group"):
            if got[key] != step["expect"][key]:
                return [f"step {i}: {key} {got[key]} != expected {step['expect'][key]}"]
    return []


def _run_assignor(cfg, case: dict) -> list:
    codec = Codec(cfg)
    members = tuple((codec.member_of(m["member_id"]), codec.instance_of(m["group_instance_id"]),
                     codec.subscription_of(m["subscription"])) for m in case["members"])
    got = {codec.member(mid): codec.parts(a.partitions) for mid, a in assign(cfg, members)}
    return check_assignment(case["expect"], [cfg.partition_name(p) for p in range(cfg.num_partitions)], got)


def check_assignment(expect: dict, everything: list, got: dict) -> list:
    """The properties of an assignor case against an assignment ``{member.id:
    [partition, ...]}`` over the partitions ``everything``; failures as strings."""
    failures = []
    holder: dict = {}
    for mid, ps in got.items():
        for p in ps:
            if p in holder:
                failures.append(f"exclusive: {p} assigned to {holder[p]} and {mid}")
            holder[p] = mid
    withheld = [p for p in everything if p not in holder]
    for p in withheld:
        if p not in expect["may_withhold"]:
            failures.append(f"complete: {p} assigned to nobody")
    balanced = expect.get("balanced")
    if balanced:
        for mid, ps in got.items():
            if len(ps) > balanced["max_load"] or len(ps) + len(withheld) < balanced["min_load"]:
                failures.append(f"balanced: {mid} has {len(ps)} partitions ({len(withheld)} withheld), "
                                f"expected {balanced['min_load']}..{balanced['max_load']}")
    for entry in expect.get("sticky", ()):
        kept = set(got.get(entry["member_id"], ())) & set(entry["owned_partitions"])
        if len(kept) < entry["keep_at_least"]:
            failures.append(f"sticky: {entry['member_id']} keeps {sorted(kept)} of {entry['owned_partitions']}, "
                            f"expected at least {entry['keep_at_least']}")
    for p, owner in expect.get("owners", {}).items():
        if holder.get(p, owner) != owner:
            failures.append(f"cooperative: {p} assigned to {holder[p]} while {owner} still owns it")
    for p in expect.get("contested", ()):
        if p in holder:
            failures.append(f"cooperative: {p} assigned to {holder[p]} while two members claim it at one generation")
    if "exact" in expect and got != expect["exact"]:
        failures.append(f"exact: {got} != expected {expect['exact']}")
    return failures
