"""Readable renderings of model values: messages, actor states, actions.

Member ids print as client letter + counter (``A1``), partitions as
``topic-partition`` lists, errors by name; the ``tag`` field is omitted.
"""
from __future__ import annotations

from rebalance.model.config import GroupConfig
from rebalance.model.coordinator import Group
from rebalance.model.consumer_group.group import ConsumerGroup, group_state, target_of
from rebalance.model.consumer_group.membership import NONE, Membership
from rebalance.model.consumer_group.messages import GROUP_STATE_NAMES
from rebalance.model.protocol import (
    ALL_TOPICS, NO_GENERATION, MetadataUpdate, Subscribe, instance_name, member_name, partitions_of,
)

from .system import STATUS_NAMES, Action, Proc, State

MEMBER_FIELDS = {"member_id", "leader"}


def lane(slot: int) -> str:
    """The name of a client slot's lane: ``A``, ``B``, ..."""
    return chr(65 + slot)


def slot_named(letter: str) -> int:
    """The client slot a lane letter names (``A`` is 0)."""
    return ord(letter) - 65


def partitions(cfg: GroupConfig, mask: int) -> list:
    return [cfg.partition_name(p) for p in partitions_of(mask)]


def bracket(names) -> str:
    """``[t-0, t-3]``"""
    return f"[{', '.join(names)}]"


def message(cfg: GroupConfig, msg) -> str:
    """One-line text of a message or timer input, e.g. ``SyncGroup(A1, gen 6)``."""
    name = type(msg).__name__
    parts = []
    for f, x in zip(msg._fields, msg):
        if f == "tag":
            continue
        if f == "error":
            parts.append(x.name)
        elif f in MEMBER_FIELDS:
            parts.append(("leader " if f == "leader" else "") + member_name(x))
        elif f == "generation":
            parts.append(f"gen {x}")
        elif f == "subscription":
            if x.owned:
                parts.append(f"owns {bracket(partitions(cfg, x.owned))}@{x.generation}")
            if x.echo and x.echo[2]:
                parts.append(f"deferred {bracket(partitions(cfg, x.echo[2]))}")
            if x.scheduled == 0:
                parts.append("delay passed")
            elif x.scheduled > 0:
                parts.append(f"delay {x.scheduled} ticks left")
        elif x is None or f == "regex":
            continue  # KIP-848: a field not sent (unchanged); the regex flag goes with the topics
        elif f == "member_epoch":
            parts.append(f"epoch {x}")
        elif f == "owned":
            parts.append(f"owns {bracket(partitions(cfg, x))}")
        elif f == "topics":
            parts.append(("regex " if msg.regex else "topics ") + _topic_names(cfg, x))
        elif f == "assignment" and type(x) is int:
            parts.append(bracket(partitions(cfg, x)))
        elif f == "assignment":
            parts.append(bracket(partitions(cfg, x.partitions)))
            if x.scheduled:
                parts.append(f"ScheduledRebalanceTimeout {x.scheduled} ticks")
            if x.echo and x.echo[1]:
                parts.append(f"deferred {bracket(partitions(cfg, x.echo[1]))}")
        elif f == "assignments" and x:
            parts.append("; ".join(f"{member_name(m)}:{bracket(partitions(cfg, a.partitions))}" for m, a in x))
        elif f == "members" and x:
            parts.append("members " + ",".join(member_name(m[0]) for m in x))
        elif f in ("group_instance_id", "instance_id") and x:
            parts.append(instance_name(x))
        elif f == "skip_assignment" and x:
            parts.append("skip_assignment")
        elif f == "partitions":
            parts.append(bracket(partitions(cfg, x)))
    return f"{name}({', '.join(parts)})"


def _topic_names(cfg: GroupConfig, topics: int) -> str:
    if topics == ALL_TOPICS:
        return "all"
    return bracket(name for t, (name, _) in enumerate(cfg.topics) if topics >> t & 1)


def consumer_group_view(cfg: GroupConfig, g: ConsumerGroup) -> dict:
    """KIP-848: the group's state and epochs, and each member's epochs, reconciliation
    state, assigned, pending-revocation and target partitions."""
    members = {}
    for m in g.members:
        members[member_name(m.member_id)] = {
            "state": m.state.name, "epoch": m.epoch, "previous_epoch": m.previous_epoch,
            "assignment": partitions(cfg, m.assigned), "pending_revocation": partitions(cfg, m.revoking),
            "target": partitions(cfg, target_of(g, m.member_id)),
        }
        if m.instance_id:
            members[member_name(m.member_id)]["instance_id"] = instance_name(m.instance_id)
    return {"state": GROUP_STATE_NAMES[group_state(g)], "group_epoch": g.epoch, "target_epoch": g.target_epoch,
            "members": members}


def membership_view(cfg: GroupConfig, c: Membership) -> dict:
    """KIP-848: a client's membership state, epoch and partitions."""
    view = {"member_id": member_name(c.member_id), "state": c.state.name, "epoch": c.epoch,
            "owned": partitions(cfg, c.owned)}
    if c.target != NONE:
        view["target"] = partitions(cfg, c.target)
    if c.instance_id:
        view["instance_id"] = instance_name(c.instance_id)
    return view


def coordinator_view(cfg: GroupConfig, g: Group) -> dict:
    if type(g) is ConsumerGroup:
        return consumer_group_view(cfg, g)
    members = {}
    for m in g.members:
        flags = [f for f in ("awaiting_join", "awaiting_sync", "pending_sync") if getattr(m, f)]
        members[member_name(m.member_id)] = {
            "assignment": partitions(cfg, m.assignment.partitions),
            "claims": partitions(cfg, m.subscription.owned),
            "flags": flags,
        }
    view = {"phase": g.phase.name, "generation": g.generation, "leader": member_name(g.leader), "members": members}
    if g.protocol:  # R35, R78: the protocol the vote selected
        view["protocol"] = g.protocol
    return view


def member_view(cfg: GroupConfig, p: Proc) -> dict:
    view = {"process": STATUS_NAMES[p.status]}
    c = p.consumer
    if type(c) is Membership:
        view.update(membership_view(cfg, c))
    elif c is not None:
        view.update({
            "member_id": member_name(c.member_id),
            "phase": c.phase.name,
            "generation": c.generation,
            "leader": c.leader,
            "owned": partitions(cfg, c.owned),
            "owned_generation": None if c.owned_generation == NO_GENERATION else c.owned_generation,
        })
        if c.assignors:  # R77: its own partition.assignment.strategy
            view["assignors"] = list(c.assignors)
        if c.scheduled >= 0:
            view["scheduled_ticks_left"] = c.scheduled
        if p.shared:  # R41: accepted commits while another slot owned them too
            view["committed_while_shared_with"] = {lane(t): partitions(cfg, m) for t, m in enumerate(p.shared) if m}
    view["to_coordinator"] = [message(cfg, r) for r in p.requests]
    view["to_member"] = [message(cfg, r) for r in p.responses]
    return view


def state_view(cfg: GroupConfig, s: State) -> dict:
    """``{"coordinator": {...}, "A": {...}, ..., "faults_left": n}``."""
    view = {"coordinator": coordinator_view(cfg, s.group)}
    for slot, p in enumerate(s.procs):
        view[lane(slot)] = member_view(cfg, p)
    view["faults_left"] = s.faults_left
    return view


def action_lane(a: Action) -> str:
    """The lane a counterexample's step lists an action in: ``coordinator`` for a
    delivery and for an action of no client (a timer, the clock), else its client's."""
    return "coordinator" if a.slot < 0 or a.kind == "deliver" else lane(a.slot)


def action_text(cfg: GroupConfig, a: Action) -> str:
    """One line describing a transition."""
    if a.kind == "deliver":
        return f"coordinator <- {lane(a.slot)}: {message(cfg, a.detail)}"
    if a.kind == "reply":
        return f"{lane(a.slot)} <- coordinator: {message(cfg, a.detail)}"
    if a.kind == "heartbeat" or a.kind == "commit":
        return f"{lane(a.slot)} sends {message(cfg, a.detail)}"
    if a.kind == "timer":
        return f"coordinator timer: {message(cfg, a.detail)}"
    if a.kind in ("reconcile", "release"):
        return f"{lane(a.slot)}: {a.kind}"
    if a.kind == "resume" and a.detail:
        return f"{lane(a.slot)}: resume, its heartbeat timed out"
    if a.kind == "scheduled":
        return f"{lane(a.slot)}: ScheduledRebalanceTimeout passed"
    if a.kind == "tick":
        return "clock: one tick passes"
    if type(a.detail) in (Subscribe, MetadataUpdate):  # R63: the new topic list; R62: the topics that exist now
        names = [name for t, (name, _) in enumerate(cfg.topics) if a.detail.topics >> t & 1]
        return f"{'environment' if a.slot < 0 else lane(a.slot)}: {a.kind} [{', '.join(names)}]"
    return f"{lane(a.slot)}: {a.kind}"


def changes(before: dict, after: dict) -> dict:
    """Per lane, the fields whose rendering changed: ``{lane: {field: [old, new]}}``."""
    out = {}
    for name, new in after.items():
        old = before.get(name)
        if isinstance(new, dict):
            diff = {k: [old.get(k) if old else None, v] for k, v in new.items() if not old or old.get(k) != v}
            if diff:
                out[name] = diff
        elif old != new:
            out[name] = [old, new]
    return out
