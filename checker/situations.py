"""Situations: a designer's own starting point for ``check`` and ``replay``
(``[initial]`` and ``[[prefix]]``, issue 20 item 1), and the seeds' situations as
simulation scripts (seed 000, "Motivation" and the Design II examples; KIP-345's
rolling bounce; KIP-429's scaling examples).

**Your own situation.** A configuration (``rebalance check``) or scenario
(``rebalance replay``) may give the group's state and steps to play first::

    [initial]
    generation = 1                # the generation the members own their partitions in (>= 1)
    leader = "A"                  # default: the first member named
    owned = { A = ["T-0", "T-3"], B = ["T-1"], C = ["T-2"] }   # the running members, A, B, ...
    static = false                # true, or a list of letters: static members (KIP-345)
    [[prefix]]                    # steps played exactly as written, in order
    action = "join"               # join | leave | crash | restart | pause | resume (the environment's),
    member = "D"                  # or deliver | reply | heartbeat | commit | scheduled (that member's next
                                  # request or response, a heartbeat, ...), or timer | tick (no member)

``initial_state`` builds the Stable group (``System.stable``): every member
named runs its first process, owns its partitions at ``generation`` and was
assigned them by ``leader``'s round. ``play_prefix`` then takes each step as
one transition of ``System.successors``; ``check`` explores every interleaving
from where the prefix ends (``System(start=...)``), ``replay`` settles the group
and plays its ``[[events]]``. Validation (ConfigError naming the problem): a
partition that does not exist, a partition owned by two members (both named),
a leader that is not a running member, a generation below 1, a member name that
is not one capital letter, a step not enabled where it is played (why).

``script(name, rng, members)`` returns ``((time_ms, action, slot), ...)`` for
checker/simulation.py, drawn from ``rng`` (a ``random.Random``): times are ms from
the moment the group has settled, slots ``0..members-1`` are the initial
processes and ``members, members+1, ...`` new ones.

* ``rolling_bounce``: every process in turn is stopped gracefully and started
  again 5–15 s later (a deploy); the next goes 10–20 s after it is back
  (Kubernetes waiting for readiness).
* ``process_death``: one process is killed (no LeaveGroup) and Kubernetes
  restarts it 5–60 s later — sometimes within session.timeout.ms, sometimes not.
* ``scale_up``: a quarter more processes (at least one) start within 2 s.
* ``scale_down``: a quarter of the processes (at least one) stop within 2 s.
* ``host_swap``: one process stops for good and a new one, on another host
  (another slot, so another group.instance.id), starts 5–20 s later.
"""
from __future__ import annotations

import random
from typing import NamedTuple

from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.protocol import mask_of

from .render import lane, partitions, slot_named
from .system import (ACTION_KINDS, BOUNCE, CREATE_TOPIC, DELETE_CONNECTOR, ENVIRONMENT, FAILOVER, FAULT_KINDS,
                     STATUS_NAMES, State, System)

S = 1_000  # ms


def _rolling_bounce(rng: random.Random, members: int) -> list:
    out, t = [], 0
    for slot in range(members):
        down = rng.randint(5 * S, 15 * S)
        out += [(t, "stop", slot), (t + down, "start", slot)]
        t += down + rng.randint(10 * S, 20 * S)
    return out


def _process_death(rng: random.Random, members: int) -> list:
    slot = rng.randrange(members)
    return [(0, "crash", slot), (rng.randint(5 * S, 60 * S), "start", slot)]


def _scale_up(rng: random.Random, members: int) -> list:
    return [(rng.randint(0, 2 * S), "start", members + i) for i in range(max(1, members // 4))]


def _scale_down(rng: random.Random, members: int) -> list:
    return [(rng.randint(0, 2 * S), "stop", slot) for slot in rng.sample(range(members), max(1, members // 4))]


def _scale_down_admin(rng: random.Random, members: int) -> list:
    """Scale-down with admin removal (seed 002, "Scale down"; R71): the processes stop
    (a static member sends no LeaveGroup, R20) and an admin client removes them 1-3 s
    later instead of waiting out session.timeout.ms. A dynamic member has left already."""
    out = []
    for slot in rng.sample(range(members), max(1, members // 4)):
        t = rng.randint(0, 2 * S)
        out += [(t, "stop", slot), (t + rng.randint(S, 3 * S), "remove", slot)]
    return out


def _host_swap(rng: random.Random, members: int) -> list:
    return [(0, "stop", rng.randrange(members)), (rng.randint(5 * S, 20 * S), "start", members)]


SITUATIONS = {
    "rolling_bounce": _rolling_bounce,
    "process_death": _process_death,
    "scale_up": _scale_up,
    "scale_down": _scale_down,
    "scale_down_admin": _scale_down_admin,
    "host_swap": _host_swap,
}


def script(name: str, rng: random.Random, members: int) -> tuple:
    """The script of situation ``name``, sorted by time. Raises KeyError for an unknown name."""
    return tuple(sorted(SITUATIONS[name](rng, members)))


# --- a designer's own situation: [initial] and [[prefix]] ------------------------------

PREFIX_ACTIONS = tuple(k for k in ACTION_KINDS if k != BOUNCE)
NO_MEMBER = ("timer", "tick", CREATE_TOPIC, DELETE_CONNECTOR)  # the coordinator's timers, the clock, a topic
# created, a connector deleted: no member


class Initial(NamedTuple):
    """A parsed ``[initial]`` table: ``owned`` {slot: partition bitmask} of the
    running members, ``generation`` (>= 1), ``leader`` (a slot of ``owned``),
    ``static`` (the raw ``static`` value, see static_slots)."""

    owned: dict
    generation: int
    leader: int
    static: object


def static_slots(value, slots: int) -> frozenset:
    """``true``: every client is static; a list of letters: those clients; ``false``: none."""
    if value is True:
        return frozenset(range(slots))
    if value is False:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) == 1 and "A" <= v <= "Z"
                                              for v in value):
        raise ConfigError(f"members.static must be true, false or a list of client letters, got {value!r}")
    out = frozenset(slot_named(v) for v in value)
    if max(out, default=0) >= slots:
        raise ConfigError(f"members.static names a client beyond the {slots} configured")
    return out


def member_slot(name) -> int:
    """The client slot a member name (``A``, ``B``, ...) names. ConfigError otherwise."""
    if not (isinstance(name, str) and len(name) == 1 and name.isalpha() and name.isupper()):
        raise ConfigError(f"member names are single capital letters (A, B, ...), got {name!r}")
    return slot_named(name)


def partition_mask(cfg: GroupConfig, names, where: str) -> int:
    """The bitmask of the partitions ``names`` (``topic-index``). ConfigError naming
    ``where`` and the partition for one the group's topics do not have."""
    index = {cfg.partition_name(p): p for p in range(cfg.num_partitions)}
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where} must be a list of partition names, e.g. [\"t-0\"], got {names!r}")
    for n in names:
        if n not in index:
            raise ConfigError(f"{where}: unknown partition {n!r} (partitions are {', '.join(index)})")
    return mask_of(index[n] for n in names)


def parse_initial(cfg: GroupConfig, initial, where: str) -> Initial:
    """Validate an ``[initial]`` table (module docstring; its keys are checked with
    the file's, settings.validate) into an ``Initial``."""
    if initial is None:
        raise ConfigError(f"{where}: no [initial]: a scenario starts from the group's state "
                          "(owned = { A = [...], ... })")
    if not isinstance(initial, dict):
        raise ConfigError(f"{where}: [initial] must be a table")
    names = initial.get("owned")
    if not isinstance(names, dict) or not names or not all(isinstance(v, list) for v in names.values()):
        raise ConfigError(f"{where}: [initial] needs owned = {{ A = [...], ... }} naming the running members")
    owned, owner = {}, {}
    for m, ps in names.items():
        slot = member_slot(m)
        owned[slot] = partition_mask(cfg, ps, f"{where}: initial.owned.{m}")
        for p in ps:
            if p in owner and owner[p] != m:
                raise ConfigError(f"{where}: partition {p} is owned twice, by {owner[p]} and {m} "
                                  "(a Stable group gives each partition to one member)")
            owner[p] = m
        stray = owned[slot] & ~cfg.partitions_of_topics(cfg.subscription_of(slot))
        if stray:
            raise ConfigError(f"{where}: initial.owned.{m}: {', '.join(partitions(cfg, stray))} not of a topic {m} "
                              f"subscribes to (R61)")
    generation = initial.get("generation", 1)
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
        raise ConfigError(f"{where}: initial.generation must be a whole number of at least 1, got {generation!r}")
    leader = member_slot(initial.get("leader", lane(min(owned))))
    if leader not in owned:
        raise ConfigError(f"{where}: initial.leader {lane(leader)} is not among the members "
                          f"({', '.join(lane(s) for s in sorted(owned))})")
    return Initial(owned, generation, leader, initial.get("static", False))


def parse_steps(steps, key: str, where: str, actions=PREFIX_ACTIONS, keys=("action", "member")) -> list:
    """Validate ``[[key]]`` steps into ``[(action, slot, table), ...]`` (slot -1 for
    timer and tick; ``table``: the step, whose keys must be among ``keys``)."""
    if not isinstance(steps, list):
        raise ConfigError(f"{where}: {key} must be an array of tables ([[{key}]])")
    out = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ConfigError(f"{where}: {key}[{i}] must be a table with action and member")
        unknown = set(step) - set(keys)
        if unknown:
            raise ConfigError(f"{where}: {key}[{i}]: unknown key(s) {', '.join(sorted(unknown))} "
                              f"(expected {', '.join(keys)})")
        action = step.get("action")
        if action not in actions:
            raise ConfigError(f"{where}: {key}[{i}].action must be one of {', '.join(actions)}, got {action!r}")
        slot = -1 if action in NO_MEMBER else member_slot(step.get("member"))
        out.append((action, slot, step))
    return out


def slots_of(initial: Initial, *steps) -> int:
    """How many client slots the situation names: up to the highest letter in
    ``initial.owned`` and in the parsed ``steps`` lists."""
    named = set(initial.owned) | {slot for some in steps for _, slot, _ in some}
    return max(named) + 1


def initial_state(system: System, initial: Initial) -> State:
    """The Stable group of ``initial`` on ``system`` (its slots cover every member
    named), with ``system.max_faults`` faults left."""
    return system.stable(initial.owned, initial.generation, initial.leader)._replace(faults_left=system.max_faults)


def play_step(system: System, state: State, action: str, slot: int) -> tuple:
    """Take one scripted step: ``(Action, State')``, the transition of
    ``System.successors`` of that kind for that member (an environment action
    whatever faults the configuration enables, spending no budget). ConfigError
    naming the step and why it is not enabled."""
    if action in ENVIRONMENT:
        # every fault; a failover only if the system keeps the coordinator's record (R72)
        kinds = tuple(k for k in FAULT_KINDS if k != FAILOVER or k in system.faults)
        everything = System(system.cfg, 0, system.slots, kinds, 1, system.static)
        options = everything.fault_successors(state._replace(faults_left=1))
        found = [(a, n._replace(faults_left=state.faults_left)) for a, n in options if a.kind == action and a.slot == slot]
    else:
        found = [(a, n) for a, n in system.successors(state._replace(faults_left=0))
                 if a.kind == action and a.slot == slot]
        found = [(a, n._replace(faults_left=state.faults_left)) for a, n in found]
    if len(found) == 1 or (found and action == "tick"):
        return found[0]
    who = "" if slot < 0 else f" {lane(slot)}"
    if found:
        raise ConfigError(f"step {action}{who} is ambiguous here: " +
                          ", ".join(type(a.detail).__name__ for a, _ in found) + " are armed")
    proc = state.procs[slot] if slot >= 0 else None
    if proc is None:
        why = "nothing of that kind is enabled"
    elif action == "deliver":
        why = "no request of its is in flight"
    elif action == "reply":
        why = "no response to it is in flight"
    elif proc.requests and action in ("join", "restart"):
        why = "its previous process still has a request in flight"
    else:
        why = f"the member is {STATUS_NAMES[proc.status]}"
    raise ConfigError(f"step {action}{who} is not possible here ({why})")


def play_prefix(system: System, state: State, steps, trace: list | None = None) -> State:
    """Play parsed ``steps`` (``parse_steps``) from ``state`` exactly as written;
    appends each ``(Action, State)`` to ``trace`` if given."""
    for action, slot, _ in steps:
        a, state = play_step(system, state, action, slot)
        if trace is not None:
            trace.append((a, state))
    return state
