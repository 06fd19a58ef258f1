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
    [[prefix]]                    # optional: steps played exactly as written (checker/situations.py),
    action = "join"               # then the group is settled
    member = "D"
    [[events]]
    action = "leave"              # join | leave | crash | restart | pause | resume | delete-connector (no member)
    member = "B"
    settle = true                 # run the group to quiescence afterwards (default)
    timers = true                 # ... letting timers fire (false: settle within the deadlines)
    [[expect]]                    # optional: the 1st, 2nd, ... completed round, in order
    generation = 2                # optional
    members = { A = { assigned = ["T-0"], revoked = ["T-3"] }, D = { assigned = [] } }
    [check]                       # optional: properties expected violated (default: exclusive_processing
    expect_violated = []          # when a member pauses, a zombie)

``source`` names what the scenario's outcome follows (a seed section, a Kafka
test), and the replay prints it. ``mutations`` (model/mutations.py REGISTRY) are
added to those given on the command line, e.g. ``connect-leader-state`` to
replay a Design II scenario as Kafka Connect behaves.

Members are client slots named A, B, C, ...; ``initial.owned`` lists the ones
running at the start; any other letter up to the highest named is a slot that
``join`` can start. After an event the deterministic schedule (messages delivered
in the order they were sent, see ``system.settle``) runs until nothing but faults
is enabled.

Every safety property is checked at every step (``run``), and each completed
round is compared with its ``[[expect]]`` block, fields left out not compared;
a round more or fewer than the blocks give is a mismatch too. The same file may
be a check configuration (``rebalance check`` explores every interleaving after
the prefix; it refuses ``[[events]]`` and ignores ``[[expect]]``).

Raises ConfigError for a malformed scenario (the message names the key).
"""
from __future__ import annotations

from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.mutations import REGISTRY
from rebalance.model.protocol import Callback, Error, SyncGroupResponse, member_name

from .engines.explore import UNFAIR_KINDS
from .engines.walks import Checks
from .properties import PROPERTIES, applicable
from .render import bracket, lane, partitions
from .settings import names_in, parse_toml, resolve, validate
from .situations import (initial_state, member_slot, parse_initial, parse_steps, partition_mask, play_step,
                         slots_of, static_slots)
from .system import ENVIRONMENT, FAULTS, State, System, settle

EXPECT_FIELDS = ("assigned", "revoked", "lost")


def load(path: str, mutations=(), assignor: str | None = None) -> dict:
    """Parse and validate a scenario file into ``{name, source, system, initial,
    prefix, events, expect, expect_violated}``; ``mutations``: names added to the
    file's ``mutations``; ``assignor``: the leader's assignor instead of the file's
    (a built-in name or a plug-in's module:function, settings.load_plugin). A check configuration's sections ([members], [faults],
    [check]) may be there too (one file for ``check`` and ``replay``): replay
    reads only ``check.expect_violated`` of them."""
    data = validate(parse_toml(path, "scenario file"), path)
    named = data.get("mutations", [])
    cfg = resolve({"group": data.get("group", {}), "time": data.get("time", {})},
                  mutations=tuple(named) + tuple(mutations), assignor=assignor).group
    initial = parse_initial(cfg, data.get("initial"), path)
    prefix = parse_steps(data.get("prefix", []), "prefix", path)
    events = [(action, slot, bool(ev.get("settle", True)), bool(ev.get("timers", True)))
              for action, slot, ev in parse_steps(data.get("events", []), "events", path, ENVIRONMENT,
                                                      ("action", "member", "settle", "timers"))]
    slots = slots_of(initial, prefix, [(a, s, None) for a, s, _, _ in events])
    system = System(cfg, members=0, joiners=slots, faults=FAULTS, max_faults=0,
                    static=static_slots(initial.static, slots))
    # a paused member is a zombie that keeps processing (settings.resolve's default, the README)
    zombies = ["exclusive_processing"] if any(step[0] == "pause" for step in prefix + events) else []
    expected = frozenset(names_in("check.expect_violated", data.get("check", {}).get("expect_violated", zombies),
                                tuple(p.name for p in PROPERTIES)))
    return {"name": data.get("name", path), "source": data.get("source"), "system": system,
            "initial": initial_state(system, initial), "prefix": prefix, "events": events,
            "expect": _expectations(cfg, data.get("expect", []), path), "expect_violated": expected}


def _expectations(cfg: GroupConfig, blocks, where: str) -> list:
    """``[[expect]]`` blocks, one per completed round in order: ``[{generation,
    members: {lane: {field: [partition, ...]}}}]`` (generation None: not compared;
    a field left out: not compared)."""
    out = []
    for i, block in enumerate(blocks):
        at = f"{where}: expect[{i}]"
        if not isinstance(block, dict) or set(block) - {"generation", "members"}:
            raise ConfigError(f"{at} must be a table of generation (optional) and members = "
                              "{ A = { assigned = [...], revoked = [...] }, ... }")
        gen = block.get("generation")
        if gen is not None and (isinstance(gen, bool) or not isinstance(gen, int)):
            raise ConfigError(f"{at}.generation must be a whole number, got {gen!r}")
        members = block.get("members", {})
        if not isinstance(members, dict):
            raise ConfigError(f"{at}.members must be a table of member = {{ assigned = [...], ... }}")
        want = {}
        for name, fields in members.items():
            member_slot(name)
            if not isinstance(fields, dict) or not fields or set(fields) - set(EXPECT_FIELDS):
                raise ConfigError(f"{at}.members.{name} must give some of {', '.join(EXPECT_FIELDS)}, "
                                  f"got {fields!r}")
            want[name] = {f: partitions(cfg, partition_mask(cfg, ps, f"{at}.members.{name}.{f}"))
                          for f, ps in fields.items()}
        out.append({"generation": gen, "members": want})
    return out


def _ownership(cfg: GroupConfig, state: State) -> dict:
    return {lane(s): partitions(cfg, p.consumer.owned) for s, p in enumerate(state.procs)
            if p.consumer is not None}


def run(scenario: dict, steps: list | None = None) -> dict:
    """Play the prefix steps exactly, settle, then play the events; check every
    property at every step and compare the rounds with the expectations. Returns
    ``{name, source, mutations, initial, events, rounds, rebalances, final,
    violations, mismatches, verdict}``. ``steps``, if given, receives every
    ``(Action, State)`` taken, the events included (checker/vectors.py's seed cases).

    ``rounds``: one entry per generation whose SyncGroup completed, ``{generation,
    leader, [scheduled, deferred,] members: {lane: {member_id, assigned, revoked,
    lost}}}`` (``scheduled``: a ScheduledRebalanceTimeout was sent; ``deferred``:
    lost partitions held back under it, Design II): what the member
    was given, and what it revoked or lost (ConsumerRebalanceListener callbacks)
    since its previous assignment.

    ``violations``: per property broken, the first: ``{property, step, reason}``
    (``step``: its index in the run, 0 the initial state): the invariants on every
    state, the step checks (refinement among them) on every step, the quiescent
    ones on every state where only the environment can act, as the engines check
    them (walks.Checks); liveness properties and those in ``check.expect_violated``
    are not checked. ``mismatches``: the ``[[expect]]`` differences, each naming
    the round, the member and the field. ``verdict``: "holds", or "violated" when
    either list is not empty (``rebalance replay`` exits 1).
    """
    system, state = scenario["system"], scenario["initial"]
    cfg = system.cfg
    report = {"name": scenario["name"], "source": scenario["source"], "mutations": sorted(cfg.mutations),
              "initial": {"generation": state.group.generation, "ownership": _ownership(cfg, state)},
              "events": []}
    path = [(None, state)]
    for action, slot, _ in scenario["prefix"]:
        path.append(play_step(system, path[-1][1], action, slot))
        report["events"].append(f"{lane(slot)} {action}" if slot >= 0 else action)
    if scenario["prefix"]:
        settle(system, path[-1][1], path)
    for action, slot, do_settle, timers in scenario["events"]:
        path.append(play_step(system, path[-1][1], action, slot))
        report["events"].append(f"{lane(slot)} {action}" if slot >= 0 else action)
        if do_settle:
            settle(system, path[-1][1], path, timers)
    if steps is not None:
        steps.extend(path[1:])
    state = path[-1][1]
    report["rounds"] = _rounds(system, path)
    report["rebalances"] = state.group.generation - path[0][1].group.generation
    report["final"] = {"generation": state.group.generation, "phase": state.group.phase.name,
                       "ownership": _ownership(cfg, state)}
    report["violations"] = _violations(system, path, scenario["expect_violated"])
    report["mismatches"] = _mismatches(report["rounds"], scenario["expect"])
    report["verdict"] = "violated" if report["violations"] or report["mismatches"] else "holds"
    return report


def _rounds(system: System, path: list) -> list:
    """The completed rounds along ``path`` (see ``run``)."""
    cfg = system.cfg
    rounds: dict = {}
    pending: dict = {}  # slot -> partitions revoked / lost since its last assignment
    for (_, prev), (a, _) in zip(path, path[1:]):
        if a.kind != "reply":
            continue
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
    return [rounds[g] for g in sorted(rounds)]


def _violations(system: System, path: list, expected) -> list:
    """Every safety property checked along ``path`` (see ``run``): the first
    violation of each, ``{property, step, reason}``."""
    checks = Checks(p.name for p in applicable(system) if p.kind != "liveness" and p.name not in expected)
    found: dict = {}

    def record(name, i, why):
        if why and name not in found:
            found[name] = {"property": name, "step": i, "reason": why}

    for i, (action, state) in enumerate(path):
        if i:
            for name, step in checks.step:
                record(name, i, step(system, path[i - 1][1], action, state))
        for name, check in checks.state:
            record(name, i, check(system, state))
        if checks.quiescent and not any(a.kind not in UNFAIR_KINDS and n != state
                                        for a, n in system.successors(state)):
            for name, check in checks.quiescent:
                record(name, i, check(system, state))
    return sorted(found.values(), key=lambda v: v["step"])


def _mismatches(rounds: list, expect: list) -> list:
    """The differences between the completed ``rounds`` and the ``[[expect]]``
    blocks, one message each naming the round (1, 2, ...), member and field."""
    if not expect:
        return []
    out = []
    for i, want in enumerate(expect, 1):
        if i > len(rounds):
            out.append(f"round {i}: expected, but the replay completed {len(rounds)} round(s)")
            continue
        got = rounds[i - 1]
        at = f"round {i} (generation {got['generation']})"
        if want["generation"] is not None and want["generation"] != got["generation"]:
            out.append(f"{at}: generation: expected {want['generation']}, got {got['generation']}")
        for name, fields in sorted(want["members"].items()):
            member = got["members"].get(name)
            if member is None:
                out.append(f"{at}, member {name}: not in the round (members {', '.join(sorted(got['members']))})")
                continue
            for field, ps in fields.items():
                if member[field] != ps:
                    out.append(f"{at}, member {name}, {field}: expected {bracket(ps)}, got {bracket(member[field])}")
    out += [f"round {i} (generation {r['generation']}): not expected (the [[expect]] blocks give {len(expect)})"
            for i, r in enumerate(rounds[len(expect):], len(expect) + 1)]
    return out


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
    for v in report["violations"]:
        lines.append(f"violated: {v['property']} at step {v['step']}: {v['reason']}")
    lines += [f"mismatch: {m}" for m in report["mismatches"]]
    lines.append(f"verdict: {report['verdict']}")
    return "\n".join(lines)


def _owners(ownership: dict) -> str:
    return ", ".join(f"{m}({', '.join(ps)})" for m, ps in sorted(ownership.items()))
