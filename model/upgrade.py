"""The upgrade from eager to cooperative rebalancing by rolling bounce (seed 000,
Compatibility; KIP-429; Kafka's docs/upgrade.html, "upgrading to cooperative
rebalancing"): members with their own assignor lists, the RebalanceProtocol each one
runs, the leader's assignor chosen by the coordinator's vote, and the operator's
rolling bounces. Rule tags R77-R80 refer to spec/SPEC.md.

Pure functions of model/; checker/system.py's ``upgrade`` action and
checker/properties.py's ``upgrade_compatible`` and ``upgraded_cooperative`` call them.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from .config import ConfigError, GroupConfig, rule

# R77: the RebalanceProtocols each assignor supports (ConsumerPartitionAssignor.supportedProtocols:
# EAGER by default; CooperativeStickyAssignor adds COOPERATIVE), in Kafka's enum order (EAGER < COOPERATIVE)
SUPPORTED_PROTOCOLS = {"range": ("eager",), "roundrobin": ("eager",), "sticky": ("eager",),
                       "cooperative-sticky": ("eager", "cooperative")}
RANGE = ("range",)
BOTH = ("cooperative-sticky", "range")
COOPERATIVE_ONLY = ("cooperative-sticky",)


def rebalance_protocol(assignors: tuple) -> str:
    """R77: the RebalanceProtocol a consumer runs, "eager" or "cooperative": the
    highest one every assignor of its partition.assignment.strategy supports
    (ConsumerCoordinator's constructor: retainAll over supportedProtocols, then the
    last after sorting), whatever assignor the group's vote later selects. So
    [cooperative-sticky, range] runs eager and only [cooperative-sticky] runs
    cooperative. ``assignors``: names, known to ``SUPPORTED_PROTOCOLS``."""
    common = [p for p in SUPPORTED_PROTOCOLS[assignors[0]] if all(p in SUPPORTED_PROTOCOLS[a] for a in assignors)]
    return common[-1]


def cooperative_member(cfg: GroupConfig, assignors: tuple) -> bool:
    """Whether a member keeps what it owns while rejoining (R14 vs Design I): by its own
    assignor list if it has one (R77), else by the group configuration's protocol."""
    return rebalance_protocol(assignors) == "cooperative" if assignors else cfg.cooperative


@lru_cache(maxsize=None)
def leader_config(cfg: GroupConfig, selected: str) -> GroupConfig:
    """R78: the configuration the leader assigns with once the coordinator's vote
    (R35, GroupMetadata.selectProtocol) selected assignor ``selected``: that assignor,
    under the cooperative protocol if it supports it (CooperativeStickyAssignor
    withholds partitions changing owner whether the leader runs eager or
    cooperative: its adjustAssignment does not look at the leader's protocol),
    without the upgrade. ``cfg`` itself when nothing was selected ("")."""
    if not selected or selected == cfg.assignor:
        return cfg
    protocol = "cooperative" if "cooperative" in SUPPORTED_PROTOCOLS[selected] else "eager"
    # the assignor's configuration: the upgrade and its mutation are the operator's, not the assignor's
    return replace(cfg, protocol=protocol, assignor=selected, upgrade=False,
                   mutations=cfg.mutations - {"one-bounce-upgrade"})


def rolling_upgrade() -> tuple:
    """R79: the assignor lists a rolling upgrade moves every member through, one
    rolling bounce each: [range], then [cooperative-sticky, range] (still eager, R77;
    the vote picks cooperative-sticky once every member lists it), then
    [cooperative-sticky] alone (docs/upgrade.html, KIP-429: two rolling bounces).
    Replaced by ``one-bounce-upgrade``."""
    return (RANGE, BOTH, COOPERATIVE_ONLY)


def stages(cfg: GroupConfig) -> tuple:
    """The upgrade's assignor lists (``rolling_upgrade`` or its mutation's), () when
    the configuration has no upgrade."""
    return rule(cfg, rolling_upgrade)() if cfg.upgrade else ()


def bounce_ready(path: tuple, slot_stages, stage: int, group_protocol: str) -> bool:
    """R79: the operator may bounce a member from ``path[stage]`` to ``path[stage + 1]``
    once the previous rolling bounce is complete: every client slot is at ``stage`` or
    beyond (``slot_stages``) and the coordinator's last vote selected what
    ``path[stage]`` prefers (kafka-consumer-groups --describe --state shows it; ""
    for an Empty group). Under the correct path the second bounce therefore waits
    until no member of the group lacks cooperative-sticky."""
    return (stage + 1 < len(path) and min(slot_stages) >= stage
            and group_protocol in ("", path[stage][0]))


def validate(cfg: GroupConfig) -> None:
    """Raise ConfigError unless an upgrade starts where every member runs [range]
    (the eager protocol with the range assignor) and its mutations have an upgrade to change."""
    if cfg.upgrade and (cfg.protocol, cfg.assignor) != ("eager", "range"):
        raise ConfigError(f"an upgrade starts from the eager protocol with the range assignor, not "
                          f"{cfg.protocol} with {cfg.assignor} (R79)")
    if not cfg.upgrade and "one-bounce-upgrade" in cfg.mutations:
        raise ConfigError("mutation 'one-bounce-upgrade' needs an upgrade (group.upgrade = true): without one "
                          "it changes nothing")
