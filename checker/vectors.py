"""Golden test vectors generated from the model (``rebalance vectors``; format:
spec/VECTORS.md, schema: spec/vectors.schema.json).

Two kinds of case, each ``{id, kind, description, rules, source, config, ...}``:

* ``coordinator``: an initial group (the coordinator's whole state), then steps,
  each an input (a request on a connection, or a timer firing) with the
  responses the coordinator's handler (model/coordinator.py ``handle``) gives and
  the group's state, generation, leader and members after it. The inputs come
  from the seeds' worked examples (examples/*.toml run by checker/replay.py)
  and from seeded random walks of the checker's system (checker/system.py
  ``System.successors``: members, network, timers and faults composed).
* ``assignor``: the members of a JoinGroup response with their owned partitions
  and generations, and the properties the leader's assignment must meet
  (model/assignors.py ``assign``): exclusive, complete except the partitions it
  may withhold, balanced within one, sticky (what owners keep, R22), cooperative
  (R23); the exact answer only for range and roundrobin, which are deterministic.

* ``consumer``: KIP-848's coordinator cases, in the coordinator cases' shape: an
  initial group (a consumer group, or under the online migration a classic one), then
  inputs (ConsumerGroupHeartbeat and OffsetCommit requests, the session and rebalance
  timeouts; classic requests under the migration) with the responses the consumer group
  coordinator (model/consumer_group/coordinator.py ``handle``; the migration's
  model/consumer_group/migration.py ``handle``) gives and the group after each: epochs,
  each member's epoch, state and assigned partitions. The inputs come from seeded walks
  of the checker's KIP-848 systems (checker/consumer_system.py, checker/migration_system.py)
  and from the shortest execution in which a coordinator without commit fencing accepts
  a stale commit.

Everything is a function of fixed seeds: the same bytes on every run.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from pathlib import Path

from rebalance import spec as spec_package
from rebalance.model.assignors import assign, resolve_claims
from rebalance.model.config import KIP848, SERVER_ASSIGNORS, GroupConfig
from rebalance.model.mutations import REGISTRY
from rebalance.model.coordinator import Group, find_instance
from rebalance.model.consumer_group import group as consumer_group
from rebalance.model.consumer_group.group import ConsumerGroup
from rebalance.model.consumer_group.messages import (
    JOIN_EPOCH, ConsumerGroupHeartbeat, MemberRebalanceTimeout, RegexResolved, TopicsChanged,
)
from rebalance.model.protocol import (
    GROUP_STATE_NAMES, NO_GENERATION, NO_MEMBER_ID, DeleteGroup, Error, Heartbeat, InitialRebalanceDelay,
    JoinGroup, LeaveGroup, OffsetCommit, PendingMemberTimeout, Phase, RebalanceTimeout, Receive, SessionTimeout,
    Subscription, SyncGroup, SyncTimeout, connection, instance_id, mask_of, member_id,
)

from . import itf, replay
from .files import atomic_write
from .kafka_json import Codec, config
from .render import lane
from .settings import parse_toml
from .engines.explore import explore
from .consumer_properties import COVERS as CONSUMER_COVERS, PROPERTIES as CONSUMER_PROPERTIES
from .consumer_system import TIMEOUT, ConsumerSystem
from .migration_system import MigrationSystem
from .properties import PROPERTIES, Property
from .system import COMMIT, ENVIRONMENT, FAULTS, Action, System
from .vectors_run import coordinator_handler

FORMAT = "rebalance-vectors"
VERSION = 1
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SCHEMA = Path(spec_package.__file__).resolve().parent / "vectors.schema.json"
ITF_SCHEMA = SCHEMA.with_name("itf.schema.json")
KINDS = ("coordinator", "assignor", "consumer")

# the seeded walks: (protocol, assignor, topics) x dynamic/static x start x seeds
WALK_GROUPS = (("eager", "range", (("t", 3), ("u", 2))), ("eager", "roundrobin", (("t", 3), ("u", 2))),
               ("eager", "sticky", (("t", 4),)), ("cooperative", "cooperative-sticky", (("t", 4),)),
               ("deferred", "cooperative-sticky", (("t", 4),)), ("incremental", "cooperative-sticky", (("t", 4),)))
WALK_SEEDS = 4
# walks for what the others never reach: (family, protocol, assignor, partitions, members, faults, budget,
# action kinds taken first, starts); every member dynamic, one joiner
EXTRA_WALKS = (
    ("kip394", "eager", "range", 3, 2, ("join", "leave", "crash", "restart"), 2, (), ("empty", "stable")),
    ("kip394", "cooperative", "cooperative-sticky", 4, 2, ("join", "leave", "crash", "restart"), 2, (),
     ("empty", "stable")),
    ("commits", "eager", "range", 2, 2, ("pause",), 2, (COMMIT, "timer"), ("stable",)),
    ("commits", "cooperative", "cooperative-sticky", 2, 2, ("pause",), 2, (COMMIT, "timer"), ("stable",)),
    ("delete", "eager", "range", 3, 2, ("leave", "crash", "restart"), 3, ("leave", "crash"), ("stable",)),
    ("delete", "cooperative", "cooperative-sticky", 3, 2, ("leave", "crash", "restart"), 3, ("leave", "crash"),
     ("stable",)),
)
# mutations that let a stale commit in: their shortest exclusive_commits counterexamples give zombie cases
FENCING_MUTATIONS = ("no-commit-fencing",)
ADMIN = "admin"  # an input from outside the group: the admin's DeleteGroup
DELETE_GROUP = DeleteGroup()
WALK_INPUTS = 24  # coordinator inputs per walk, at most
WALK_STEPS = 120  # system steps per walk, at most
# the assignor cases: assignor -> how many
ASSIGNOR_CASES = {"range": 25, "roundrobin": 25, "sticky": 30, "cooperative-sticky": 40}
ASSIGNOR_TOPICS = ((("t", 4),), (("t", 6),), (("t", 3), ("u", 2)), (("t", 1),), (("t", 5), ("u", 3)))
ASSIGNOR_SOURCES = {
    "range": "Kafka RangeAssignor (per topic, contiguous ranges)",
    "roundrobin": "Kafka RoundRobinAssignor",
    "sticky": "Kafka StickyAssignor (KIP-54); claims weighed by generation, KIP-792 / KAFKA-14639",
    "cooperative-sticky": "Kafka CooperativeStickyAssignor (KIP-429); seed 000, Design I, leader process",
}
ASSIGNOR_RULES = {"range": ("R16", "R29"), "roundrobin": ("R16", "R29"), "sticky": ("R16", "R22", "R29"),
                  "cooperative-sticky": ("R16", "R22", "R23", "R29")}
TIMER_RULES = {SessionTimeout: "R11", RebalanceTimeout: "R4", SyncTimeout: "R12", InitialRebalanceDelay: "R30",
               PendingMemberTimeout: "R36", DeleteGroup: "R1"}
REQUEST_RULES = {JoinGroup: "R2", SyncGroup: "R8", Heartbeat: "R10", LeaveGroup: "R7", OffsetCommit: "R9"}
PROTOCOL_RULES = {"deferred": ("R31", "R32"), "incremental": ("R34",)}
# KIP-848's walks: (family, assignor, topics, members, faults, budget, action kinds (or (kind, detail)) taken
# first, starts), each with dynamic and with static members, and one joiner
CONSUMER_WALKS = (
    ("walk", "uniform", (("t", 3), ("u", 2)), 3, FAULTS, 3, (), ("empty", "stable")),
    ("walk", "range", (("t", 3), ("u", 2)), 3, FAULTS, 3, (), ("empty", "stable")),
    ("commits", "uniform", (("t", 2),), 2, ("pause",), 2, (COMMIT, "timer"), ("stable",)),
    ("commits", "range", (("t", 2),), 2, ("pause",), 2, (COMMIT, "timer"), ("stable",)),
    ("lost", "uniform", (("t", 3),), 2, ("pause", "join"), 3, (("resume", TIMEOUT),), ("stable",)),
    ("lost", "range", (("t", 3),), 2, ("pause", "join"), 3, (("resume", TIMEOUT),), ("stable",)),
)
# the online migration's walks: (classic slots, members, faults, budget, starts); 1 joiner, dynamic
MIGRATION_WALKS = ((2, 2, ("join", "leave", "crash", "restart"), 3, ("empty", "stable")),
                   (1, 2, ("join", "leave", "crash", "restart"), 3, ("empty", "stable")))
# the covers of checker/consumer_properties.py whose shortest executions are cases: name -> the behaviour's source
COVER_CASES = {"rebalance_timeout_fenced": "scheduleConsumerGroupRebalanceTimeout, K7",
               "previous_epoch_tolerated": "throwIfConsumerGroupMemberEpochIsInvalid, K3"}
CONSUMER_TIMER_RULES = {SessionTimeout: "K7", MemberRebalanceTimeout: "K7", RegexResolved: "K9", TopicsChanged: "K9"}
CLASSIC_IN_CONSUMER_RULES = {JoinGroup: "M3", SyncGroup: "M4", OffsetCommit: "M4", Heartbeat: "M5",
                             LeaveGroup: "M6"}


def by_number(rules) -> list:
    return sorted(set(rules), key=lambda r: ("RKM".index(r[0]), int(r[1:])))


# -- coordinator cases -------------------------------------------------------------------


def step_rules(before, event, after, replies) -> set:
    """The spec rules (R..) one coordinator step exercises, from its input, the
    errors it answered and how the group moved."""
    rules = {"R1"}
    errors = {r.response.error for r in replies}
    if type(event) is Receive:
        req = event.request
        rules.add(REQUEST_RULES[type(req)])
        if type(req) is JoinGroup:
            if Error.MEMBER_ID_REQUIRED in errors or req.member_id in before.pending:
                rules.add("R36")
            if req.group_instance_id and req.member_id == NO_MEMBER_ID and find_instance(before, req.group_instance_id):
                rules.add("R25")
                if before.phase == after.phase == Phase.STABLE:
                    rules.add("R26")
            if before.phase == after.phase == Phase.COMPLETING_REBALANCE:
                rules.add("R6")
        if type(req) is SyncGroup and req.assignments:
            rules.add("R16")
        if type(req) is Heartbeat and Error.REBALANCE_IN_PROGRESS in errors:
            rules.add("R19")
        if getattr(req, "group_instance_id", 0) and errors & {Error.FENCED_INSTANCE_ID, Error.UNKNOWN_MEMBER_ID}:
            rules.add("R24")
    else:
        rules.add(TIMER_RULES[type(event)])
        if type(event) is RebalanceTimeout and any(m.instance_id for m in after.members):
            rules.add("R27")
    if Error.FENCED_INSTANCE_ID in errors:
        rules.add("R24")
    if before.phase != Phase.PREPARING_REBALANCE and after.phase == Phase.PREPARING_REBALANCE:
        rules.add("R3")
    if after.generation > before.generation:
        rules.update(("R4", "R5"))
    if after.initial_delay:
        rules.add("R30")
    return rules


def consumer_step_rules(before, event, after, replies) -> set:
    """The rules (KIP-848's K.., the online migration's M.., spec/KIP848.md) one step of
    the consumer group coordinator exercises, from its input, its answers and how the
    group moved; a classic group's step under the migration as ``step_rules`` says."""
    if type(before) is type(after) is Group:
        if type(getattr(event, "request", None)) is ConsumerGroupHeartbeat:
            return {"M1"}  # refused (GROUP_ID_NOT_FOUND): the group stays classic
        return step_rules(before, event, after, replies)
    rules = {"M1"} if type(before) is Group else {"M2"} if type(after) is Group else set()
    errors = {r.response.error for r in replies}
    if type(event) is Receive:
        req = event.request
        if type(req) is ConsumerGroupHeartbeat:
            rules.update(("K2", "K10"))
            if req.member_epoch != JOIN_EPOCH:
                rules.add("K7" if req.member_epoch < JOIN_EPOCH else "K3")
            if req.instance_id:
                rules.add("K8")
        elif type(req) is OffsetCommit and not (type(before) is ConsumerGroup and find_classic(before, req.member_id)):
            rules.add("K11")
        else:
            rules.add(CLASSIC_IN_CONSUMER_RULES[type(req)])
    else:
        rules.add(CONSUMER_TIMER_RULES[type(event)])
    if Error.FENCED_MEMBER_EPOCH in errors:
        rules.add("K3")
    if type(after) is ConsumerGroup:
        old = before if type(before) is ConsumerGroup else None
        if old is None or after.epoch > old.epoch:
            rules.add("K1")
        if old is None or after.target_epoch != old.target_epoch:
            rules.add("K4")
        if old is None or after.members != old.members:
            rules.add("K5")
        if old is None or after.partition_epochs != old.partition_epochs:
            rules.add("K6")
    return rules


def find_classic(group: ConsumerGroup, mid: int) -> bool:
    """Whether member ``mid`` of a consumer group speaks the classic protocol (M3-M6)."""
    m = consumer_group.find(group, mid)
    return m is not None and bool(m.classic)


def coordinator_case(cid: str, description: str, source: str, cfg: GroupConfig, group, events) -> dict:
    """A coordinator case: ``events`` (coordinator inputs) played from ``group``
    through the configuration's coordinator handler (vectors_run.coordinator_handler:
    the classic one, or KIP-848's, whose cases are of kind ``consumer``); each step
    expects the replies it gave and the group it left."""
    codec = Codec(cfg)
    consumer = cfg.protocol == KIP848
    handle, rules_of = coordinator_handler(cfg), consumer_step_rules if consumer else step_rules
    rules = set(PROTOCOL_RULES.get(cfg.protocol, ()))
    steps, g = [], group
    for event in events:
        g2, replies = handle(cfg, g, event)
        rules |= rules_of(g, event, g2, replies)
        steps.append({"input": codec.encode(event),
                      "expect": {"responses": [codec.encode(r) for r in replies], "group": codec.summary(g2)}})
        g = g2
    return {"id": cid, "kind": "consumer" if consumer else "coordinator", "description": description,
            "rules": by_number(rules), "source": source, "config": config(cfg), "initial_group": codec.group(group),
            "steps": steps}


def coordinator_inputs(start, steps) -> list:
    """The coordinator inputs along an execution ``[(Action, State), ...]`` from
    ``start``: each delivered request on its process's connection, each timer."""
    events, prev = [], start
    for action, state in steps:
        if action.kind == "deliver":
            events.append(Receive(connection(action.slot, prev.procs[action.slot].epoch), action.detail))
        elif action.kind == "timer" or action.kind == ADMIN:
            events.append(action.detail)
        prev = state
    return events


def scenario_files() -> list:
    """The seeds' worked examples: every examples/**/*.toml with events."""
    return [p for p in sorted(EXAMPLES.rglob("*.toml")) if "events" in parse_toml(str(p), "scenario file")]


def seed_cases() -> list:
    """One coordinator case per worked example, replayed by checker/replay.py."""
    out = []
    for path in scenario_files():
        scenario = replay.load(str(path))
        steps: list = []
        report = replay.run(scenario, steps)
        start = scenario["initial"]
        name = path.relative_to(EXAMPLES).with_suffix("").as_posix().replace("/", "-").replace("_", "-")
        description = (f"{scenario['name']}: events {', '.join(report['events'])}; the group goes from generation "
                       f"{report['initial']['generation']} to {report['final']['generation']} "
                       f"({GROUP_STATE_NAMES[Phase[report['final']['phase']]]}).")
        source = f"{scenario['source'] or ''} (examples/{path.relative_to(EXAMPLES).as_posix()})".strip()
        out.append(coordinator_case(f"coordinator/seed-{name}", description, source, scenario["system"].cfg,
                                    start.group, coordinator_inputs(start, steps)))
    return out


def _walk(system: System, start, rng: random.Random, prefer=(), delete: bool = False) -> tuple:
    """A seeded random walk: ``(steps, faults taken)``, up to WALK_INPUTS
    coordinator inputs or WALK_STEPS steps, or until nothing is enabled. Where an
    action of a kind in ``prefer`` is enabled, the walk takes one of those (commits
    as soon as two owners overlap, R41; faults early). With ``delete``, the admin's
    DeleteGroup (R1) comes first (the group not Empty: nothing changes) and again
    once the group has emptied (it goes Dead: later JoinGroups are refused)."""
    steps, faults, state, inputs, deletes = [], [], start, 0, 0
    for _ in range(WALK_STEPS):
        if delete and deletes < 2 and (deletes == 0 or (state.group.phase == Phase.EMPTY and state.group.generation)):
            deletes += 1
            action, state = Action(ADMIN, -1, DELETE_GROUP), system.coordinator_event(state, DELETE_GROUP)
        else:
            successors = system.successors(state)
            if not successors or inputs >= WALK_INPUTS:
                break
            action, state = rng.choice([x for x in successors if x[0].kind in prefer
                                        or (x[0].kind, x[0].detail) in prefer] or successors)
        steps.append((action, state))
        inputs += action.kind in ("deliver", "timer", ADMIN)
        if action.kind in ENVIRONMENT:
            faults.append(f"{action.kind} {lane(action.slot)}")
    return steps, faults


def walk_cases() -> list:
    """The seeded walks: WALK_GROUPS dynamic and static, from Empty and from Stable;
    then EXTRA_WALKS: KIP-394 joins (MEMBER_ID_REQUIRED, PendingMemberTimeout, R36),
    zombies that commit (OffsetCommit fenced or accepted, R9, R41) and groups that
    empty and are deleted (DeleteGroup, R1)."""
    out = []
    for protocol, assignor, topics in WALK_GROUPS:
        cfg = GroupConfig(topics=topics, protocol=protocol, assignor=assignor)
        for static in (False, True):
            system = System(cfg, members=3, joiners=1, faults=FAULTS, max_faults=3,
                            static=range(4) if static else ())
            kind = "static" if static else "dynamic"
            for start_name, start in (("empty", system.started()), ("stable", system.initial())):
                for seed in range(1, WALK_SEEDS + 1):
                    out.append(_walk_case(f"coordinator/walk-{protocol}-{assignor}-{kind}-{start_name}-{seed}",
                                          system, start_name, start, f"3 {kind} members and 1 joiner"))
    for family, protocol, assignor, partitions, members, faults, budget, prefer, starts in EXTRA_WALKS:
        cfg = GroupConfig(topics=(("t", partitions),), protocol=protocol, assignor=assignor,
                          require_known_member_id=family == "kip394")
        system = System(cfg, members=members, joiners=1, faults=faults, max_faults=budget)
        for start_name in starts:
            start = system.started() if start_name == "empty" else system.initial()
            for seed in range(1, WALK_SEEDS + 1):
                case = _walk_case(f"coordinator/walk-{family}-{protocol}-{start_name}-{seed}", system, start_name,
                                  start, f"{members} dynamic members and 1 joiner", prefer, family == "delete")
                if case["steps"]:  # a walk that spent its faults where nothing follows says nothing
                    out.append(case)
    return out + fenced_commit_cases()


def fenced_commit_cases() -> list:
    """A zombie's OffsetCommit (R9, R41): the inputs of the checker's shortest
    execution (breadth first, checker/engines/explore.py) in which a coordinator with a
    mutation that lets stale commits in accepts one (``exclusive_commits`` broken),
    played against the correct coordinator, which fences it. Two paused members
    and a joiner over 2 partitions, per protocol and mutation."""
    out = []
    for protocol, assignor in (("eager", "range"), ("cooperative", "cooperative-sticky")):
        cfg = GroupConfig(topics=(("t", 2),), protocol=protocol, assignor=assignor)
        for mutation in FENCING_MUTATIONS:
            start, events = _zombie_commit(System, PROPERTIES, cfg, mutation)
            cid = f"coordinator/zombie-commit-{protocol}-{mutation}"
            description = (
                f"A zombie's OffsetCommit: the coordinator inputs of the shortest execution in which a coordinator "
                f"with the mutation {mutation} ({REGISTRY[mutation].does}) accepts commits of one partition from "
                f"two members that both own it; this coordinator refuses the last one. 2 dynamic members and 1 "
                f"joiner, {protocol} protocol, {assignor} assignor, faults pause, crash, join; "
                f"{len(events)} coordinator inputs.")
            source = (f"GroupCoordinator.handleCommitOffsets (generation fencing); the execution found by "
                      f"checker/engines/explore.py under {mutation} ({REGISTRY[mutation].source})")
            out.append(coordinator_case(cid, description, source, cfg, start.group, events))
    return out


def _zombie_commit(system_class, properties, cfg: GroupConfig, mutation: str) -> tuple:
    """``(initial state, coordinator inputs)`` of the checker's shortest execution in which
    ``cfg``'s coordinator under ``mutation`` breaks ``exclusive_commits`` (of
    ``properties``): ``system_class`` (the classic System or KIP-848's) with two paused
    members and a joiner, faults pause, crash, join, budget 3."""
    prop = next(p for p in properties if p.name == "exclusive_commits")
    system = system_class(replace(cfg, mutations=frozenset({mutation})), members=2, joiners=1,
                          faults=("pause", "crash", "join"), max_faults=3)
    start = system.initial()
    return start, coordinator_inputs(start, shortest(system, prop))


def shortest(system: System, prop) -> list:
    """The checker's shortest execution (breadth first, checker/engines/explore.py) in which
    ``prop`` breaks: ``[(Action, State), ...]`` after the initial state."""
    return explore(system, (prop,), stop_on={prop.name}).violations[0].path[1:]


def reaching(system: System, cover) -> list:
    """The checker's shortest execution whose last step reaches ``cover`` (a Cover of
    checker/consumer_properties.py), as ``shortest``; its last step is one that reaches it
    (the search names a step by the first action leading to the same state: a session
    timeout fences a member as its rebalance timeout does)."""
    prop = Property(cover.name, "invariant", cover.description, cover.applies, None,
                    step=lambda system, s, a, n: "reached" if cover.reached(system, s, a, n) else None)
    path = shortest(system, prop)
    before = path[-2][1]
    return path[:-1] + [next((a, n) for a, n in system.successors(before) if cover.reached(system, before, a, n))]


# -- KIP-848 cases (kind consumer) --------------------------------------------------------


def consumer_cases() -> list:
    """KIP-848's coordinator cases: CONSUMER_WALKS over the uniform and range assignors, each
    dynamic and static (joins, leaves at -1 and -2, crashes, restarts, pauses past the
    session, fencing; commits taken first: OffsetCommit with member epochs, K11; lost
    heartbeat responses taken first: the previous-epoch tolerance, K3); MIGRATION_WALKS (the
    online migration, classic and consumer-protocol members, M1-M6); and a zombie's
    OffsetCommit from the shortest stale commit a coordinator without fencing accepts."""
    out = []
    for family, assignor, topics, members, faults, budget, prefer, starts in CONSUMER_WALKS:
        cfg = GroupConfig(topics=topics, protocol=KIP848, assignor=assignor)
        for static in (False, True):
            system = ConsumerSystem(cfg, members=members, joiners=1, faults=faults, max_faults=budget,
                                    static=range(members + 1) if static else ())
            kind = "static" if static else "dynamic"
            for start_name in starts:
                start = system.started() if start_name == "empty" else system.initial()
                for seed in range(1, WALK_SEEDS + 1):
                    case = _walk_case(f"consumer/{family}-{assignor}-{kind}-{start_name}-{seed}", system,
                                      start_name, start, f"{members} {kind} members and 1 joiner", prefer)
                    if case["steps"]:
                        out.append(case)
    for classic, members, faults, budget, starts in MIGRATION_WALKS:
        cfg = GroupConfig(topics=(("t", 3),), protocol=KIP848, assignor="uniform", migration=classic)
        system = MigrationSystem(cfg, members=members, joiners=1, faults=faults, max_faults=budget)
        for start_name in starts:
            start = system.started() if start_name == "empty" else system.initial()
            for seed in range(1, WALK_SEEDS + 1):
                case = _walk_case(f"consumer/migration-{classic}-classic-{start_name}-{seed}", system, start_name,
                                  start, f"{members + 1} dynamic clients, the first {classic} classic")
                if case["steps"]:
                    out.append(case)
    return out + consumer_cover_cases() + consumer_fenced_commit_cases()


def consumer_cover_cases() -> list:
    """The checker's shortest executions reaching what the walks reach seldom (COVER_CASES):
    a member that does not revoke fenced by its rebalance timeout (K7), and a heartbeat at a
    member's previous epoch accepted after its response was lost (K3); their coordinator
    inputs, per server assignor. 2 dynamic members and 1 joiner over 2 partitions, faults
    pause and join (at most 2)."""
    out = []
    for name in COVER_CASES:
        cover = next(c for c in CONSUMER_COVERS if c.name == name)
        for assignor in SERVER_ASSIGNORS:
            cfg = GroupConfig(topics=(("t", 2),), protocol=KIP848, assignor=assignor)
            system = ConsumerSystem(cfg, members=2, joiners=1, faults=("pause", "join"), max_faults=2)
            start = system.initial()
            events = coordinator_inputs(start, reaching(system, cover))
            description = (
                f"The checker's shortest execution in which {cover.description}: its coordinator inputs. 2 dynamic "
                f"members and 1 joiner, {assignor} assignor, faults pause and join; {len(events)} coordinator inputs.")
            source = (f"the model's consumer group coordinator (KIP-848; GroupMetadataManager, {COVER_CASES[name]}); "
                      f"the execution found by checker/engines/explore.py reaching the cover {name}")
            out.append(coordinator_case(f"consumer/{name.replace('_', '-')}-{assignor}", description, source, cfg,
                                        start.group, events))
    return out


def consumer_fenced_commit_cases() -> list:
    """A zombie's OffsetCommit under KIP-848 (K11): the inputs of the checker's shortest
    execution in which a consumer group coordinator without commit fencing accepts a
    commit that ``exclusive_commits`` forbids, played against the correct coordinator."""
    out = []
    mutation = "no-commit-fencing"
    for assignor in ("uniform", "range"):
        cfg = GroupConfig(topics=(("t", 2),), protocol=KIP848, assignor=assignor)
        start, events = _zombie_commit(ConsumerSystem, CONSUMER_PROPERTIES, cfg, mutation)
        description = (
            f"A zombie's OffsetCommit (KIP-848): the coordinator inputs of the shortest execution in which a "
            f"consumer group coordinator with the mutation {mutation} ({REGISTRY[mutation].does}) accepts a "
            f"commit that exclusive_commits forbids; this coordinator refuses it. 2 dynamic members and 1 joiner, "
            f"{assignor} assignor, faults pause, crash, join; {len(events)} coordinator inputs.")
        source = ("ConsumerGroup.validateOffsetCommit (member epoch fencing, K11); the execution found by "
                  f"checker/engines/explore.py under {mutation}")
        out.append(coordinator_case(f"consumer/zombie-commit-{assignor}", description, source, cfg, start.group,
                                    events))
    return out


def _walk_case(cid: str, system: System, start_name: str, start, who: str, prefer=(), delete=False) -> dict:
    cfg = system.cfg
    steps, faults = _walk(system, start, random.Random(cid), prefer, delete)
    events = coordinator_inputs(start, steps)
    counts = {name: sum(type(e).__name__ == name or type(getattr(e, "request", None)).__name__ == name
                        for e in events) for name in ("OffsetCommit", "PendingMemberTimeout", "DeleteGroup",
                                                      "MemberRebalanceTimeout")}
    joins = "ConsumerGroupHeartbeats" if cfg.protocol == KIP848 and not cfg.migration else "JoinGroups"
    description = (
        f"Seeded random walk ({cid}) of the checker's system: {who}, {cfg.protocol} protocol"
        + (" (KIP-848's online migration)" if cfg.migration else "") + f", {cfg.assignor} "
        f"assignor" + (", JoinGroup v4+ (KIP-394)" if cfg.require_known_member_id else "") + ", from "
        + (f"an Empty group with the first {joins} in flight" if start_name == "empty"
           else "the Stable group they formed")
        + (f", taking {' and '.join(_preferred(prefer))} first where enabled" if prefer else "")
        + f"; faults: {', '.join(faults) or 'none'}; {len(events)} coordinator inputs"
        + "".join(f", {n} {name}" for name, n in counts.items() if n) + ".")
    if cfg.protocol == KIP848:
        source = ("the model's consumer group coordinator (KIP-848; org.apache.kafka.coordinator.group."
                  "GroupMetadataManager.consumerGroupHeartbeat" + (", KIP-345" if system.static else "")
                  + (", the online migration" if cfg.migration else "") + "), inputs from "
                  + ("checker/migration_system.py" if cfg.migration else "checker/consumer_system.py"))
    else:
        source = ("the model's coordinator (kafka.coordinator.group.GroupCoordinator, seed 004"
                  + (", KIP-345" if system.static else "") + (", KIP-394" if cfg.require_known_member_id else "")
                  + "), inputs from checker/system.py" + (" and the admin's DeleteGroup" if delete else ""))
    return coordinator_case(cid, description, source, cfg, start.group, events)


def _preferred(prefer) -> list:
    """What a walk takes first, in words: action kinds, and a resume whose heartbeat timed out."""
    return [p if isinstance(p, str) else "a resume after a lost heartbeat response" for p in prefer]


# -- assignor cases ------------------------------------------------------------------------


def _assignor_members(cfg: GroupConfig, rng: random.Random) -> tuple:
    """Random JoinGroup members ((member_id, group_instance_id, Subscription), ...),
    in member id order: 1-5 of clients A-F, some static, each claiming some
    partitions at its own generation; a partition now and then claimed twice."""
    slots = sorted(rng.sample(range(6), rng.randint(1, 5)))
    mids = {s: member_id(s, rng.randint(1, 3)) for s in slots}
    gens = {s: rng.randint(1, 5) for s in slots}
    owned = {s: 0 for s in slots}
    for p in range(cfg.num_partitions):
        for s in rng.sample(slots, min(len(slots), rng.choice((0, 1, 1, 1, 2)))):
            owned[s] |= 1 << p
    return tuple((mids[s], instance_id(s) if rng.random() < 0.3 else 0,
                  Subscription(owned[s], gens[s]) if owned[s] else Subscription(0, NO_GENERATION))
                 for s in sorted(slots, key=lambda s: mids[s]))


def assignor_expect(cfg: GroupConfig, members, assignment) -> dict:
    """The properties the leader's assignment must meet, from the spec's rules:
    ``exclusive``; ``may_withhold``, the partitions it may leave out (cooperative:
    claimed ones, R23; else none); ``balanced`` ``{max_load, min_load}`` (a member's
    load is at most max_load, and with every withheld partition added at least
    min_load; not for range over several topics); ``sticky`` (R22: per member the
    partitions it owns by the newest claim and how many of them it keeps at least);
    ``owners`` (cooperative, R23: a partition with an owner goes to it or nobody);
    ``exact`` (range, roundrobin: the one answer)."""
    codec = Codec(cfg)
    n = len(members)
    base, extra = divmod(cfg.num_partitions, n)
    owners = resolve_claims(cfg, members)
    claimed = 0
    for _, _, sub in members:
        claimed |= sub.owned
    expect = {"exclusive": True, "may_withhold": codec.parts(claimed) if cfg.cooperative else []}
    if not (cfg.assignor == "range" and len(cfg.topics) > 1):
        expect["balanced"] = {"max_load": base + (1 if extra else 0), "min_load": base}
    if cfg.assignor in ("sticky", "cooperative-sticky"):
        sticky = []
        for mid, _, _ in members:
            mine = mask_of(p for p, o in owners.items() if o == mid)
            if mine:
                sticky.append({"member_id": codec.member(mid), "owned_partitions": codec.parts(mine),
                               "keep_at_least": min(bin(mine).count("1"), base)})
        expect["sticky"] = sticky
    if cfg.cooperative:
        expect["owners"] = {cfg.partition_name(p): codec.member(o) for p, o in sorted(owners.items())}
    if cfg.assignor in ("range", "roundrobin"):
        expect["exact"] = {codec.member(mid): codec.parts(a.partitions) for mid, a in assignment}
    return expect


def assignor_cases() -> list:
    out = []
    for assignor, count in ASSIGNOR_CASES.items():
        protocol = "cooperative" if assignor == "cooperative-sticky" else "eager"
        for i in range(1, count + 1):
            cid = f"assignor/{assignor}-{i}"
            rng = random.Random(cid)
            cfg = GroupConfig(topics=ASSIGNOR_TOPICS[i % len(ASSIGNOR_TOPICS)], protocol=protocol, assignor=assignor)
            members = _assignor_members(cfg, rng)
            codec = Codec(cfg)
            tied = sorted(set().union(*[set(codec.parts(s.owned)) for _, _, s in members]) -
                          set(codec.parts(mask_of(resolve_claims(cfg, members)))))
            description = (f"{assignor} over {', '.join(f'{t}:{c}' for t, c in cfg.topics)} with {len(members)} "
                           f"member(s)" + (f"; claimed at the same newest generation by two members: {', '.join(tied)}"
                                           if tied else "") + ".")
            out.append({"id": cid, "kind": "assignor", "description": description,
                        "rules": by_number(ASSIGNOR_RULES[assignor]), "source": ASSIGNOR_SOURCES[assignor],
                        "config": config(cfg),
                        "members": [{"member_id": codec.member(mid), "group_instance_id": codec.instance(iid),
                                     "subscription": codec.subscription(sub)} for mid, iid, sub in members],
                        "expect": assignor_expect(cfg, members, assign(cfg, members))})
    return out


# -- writing ---------------------------------------------------------------------------------


def cases() -> list:
    """Every case, in a fixed order: the seeds' examples, the walks, the assignors, KIP-848's."""
    return seed_cases() + walk_cases() + assignor_cases() + consumer_cases()


def _json(value) -> bytes:
    return (json.dumps(value, indent=1, sort_keys=True) + "\n").encode()


def write(out_dir, with_itf: bool = False) -> dict:
    """Write ``<out>/<kind>/<name>.json`` per case, ``<out>/index.json`` and a copy of
    the schema ``<out>/vectors.schema.json``, each atomically (a temporary file,
    then a rename); with ``with_itf``, each coordinator case also as an ITF trace
    ``<out>/coordinator/<name>.itf.json`` (checker/itf.py) and the ITF schema
    ``<out>/itf.schema.json``. Stale case files of an
    earlier run are removed. Returns the index: ``{format, version, schema, counts
    (per kind), total, from_seed_examples, cases: [{id, kind, file, itf?}]}``."""
    out = Path(out_dir)
    all_cases = cases()
    for kind in KINDS:
        (out / kind).mkdir(parents=True, exist_ok=True)
    written, entries = set(), []
    for case in all_cases:
        entry = {"id": case["id"], "kind": case["kind"], "file": f"{case['id']}.json"}
        atomic_write(out / entry["file"], _json(case))
        if with_itf and case["kind"] == "coordinator":
            entry["itf"] = f"{case['id']}.itf.json"
            atomic_write(out / entry["itf"], _json(itf.vector(case)))
        written.update(out / entry[k] for k in ("file", "itf") if k in entry)
        entries.append(entry)
    for kind in KINDS:
        for stale in (out / kind).glob("*.json"):
            if stale not in written and re.fullmatch(r"[a-z0-9-]+(\.itf)?\.json", stale.name):
                stale.unlink()
    atomic_write(out / "vectors.schema.json", SCHEMA.read_bytes())
    if with_itf:
        atomic_write(out / ITF_SCHEMA.name, ITF_SCHEMA.read_bytes())
    elif (out / ITF_SCHEMA.name).is_file():
        (out / ITF_SCHEMA.name).unlink()
    counts = {kind: sum(c["kind"] == kind for c in all_cases) for kind in KINDS}
    index = {"format": FORMAT, "version": VERSION, "schema": "vectors.schema.json", "counts": counts,
             "total": len(all_cases),
             "from_seed_examples": sum(c["id"].startswith("coordinator/seed-") for c in all_cases),
             "cases": entries}
    atomic_write(out / "index.json", _json(index))
    return index
