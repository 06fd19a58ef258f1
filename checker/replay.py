"""Scripted scenarios, run deterministically (``rebalance replay``).

A scenario file (TOML)::

    name = "Design I: member joins"
    source = "seed 000, Design I, Example: Member joins"
    [group]                       # as in a check configuration
    protocol = "cooperative"
    topics = { T = 4 }
    [time]                        # optional, as in a check configuration (R38)
    scheduled_rebalance_max_delay_ms = 0
    [initial]
    generation = 1
    leader = "A"
    owned = { A = ["T-0", "T-3"], B = ["T-1"], C = ["T-2"] }
    static = false                # true, or a list of letters: static members (KIP-345)
    [[events]]
    action = "join"               # join | leave | crash | restart | pause | resume
    member = "D"
    settle = true                 # run the group to quiescence afterwards (default)
    timers = true                 # ... letting timers fire (false: settle within the deadlines)

``source`` names what the scenario's outcome follows (a seed section, a Kafka
test), and the replay prints it. ``mutations`` (model/mutations.py REGISTRY) are
added to those given on the command line, e.g. ``connect-leader-state`` to
replay a Design II scenario as Kafka Connect behaves.

Members are client slots named A, B, C, ...; ``initial.owned`` lists the ones
running at the start; any other letter up to the highest named is a slot that
``join`` can start. After an event the deterministic schedule (messages delivered
in the order they were sent, see ``system.settle``) runs until nothing but faults
is enabled.

Raises ConfigError for a malformed scenario (the message names the key).
"""
from __future__ import annotations

from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.mutations import REGISTRY
from rebalance.model.protocol import Callback, Error, SyncGroupResponse, mask_of, member_name

from .render import bracket, lane, partitions, slot_named
from .settings import parse_toml, resolve, static_slots, validate
from .system import ENVIRONMENT, FAULTS, STATUS_NAMES, Action, State, System, settle



def _slot(name) -> int:
    if not (isinstance(name, str) and len(name) == 1 and name.isalpha() and name.isupper()):
        raise ConfigError(f"member names are single capital letters (A, B, ...), got {name!r}")
    return slot_named(name)


def _mask(cfg: GroupConfig, names, where: str) -> int:
    index = {cfg.partition_name(p): p for p in range(cfg.num_partitions)}
    for n in names:
        if n not in index:
            raise ConfigError(f"{where}: unknown partition {n!r} (partitions are {', '.join(index)})")
    return mask_of(index[n] for n in names)


KEYS = ("name", "source", "group", "time", "mutations", "initial", "events")


def load(path: str, mutations=()) -> dict:
    """Parse and validate a scenario file into ``{name, source, system, initial,
    events}``; ``mutations``: names added to the file's ``mutations``."""
    data = parse_toml(path, "scenario file")
    unknown = set(data) - set(KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} (expected {', '.join(KEYS)})")
    named = data.get("mutations", [])
    if not isinstance(named, list):
        raise ConfigError(f"{path}: mutations must be a list of names, got {named!r}")
    cfg = resolve(validate({"group": data.get("group", {}), "time": data.get("time", {})}, path),
                  mutations=tuple(named) + tuple(mutations)).group
    initial = data.get("initial", {})
    if not isinstance(initial, dict):
        raise ConfigError(f"{path}: [initial] must be a table")
    owned_names = initial.get("owned")
    if (not isinstance(owned_names, dict) or not owned_names
            or not all(isinstance(v, list) for v in owned_names.values())):
        raise ConfigError(f"{path}: [initial] needs owned = {{ A = [...], ... }} naming the running members")
    owned = {_slot(m): _mask(cfg, ps, f"initial.owned.{m}") for m, ps in owned_names.items()}
    claimed = 0
    for mask in owned.values():
        if claimed & mask:
            raise ConfigError(f"{path}: initial.owned gives a partition to two members")
        claimed |= mask
    events = data.get("events", [])
    if not isinstance(events, list):
        raise ConfigError(f"{path}: events must be an array of tables ([[events]])")
    slots = set(owned)
    parsed = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise ConfigError(f"{path}: events[{i}] must be a table with action and member")
        action = ev.get("action")
        if action not in ENVIRONMENT:
            raise ConfigError(f"{path}: events[{i}].action must be one of {', '.join(ENVIRONMENT)}, "
                              f"got {action!r}")
        slot = _slot(ev.get("member"))
        slots.add(slot)
        parsed.append((action, slot, bool(ev.get("settle", True)), bool(ev.get("timers", True))))
    generation = initial.get("generation", 1)
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
        raise ConfigError(f"{path}: initial.generation must be a positive whole number")
    leader = _slot(initial.get("leader", lane(min(owned))))
    if leader not in owned:
        raise ConfigError(f"{path}: initial.leader {lane(leader)} is not a running member")
    static = static_slots(initial.get("static", False), max(slots) + 1)
    system = System(cfg, members=0, joiners=max(slots) + 1, faults=FAULTS, max_faults=0, static=static)
    return {"name": data.get("name", path), "source": data.get("source"), "system": system,
            "initial": system.stable(owned, generation, leader), "events": parsed}


def _apply(system: System, state: State, action: str, slot: int) -> State:
    for a, nxt in system.fault_successors(state._replace(faults_left=1)):
        if a.kind == action and a.slot == slot:
            return nxt._replace(faults_left=0)
    proc = state.procs[slot]
    why = "its previous process still has a request in flight" if proc.requests else \
        f"the member is {STATUS_NAMES[proc.status]}"
    raise ConfigError(f"event {action} {lane(slot)} is not possible here ({why})")


def _ownership(cfg: GroupConfig, state: State) -> dict:
    return {lane(s): partitions(cfg, p.consumer.owned) for s, p in enumerate(state.procs)
            if p.consumer is not None}


def run(scenario: dict, steps: list | None = None) -> dict:
    """Play the events; return ``{name, source, mutations, initial, events, rounds, rebalances, final}``.
    ``steps``, if given, receives every ``(Action, State)`` taken, the events
    (``Action(action, slot, None)``) included (checker/vectors.py's seed cases).

    ``rounds``: one entry per generation whose SyncGroup completed, ``{generation,
    leader, [scheduled, deferred,] members: {lane: {member_id, assigned, revoked,
    lost}}}`` (``scheduled``: a ScheduledRebalanceTimeout was sent; ``deferred``:
    lost partitions held back under it, Design II): what the member
    was given, and what it revoked or lost (ConsumerRebalanceListener callbacks)
    since its previous assignment.
    """
    system, state = scenario["system"], scenario["initial"]
    cfg = system.cfg
    report = {"name": scenario["name"], "source": scenario["source"], "mutations": sorted(cfg.mutations),
              "initial": {"generation": state.group.generation, "ownership": _ownership(cfg, state)},
              "events": [], "rounds": []}
    rounds: dict = {}
    pending: dict = {}  # slot -> partitions revoked / lost since its last assignment
    start_generation = state.group.generation
    for action, slot, do_settle, timers in scenario["events"]:
        state = _apply(system, state, action, slot)
        report["events"].append(f"{lane(slot)} {action}")
        if steps is not None:
            steps.append((Action(action, slot, None), state))
        if not do_settle:
            continue
        trace: list = []
        prev = state
        state = settle(system, state, trace, timers)
        if steps is not None:
            steps.extend(trace)
        for a, nxt in trace:
            if a.kind == "reply":
                before = prev.procs[a.slot].consumer
                _, outputs = system.step_member(before, a.detail)
                gave_up = pending.setdefault(a.slot, {"revoked": 0, "lost": 0})
                for o in outputs:
                    if type(o) is Callback and o.kind in gave_up:
                        gave_up[o.kind] |= o.partitions
                if type(a.detail) is SyncGroupResponse and a.detail.error == Error.NONE:
                    gen = before.generation
                    r = rounds.setdefault(gen, {"generation": gen, "leader": None, "members": {}})
                    if before.leader:
                        r["leader"] = member_name(before.member_id)
                    if a.detail.assignment.scheduled:  # Designs II and III: a rebalance is scheduled
                        r["scheduled"] = True
                        if a.detail.assignment.echo:
                            r["deferred"] = partitions(cfg, a.detail.assignment.echo[1])
                    r["members"][lane(a.slot)] = {
                        "member_id": member_name(before.member_id),
                        "assigned": partitions(cfg, a.detail.assignment.partitions),
                        "revoked": partitions(cfg, gave_up["revoked"]),
                        "lost": partitions(cfg, gave_up["lost"])}
                    del pending[a.slot]
            prev = nxt
    report["rounds"] = [rounds[g] for g in sorted(rounds)]
    report["rebalances"] = state.group.generation - start_generation
    report["final"] = {"generation": state.group.generation, "phase": state.group.phase.name,
                       "ownership": _ownership(cfg, state)}
    return report


def text(report: dict) -> str:
    """The report as lines for a terminal."""
    lines = [f"scenario: {report['name']}"]
    if report["source"]:
        lines.append(f"source: {report['source']}")
    for name in report["mutations"]:
        lines.append(f"mutation {name}: {REGISTRY[name].does} ({REGISTRY[name].source})")
    init = report["initial"]
    lines.append(f"initial (generation {init['generation']}): " + _owners(init["ownership"]))
    lines.append("events: " + ", ".join(report["events"]))
    for r in report["rounds"]:
        delay = ", ScheduledRebalanceTimeout" if r.get("scheduled") else ""
        if r.get("deferred"):
            delay += f", deferred {bracket(r['deferred'])}"
        lines.append(f"round at generation {r['generation']} (leader {r['leader']}{delay}):")
        for name, m in sorted(r["members"].items()):
            lost = f" lost {bracket(m['lost'])}" if m["lost"] else ""
            lines.append(f"  {name} ({m['member_id']}): assigned {bracket(m['assigned'])} "
                         f"revoked {bracket(m['revoked'])}{lost}")
    fin = report["final"]
    lines.append(f"final (generation {fin['generation']}, {fin['phase']}): " + _owners(fin["ownership"]))
    lines.append(f"rebalances: {report['rebalances']}")
    return "\n".join(lines)


def _owners(ownership: dict) -> str:
    return ", ".join(f"{m}({', '.join(ps)})" for m, ps in sorted(ownership.items()))
