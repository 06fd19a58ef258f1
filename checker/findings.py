"""Known findings (spec/SPEC.md section 11), declared expected per configuration and
pinned by their property and the shape of their counterexample (issue 43, item 4).

A configuration that reaches a finding of Kafka's own protocol is violated at
baseline; expecting the finding's *property* (``expect_violated``) would let a new
bug that breaks the same property pass unseen. So a finding is expected by its
``shape``: a predicate over the state where its property fails (an invariant's or
a quiescent check's violating state, the state a liveness goal never leaves). A
state where the property fails in the finding's shape is excused, and reported as
the finding reached (a cover, ``finding F2``); any other failure of the property is
a violation. So a new bug in a static configuration still changes the verdict.

``FINDINGS``: name -> ``Finding``. ``declared(system, names)`` gives the findings a
configuration expects: those named, or by default those whose ``applies`` holds
(the configurations that reach them, as ``exclusive_processing`` is expected with
``pause``). ``pinned(properties, findings)`` wraps each property so that its
findings' shapes are no violations; ``covers(findings)`` reports them reached.
Shapes read the state and the spec (member records, processes), never a rule of
model/ (tests/test_independence.py).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from rebalance.model.member import MemberPhase
from rebalance.model.protocol import Phase, union

from .properties import PROPERTIES, Cover
from .system import KEPT, RUNNING, State, System


class Finding(NamedTuple):
    """``name`` (SPEC section 11), the ``properties`` it breaks, a one-line
    ``description``, ``shape(system, state) -> bool`` (the state where its property
    fails has the finding's shape) and ``applies(system)`` (the configurations that
    reach it declare it by default)."""

    name: str
    properties: tuple
    description: str
    shape: Callable
    applies: Callable


def _stranded(system: System, state: State) -> bool:
    """F1: a Stable group whose static leader's restart was answered from the stored
    assignment (the history variable ``Proc.restarting`` is ``KEPT``: what happened,
    not what the state looks like; KAFKA-9801's static rejoin answered while
    CompletingRebalance strands a partition in the same final state): every running
    member is Stable owning exactly what it is assigned (nobody has anything to
    revoke, so nobody rejoins) and a partition is owned and assigned by nobody."""
    group = state.group
    if group.phase != Phase.STABLE or not any(
            p.status == RUNNING and p.restarting == KEPT and p.consumer.member_id == group.leader
            and p.consumer.group_instance_id for p in state.procs):
        return False
    assigned = {m.member_id: m.assignment.partitions for m in group.members}
    for p in state.procs:
        if p.status == RUNNING and (p.consumer.phase != MemberPhase.STABLE
                                    or assigned.get(p.consumer.member_id) != p.consumer.owned):
            return False
    held = union(assigned.values()) | union(p.consumer.owned for p in state.procs if p.consumer is not None)
    return bool(system.cfg.all_partitions & ~held)


def _kept_stale(system: System, state: State) -> bool:
    """F2: in a Stable group a partition is assigned to one member while a static
    member that missed the generation (kept by the rebalance timeout, R27: its
    process paused, its generation older than the group's) still owns it."""
    group = state.group
    if group.phase != Phase.STABLE:
        return False
    assigned = {m.member_id: m.assignment.partitions for m in group.members}
    for p in state.procs:
        c = p.consumer
        if (c is not None and c.group_instance_id and c.generation < group.generation and c.member_id in assigned
                and any(c.owned & a for mid, a in assigned.items() if mid != c.member_id)):
            return True
    return False


def _fenced_static(system: System, state: State) -> bool:
    """F4: a running static member's process was fenced (FENCED_INSTANCE_ID: it left
    the protocol for good) while its group.instance.id is no member's."""
    holders = {m.instance_id for m in state.group.members}
    return any(p.status == RUNNING and p.consumer.phase == MemberPhase.LEFT and p.consumer.group_instance_id
               and p.consumer.group_instance_id not in holders for p in state.procs)


def _static(system: System) -> bool:
    return bool(system.static)


FINDINGS = {f.name: f for f in (
    Finding("F1", ("eventual_balance", "quiescent_balance"),
            "a static leader restarting between the two rounds of a cooperative rebalance strands a partition",
            _stranded, lambda system: _static(system) and system.cfg.cooperative
            and {"crash", "restart"} <= system.faults and system.max_faults >= 3),
    Finding("F2", ("revoke_before_assign",),
            "a paused static member kept by the rebalance timeout is assigned from an old subscription",
            _kept_stale, lambda system: _static(system) and system.cfg.cooperative and "pause" in system.faults),
    Finding("F4", ("eventual_balance", "quiescent_balance"),
            "a coordinator failover fences a static member that re-registered after the last store",
            _fenced_static, lambda system: _static(system) and "failover" in system.faults
            and (system.max_faults >= 3 or "remove" in system.faults)),
)}


def declared(system: System, names=None) -> tuple:
    """The findings ``system``'s configuration expects: ``names`` (``()``: none), or
    by default every finding that applies to it. KeyError for an unknown name (the
    settings check names first)."""
    if names is None:
        return tuple(f for f in FINDINGS.values() if f.applies(system))
    return tuple(FINDINGS[n] for n in names)


def pinned(properties, findings) -> tuple:
    """``properties`` with each one a declared finding breaks excusing the states of
    the finding's shape (see the module docstring); two properties with the same
    check and findings share one excusing check (a liveness goal is decided once)."""
    shapes: dict = {}
    for f in findings:
        for name in f.properties:
            shapes.setdefault(name, []).append(f.shape)
    made: dict = {}
    out = []
    for p in properties:
        if p.name in shapes:
            key = (p.check, tuple(shapes[p.name]))
            if key not in made:
                made[key] = _excusing(p.check, shapes[p.name])
            p = p._replace(check=made[key])
        out.append(p)
    return tuple(out)


def _excusing(check, shapes: list):
    def excused(system: System, state: State):
        why = check(system, state)
        return None if why and any(shape(system, state) for shape in shapes) else why
    return excused


def covers(findings) -> tuple:
    """A cover per declared finding: reached where its property fails in its shape."""
    checks = {p.name: p.check for p in PROPERTIES}
    return tuple(Cover(f"finding {f.name}", f"{f.description} (expected: spec/SPEC.md section 11)",
                       _reached(f, [checks[n] for n in f.properties])) for f in findings)


def _reached(f: Finding, checks: list):
    def reached(system: System, s: State, a, n: State) -> bool:
        return f.shape(system, n) and any(check(system, n) for check in checks)
    return reached
