"""Refinement for KIP-848 (spec/KIP848.md, "Declarative specification"): every explored
step of checker/consumer_system.py is an action of spec/consumer_actions.py (its
post-condition holds of the abstract states before and after), and every state reached
meets the spec's invariant.

The abstraction maps a state to a ``View`` (spec/consumer_actions.py); the action is
classified by the step's kind. Both the views and the verdicts are memoised on interned
ids (checker/engines/interning.py): a view per id row, a verdict per (action, slot, view
before, view after), so most transitions cost a few dict lookups.
"""
from __future__ import annotations

import numpy as np

from rebalance.model.consumer_group.messages import FREE, ConsumerGroupHeartbeat
from rebalance.model.protocol import slot_of
from rebalance.spec import consumer_actions as spec
from rebalance.spec.actions import PYTHON

from .engines.interning import IntMap, RowMemo
from .system import PAUSED, RUNNING, State

ACTION_OF = {"reply": "response handled", "reconcile": "reconcile", "release": "release",
             "timer": "coordinator event", "create-topic": "coordinator event", "join": "start", "restart": "start",
             "leave": "stop", "crash": "stop"}


def abstract(state: State) -> spec.View:
    """The abstract state of ``state`` (spec/consumer_actions.py's docstring)."""
    group = state.group
    n = len(state.procs)
    live, owned, known, holding, stale = [False] * n, [0] * n, [False] * n, [0] * n, [0] * n
    mine = {}
    for i, p in enumerate(state.procs):
        if p.status in (RUNNING, PAUSED):
            live[i], owned[i] = True, p.consumer.owned
        if p.consumer is not None:  # a process that left keeps its member id until its leave is delivered
            mine[i] = p.consumer.member_id
    for m in group.members:
        i = slot_of(m.member_id)
        if mine.get(i) == m.member_id:
            known[i], holding[i] = True, m.assigned | m.revoking
        else:
            stale[i] |= m.assigned | m.revoking
    free = sum(1 << p for p, e in enumerate(group.partition_epochs) if e == FREE)
    return spec.View(group.epoch, group.target_epoch, free, tuple(live), tuple(owned), tuple(known), tuple(holding),
                     tuple(stale))


def action_name(action) -> str:
    """The spec action a step is: a delivery by what it delivers, the rest by kind."""
    if action.kind == "deliver":
        return "heartbeat delivered" if type(action.detail) is ConsumerGroupHeartbeat else "commit delivered"
    return ACTION_OF.get(action.kind, "local")


def step_problem(s: spec.View, t: spec.View, action: str, slot: int, mutations=frozenset()) -> str | None:
    """The first clause of ``action``'s post-condition that (s, t) breaks, or None."""
    for clause, holds in spec.ACTIONS[action](PYTHON, s, t, slot, mutations):
        if not holds:
            return f"{action} by {chr(65 + slot) if slot >= 0 else 'the coordinator'}: {clause}"
    return None


def state_problem(s: spec.View) -> str | None:
    for clause, holds in spec.invariant(PYTHON, s):
        if not holds:
            return f"invariant: {clause}"
    return None


class _Checker:
    """The memos of one exploration (keyed by its interner's ids): a view id per id row, a
    verdict per (action, slot, view before, view after), both decided a batch at once."""

    def __init__(self, system):
        self.system, self.interner = system, system.interner
        self.rows = RowMemo()  # id row (without faults left) -> view id
        self.views: list = []  # view id -> View
        self.view_ids: dict = {}
        self.steps = IntMap()  # action code << 56 | slot + 1 << 48 | view before << 24 | view after -> reason id
        self.reasons: list = [None]
        self.codes: dict = {}  # action name -> code
        self.invariants: list = []  # view id -> the invariant's verdict

    def view_ids_of(self, rows: np.ndarray) -> np.ndarray:
        parts = rows[:, :-1]
        bound = max(len(self.interner.groups), len(self.interner.procs))

        def compute(firsts):
            out = []
            for i in firsts:
                v = abstract(self.interner.state(tuple(rows[i].tolist())))
                out.append(self.view_ids.setdefault(v, len(self.views)))
                if out[-1] == len(self.views):
                    self.views.append(v)
            return out
        return self.rows.resolve(parts, bound, compute)

    def step_rows(self, before, after, aid, actions) -> list:
        if not len(aid):
            return []
        vb, va = self.view_ids_of(before), self.view_ids_of(after)
        if max(len(self.views), 1) >> 24:
            raise OverflowError("more than 2**24 abstract views: past the refinement memo's key fields")
        names = [action_name(a) for a in actions]
        code = np.array([self.codes.setdefault(n, len(self.codes)) for n in names], np.int64)[aid]
        slot = np.array([a.slot + 1 for a in actions], np.int64)[aid]
        muts = self.system.spec_mutations
        inverse = {c: n for n, c in self.codes.items()}

        def decide(keys, _):
            out = []
            for k in keys:
                why = step_problem(self.views[k >> 24 & 0xFFFFFF], self.views[k & 0xFFFFFF], inverse[k >> 56],
                                   (k >> 48 & 0xFF) - 1, muts)
                out.append(0 if why is None else len(self.reasons))
                if why is not None:
                    self.reasons.append(why)
            return out
        verdicts = self.steps.resolve(code << 56 | slot << 48 | vb << 24 | va, decide)
        return [(int(t), self.reasons[v]) for t, v in zip(verdicts.nonzero()[0].tolist(),
                                                           verdicts[verdicts.nonzero()[0]].tolist())]

    def invariant_rows(self, rows) -> list:
        out = []
        for i, v in enumerate(self.view_ids_of(rows).tolist()):
            while len(self.invariants) <= v:
                self.invariants.append(state_problem(self.views[len(self.invariants)]))
            if self.invariants[v]:
                out.append((i, self.invariants[v]))
        return out


def _checker(system) -> _Checker:
    """The memos of the system's current exploration (a new interner, new memos)."""
    hit = getattr(system, "refinement", None)
    if not isinstance(hit, _Checker) or hit.interner is not system.interner:
        hit = system.refinement = _Checker(system)
    return hit


def refinement(system, state: State, action, nxt: State):
    """Every step an action of spec/consumer_actions.py, every state within its invariant."""
    return state_problem(abstract(nxt)) or step_problem(abstract(state), abstract(nxt), action_name(action),
                                                        action.slot, system.spec_mutations)


refinement.on_rows = lambda system: _checker(system).step_rows
refinement.on_arrival = lambda system: _checker(system).invariant_rows
