"""Executions in the Informal Trace Format (ITF, Apalache ADR-015: apalache-mc/apalache
docs/src/adr/015adr-trace.md), for drivers in any language (spec/VECTORS.md, section
ITF traces; schema: spec/itf.schema.json).

A trace is ``{"#meta", "vars", "states", "loop"?}``; each state is ``{"#meta":
{"index": i}, <var>: <expr>, ...}``. Expressions follow the ADR exactly: integers
always ``{"#bigint": "<digits>"}`` (the ADR's current text: big and small integers
must be written so), sets ``{"#set": [...]}``, maps ``{"#map": [[k, v], ...]}``,
records as JSON objects, lists as arrays, variants ``{"tag", "value"}`` (a message
is the variant of its type; an absent value is Quint's ``None``, a present one
``Some``). A lasso carries the index of its loop's first state in the trace
object's ``loop`` (the ADR's field; Apalache and Quint read it there).

As Quint's model-based-testing traces do, each state also holds
``mbt::actionTaken`` (the action that reached it; ``"init"`` for the first) and
``mbt::nondetPicks`` (the choices it made: the client, its connection, the request
delivered or the response handled or the request sent, the coordinator timer that
fired, the fault injected), so a driver replays the trace action by action.

Values speak Kafka (checker/kafka_json.py ``Codec``): member.id ``"A-1"``,
connection ``"A/1"``, partitions ``"t-0"``, errors and group states by name.
"""
from __future__ import annotations

from rebalance.model import coordinator
from rebalance.model.config import GroupConfig
from rebalance.model.consumer_group.membership import NONE as NO_ASSIGNMENT, Membership
from rebalance.model.member import subscription
from rebalance.model.protocol import DeleteGroup, Receive, connection
from rebalance.model.streams import StreamsMemory

from .kafka_json import Codec, config, config_of
from .render import lane
from .system import BOUNCE, ENVIRONMENT, STATUS_NAMES, Action, State

FORMAT_DESCRIPTION = "https://apalache-mc.org/docs/adr/015adr-trace.html"
ACTION, PICKS = "mbt::actionTaken", "mbt::nondetPicks"
PICK_NAMES = ("client", "connection", "message", "timer", "fault")
CHECK_VARS = ("group", "clients", "faults_left", ACTION, PICKS)
VECTOR_VARS = ("group", "responses", ACTION, PICKS)
# Codec JSON fields that are sets, maps (JSON object keyed by a name) and optional values
SET_FIELDS = frozenset({"owned_partitions", "partitions", "assigned", "deferred", "pending_member_ids",
                        "previous", "pending_revocation"})
MAP_FIELDS = {"member_ids_issued": None, "committed_while_shared_with": "partitions", "clients": None,  # -> values
              "target_assignment": "partitions", "partition_epochs": "partition_epoch",
              "assignment_epochs": None}
OPTION_FIELDS = frozenset({"group_instance_id", "instance_id", "consumer", "membership", "partition_epoch",
                           "server_assignor"})
# KIP-848's optional partition or topic sets (null: not sent, or none yet): None or Some(set)
OPTION_SET_FIELDS = frozenset({"owned", "current", "target", "reconciling", "topics", "subscribed_topics"})
NONE = {"tag": "None", "value": {"#tup": []}}


def value(x, field: str | None = None):
    """An ITF expression for Codec JSON ``x`` (the value of record field ``field``):
    ints as #bigint, a message ``{"type": T, ...}`` as the variant T, the fields of
    SET_FIELDS as #set (in the Codec's order), of MAP_FIELDS as #map (keys sorted),
    of OPTION_FIELDS as None/Some."""
    if field in OPTION_FIELDS:
        return NONE if x is None else {"tag": "Some", "value": value(x)}
    if field in OPTION_SET_FIELDS or (field == "assignment" and not isinstance(x, dict)):
        return NONE if x is None else {"tag": "Some", "value": value(x if isinstance(x, list) else [x], "partitions")}
    if isinstance(x, bool) or isinstance(x, str):
        return x
    if isinstance(x, int):
        return {"#bigint": str(x)}
    if field in SET_FIELDS:
        return {"#set": [value(e) for e in x]}
    if field in MAP_FIELDS:
        return {"#map": [[k, value(v, MAP_FIELDS[field])] for k, v in sorted(x.items())]}
    if isinstance(x, list):
        return [value(e) for e in x]
    if "type" in x:
        return {"tag": x["type"], "value": {k: value(v, k) for k, v in x.items() if k != "type"}}
    return {k: value(v, k) for k, v in x.items()}


def picks(**chosen) -> dict:
    """``mbt::nondetPicks``: every pick name, Some(value) for those ``chosen``, else None."""
    return {name: NONE if chosen.get(name) is None else {"tag": "Some", "value": chosen[name]}
            for name in PICK_NAMES}


def _trace(meta: dict, vars_: tuple, states: list, loop: int | None = None) -> dict:
    out = {"#meta": {"format": "ITF", "format-description": FORMAT_DESCRIPTION, **meta}, "vars": list(vars_),
           "states": [{"#meta": {"index": i}, **s} for i, s in enumerate(states)]}
    if loop is not None:
        out["loop"] = loop
    return out


# -- counterexamples (the checker's system) ------------------------------------------------


def _memory(codec: Codec, memory) -> dict:
    """The leader's memory: what it assigned or held back (the leader-memory mutations
    only), or the Streams leader's last participants and leaving members (R52)."""
    if type(memory) is StreamsMemory:
        return {"participants": [codec.member(m) for m in memory.participants],
                "leaving": [codec.member(m) for m in memory.leaving]}
    return {"previous": codec.parts(memory[0]), "deferred": codec.parts(memory[1])}


def clients(codec: Codec, state: State) -> dict:
    """Per client (its lane letter), its process: status (absent, running, paused,
    crashed), connection (``"A/2"``: the 2nd process; ``"A/0"`` before the first), the
    member state (None unless running or paused), the requests and responses in
    flight on its connection, and the checker's commit history (R41)."""
    out = {}
    for slot, p in enumerate(state.procs):
        c = p.consumer
        if type(c) is Membership:
            out[lane(slot)] = _kip848_client(codec, slot, p)
            continue
        out[lane(slot)] = {
            "process": STATUS_NAMES[p.status], "connection": codec.conn(connection(slot, p.epoch)),
            "consumer": None if c is None else {
                "phase": c.phase.name, "member_id": codec.member(c.member_id),
                "group_instance_id": codec.instance(c.group_instance_id), "generation": c.generation,
                "leader": c.leader, "heartbeat_inflight": c.heartbeat_inflight,
                "memory": _memory(codec, c.memory),
                # what it owns, in the generation it was given them, and Design II's echo and countdown:
                # the Subscription its next JoinGroup carries (KIP-792, R31, R32), Streams' user data (R46)
                "subscription": codec.subscription(subscription(c)._replace(scheduled=c.scheduled)),
                **({"scale_down_ticks_left": c.streams.countdown} if c.streams else {})},
            "to_coordinator": [codec.encode(r) for r in p.requests],
            "to_member": [codec.encode(r) for r in p.responses],
            "committed": p.committed,
            "committed_while_shared_with": {lane(t): codec.parts(m) for t, m in enumerate(p.shared) if m},
        }
    return out


def _kip848_client(codec: Codec, slot: int, p) -> dict:
    """A KIP-848 client: its membership state, member epoch, owned, current and target
    assignments (null: none yet), and what is in flight."""
    c = p.consumer
    return {
        "process": STATUS_NAMES[p.status], "connection": codec.conn(connection(slot, p.epoch)),
        "membership": {"state": c.state.name, "member_id": codec.member(c.member_id),
                       "group_instance_id": codec.instance(c.instance_id), "member_epoch": c.epoch,
                       "owned_partitions": codec.parts(c.owned),
                       "current": None if c.current == NO_ASSIGNMENT else codec.parts(c.current),
                       "target": None if c.target == NO_ASSIGNMENT else codec.parts(c.target),
                       "reconciling": None if c.reconciling == NO_ASSIGNMENT else codec.parts(c.reconciling),
                       "subscribed_topics": codec.topic_names(c.topics), "regex": c.regex,
                       "heartbeat_inflight": c.inflight},
        "to_coordinator": [codec.encode(r) for r in p.requests],
        "to_member": [codec.encode(r) for r in p.responses],
        "committed": p.committed,
        "committed_while_shared_with": {lane(t): codec.parts(m) for t, m in enumerate(p.shared) if m},
    }


def action_picks(codec: Codec, before: State, action: Action) -> dict:
    """The nondeterministic choices of ``action`` from ``before``: the client and its
    connection, the message (the request delivered, the response handled, the
    Heartbeat or OffsetCommit sent), the coordinator timer, the fault."""
    chosen = {}
    if action.slot >= 0:
        chosen["client"] = lane(action.slot)
        chosen["connection"] = codec.conn(connection(action.slot, before.procs[action.slot].epoch))
    if action.kind == "timer":
        chosen["timer"] = value(codec.encode(action.detail))
    elif isinstance(action.detail, str):  # KIP-848: a resume that found the heartbeat timed out
        chosen["message"] = action.detail
    elif action.detail is not None and action.kind != "scheduled":
        chosen["message"] = value(codec.encode(action.detail))
    if action.kind in ENVIRONMENT or action.kind == BOUNCE:
        chosen["fault"] = action.kind
    return picks(**chosen)


def system_state(codec: Codec, state: State, action_taken: str, nondet: dict) -> dict:
    return {"group": value(codec.group(state.group)), "clients": value(clients(codec, state), "clients"),
            "faults_left": value(state.faults_left), ACTION: action_taken, PICKS: nondet}


def counterexample(cfg: GroupConfig, v, configuration: dict | None = None) -> dict:
    """A counterexample (checker/engines/explore.py Violation) as an ITF trace: one state per
    step, each with the action that reached it and its picks; a lasso's ``loop``."""
    codec = Codec(cfg)
    states, prev = [], None
    for action, state in v.path:
        if action is None:
            states.append(system_state(codec, state, "init", picks()))
        else:
            states.append(system_state(codec, state, action.kind, action_picks(codec, prev, action)))
        prev = state
    meta = {"source": "rebalance check", "description": f"counterexample to {v.property}: {v.reason}",
            "property": v.property, "config": config(cfg)}
    if configuration:
        meta["check"] = configuration
    return _trace(meta, CHECK_VARS, states, v.loop_start)


# -- coordinator vectors ----------------------------------------------------------------------


def vector(case: dict) -> dict:
    """A coordinator vector (spec/VECTORS.md) as an ITF trace: the coordinator's whole
    group after each input (the vector's ``expect`` holds a summary of it) and the
    responses the input made; the action is ``deliver`` (a request received, picks:
    client, connection, message), ``timer`` (picks: timer) or ``admin`` (the admin's
    DeleteGroup, picks: message)."""
    cfg = config_of(case["config"])
    codec = Codec(cfg)
    g = codec.group_of(case["initial_group"])
    states = [{"group": value(codec.group(g)), "responses": [], ACTION: "init", PICKS: picks()}]
    for step in case["steps"]:
        event = codec.decode(step["input"])
        g, replies = coordinator.handle(cfg, g, event)
        if type(event) is Receive:
            action, nondet = "deliver", picks(client=step["input"]["connection"].split("/")[0],
                                              connection=step["input"]["connection"],
                                              message=value(step["input"]["request"]))
        elif type(event) is DeleteGroup:
            action, nondet = "admin", picks(message=value(step["input"]))
        else:
            action, nondet = "timer", picks(timer=value(step["input"]))
        states.append({"group": value(codec.group(g)), "responses": value([codec.encode(r) for r in replies]),
                       ACTION: action, PICKS: nondet})
    meta = {"source": case["id"], "description": case["description"], "rules": case["rules"],
            "config": case["config"]}
    return _trace(meta, VECTOR_VARS, states)
