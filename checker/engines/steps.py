"""What the engines check on each state and transition, on batches of interned
id rows (issue 17, "refinement on ids"): on each state reached, the invariants
(``Property.invariant``) and the parts of step properties that read only the
state a step reaches; on each transition, the step properties
(``Property.step``), the covers not reached yet and the liveness marks
(explore.py ``marks_of``).

A batch of transitions is the id rows of the states they leave and reach, the
latter not yet renamed (checker/engines/interning.py, level.py), with their
Actions. Most checks never need a successor as a State, so it is built only for
those that do:

* a step function with an ``on_arrival`` attribute, ``(System) -> ((rows) ->
  [(row index, reason)])``, has that part checked once per state reached, as if
  on the step that first reached it, and not on the transitions (the spec's
  inductive invariant, checker/refinement.py: a state reached again was checked
  already);
* a step function with an ``on_rows`` attribute, ``(System) -> ((rows before,
  rows after, action index per row, Actions) -> [(row index, reason)])``, is
  called on the batch (the refinement check, checker/refinement.py, whose memos
  are keyed by ids);
* one marked ``on_groups`` (checker/properties.py) reads nothing but the action's
  kind and the two states' Groups, so its verdict is memoised per (action kind,
  group id before, group id after), one memo for all of them, asked a batch at
  once;
* any other gets the two States.
"""
from __future__ import annotations

import numpy as np

from ..system import System
from .interning import IntMap, Interner, RowMemo, _intern, grown


class Steps:
    """The per-state and per-transition checks of one exploration. ``invariants``:
    ``[(name, state check)]``; ``checks``: ``[(name, step function)]``; a violated
    property is ``drop``ped. ``covers``: the covers to look for (``reached``
    collects the names of those met); ``marking``: ``[(bit, Property)]``
    (explore.py ``marks_of``)."""

    def __init__(self, system: System, interner: Interner, invariants, checks, covers=(), marking=()):
        self.system, self.interner = system, interner
        self.invariants = list(invariants)
        self.arrivals = [(name, fn.on_arrival(system)) for name, fn in checks if hasattr(fn, "on_arrival")]
        self.pending = list(covers)
        self.reached: list = []
        # the step checks, then the marks (a mark's key is its bit, a check's its name), by what they read
        self._sort(list(checks) + [(bit, p.step) for bit, p in marking])
        self._kinds: dict = {}  # action kind -> code (the group memo's keys)
        self._projections: dict = {}  # projected invariant -> its Projection
        self._projected: dict = {}  # a projection (its pair of functions) -> its Projected, shared

    def _sort(self, entries: list) -> None:
        """Split ``[(name or bit, step function)]`` by what each reads: on id rows
        (``on_rows``, bound to this system), on groups (``on_groups``: one memo for
        them all, ``kind code | group id before << 8 | group id after << 36`` -> an
        index into ``_group_hits``, each ``((name or bit, verdict), ...)``, the ones
        set, | its marks << 32 | whether a check is broken << 40) and on States."""
        self._entries = entries
        self._on_rows = [(key, fn.on_rows(self.system)) for key, fn in entries if hasattr(fn, "on_rows")]
        self._on_groups = [(key, fn) for key, fn in entries
                           if not hasattr(fn, "on_rows") and getattr(fn, "on_groups", False)]
        self._on_states = [(key, fn) for key, fn in entries
                           if not hasattr(fn, "on_rows") and not getattr(fn, "on_groups", False)]
        self._groups = IntMap()
        self._group_hits: list = []

    def drop(self, name: str, transitions_only: bool = False) -> None:
        """Stop checking property ``name`` (it has its counterexample); with
        ``transitions_only``, only on transitions (a state reached in the same level
        may still break it first)."""
        if not transitions_only:
            self.invariants = [c for c in self.invariants if c[0] != name]
            self.arrivals = [c for c in self.arrivals if c[0] != name]
        if any(key == name for key, _ in self._entries):
            self._sort([c for c in self._entries if c[0] != name])

    def invalid(self, rows: np.ndarray, states) -> list:
        """``[(i, part, name, reason)]``: what the newly reached states with id rows
        ``rows`` ((m, w) int64) and States ``states[i]`` break: part 0, an
        invariant (a ``projected`` one decided once per projection, ``Projection``);
        part 1, a step property's part checked on arrival (its place in the order a
        sequential search meets violations: the step that first reached it)."""
        out = []
        for name, on_rows in self.arrivals:
            out.extend((i, 1, name, why) for i, why in on_rows(rows))
        system = self.system
        for name, fn in self.invariants:
            if hasattr(fn, "projection"):
                projection = self._projections.get(fn)
                if projection is None:
                    shared = self._projected.get(fn.projection)
                    if shared is None:
                        shared = self._projected[fn.projection] = Projected(self.interner, *fn.projection)
                    projection = self._projections[fn] = Projection(system, fn, shared)
                verdicts, of_row = projection.decide(rows, states.__getitem__)
                out.extend((i, 0, name, verdicts[of_row[i]]) for i in of_row.nonzero()[0].tolist())
            else:
                out.extend((i, 0, name, why) for i in range(len(rows)) for why in (fn(system, states[i]),) if why)
        return out

    def check(self, states: list, before: np.ndarray, after: np.ndarray, src: np.ndarray, aid: np.ndarray,
              actions: list) -> tuple:
        """``(marks, broken)`` of a batch of T transitions, seen before their successors
        are renamed: transition ``t`` goes from ``states[src[t]]`` (id row
        ``before[t]``) by ``actions[aid[t]]`` to the successor with id row
        ``after[t]``. ``marks``: (T,) uint8, each one's liveness marks (explore.py
        ``marks_of``); ``broken``: ``[(t, name, reason)]``, the first transition to
        break each step check (then ``drop``ped on transitions). Covers met are
        added to ``reached``."""
        hits = []  # (t, name or bit, verdict)
        for key, fn in self._on_rows:
            hits.extend((t, key, why) for t, why in fn(before, after, aid, actions))
        marks = np.zeros(len(aid), np.uint8)
        if self._on_groups and len(aid):
            kinds = self._kinds
            codes = np.array([kinds.setdefault(a.kind, len(kinds)) for a in actions], np.int64)[aid]
            if max(before[:, 0].max(), after[:, 0].max()) >> 28:
                raise OverflowError("more than 2**28 groups: past the group memo's key fields")

            def decide(_, firsts):
                out = []
                for t in firsts:
                    s, a, n = states[src[t]], actions[aid[t]], self.interner.state(tuple(after[t].tolist()))
                    hit = tuple((k, why) for k, fn in self._on_groups for why in (fn(self.system, s, a, n),) if why)
                    bits = sum(k for k, _ in hit if type(k) is int)
                    broken = any(type(k) is not int for k, _ in hit)
                    out.append(len(self._group_hits) | bits << 32 | broken << 40)
                    self._group_hits.append(hit)
                return out
            entry = self._groups.resolve(codes | before[:, 0] << 8 | after[:, 0] << 36, decide)
            marks |= (entry >> 32 & 0xFF).astype(np.uint8)
            for t in (entry >> 40).nonzero()[0].tolist():
                hits.extend((t, k, why) for k, why in self._group_hits[entry[t] & 0xFFFFFFFF] if type(k) is not int)
        if self._on_states or self.pending:
            self._on_each(states, after, src, aid, actions, hits)
        first: dict = {}
        for t, key, why in sorted(hits, key=lambda h: h[0]):
            if type(key) is int:
                marks[t] |= key
            elif key not in first:
                first[key] = (t, key, why)
        for name in first:
            self.drop(name, transitions_only=True)  # a new state may break it first
        return marks, list(first.values())

    def _on_each(self, states, after, src, aid, actions, hits: list) -> None:
        """The checks on States, and the covers not reached yet, transition by transition; a
        cover that names the action ``kinds`` it can be reached by is asked only on those
        (a transition with nothing to ask is skipped before its State is built)."""
        system = self.system
        covers = [[c for c in self.pending if not c.kinds or a.kind in c.kinds] for a in actions]
        for t, (i, k) in enumerate(zip(src.tolist(), aid.tolist())):
            pending = covers[k] if self.pending else ()
            if not self._on_states and not pending:
                continue
            s, a, n = states[i], actions[k], self.interner.state(tuple(after[t].tolist()))
            for key, fn in self._on_states:
                why = fn(system, s, a, n)
                if why:
                    hits.append((t, key, why))
            if pending:
                met = [c for c in pending if c in self.pending and c.reached(system, s, a, n)]
                if met:
                    self.reached.extend(c.name for c in met)
                    self.pending = [c for c in self.pending if c not in met]


class Projected:
    """The projection ids of states' parts for one projection (``projected``'s pair of
    functions), each distinct row of them numbered: shared by every check projected
    alike, so that a batch's rows are projected and numbered once for all of them.
    A state's projection is the row of its parts' projection ids (the group's, then
    each slot's process's), each part's computed once per interned id."""

    def __init__(self, interner: Interner, group, proc):
        self.interner, self.group, self.proc = interner, group, proc
        self._ids: dict = {}  # projection value -> id
        self._values: list = []
        self._of_group = np.empty(0, np.int64)  # group id -> projection id (-1: not known yet)
        self._of_proc = np.empty(0, np.int64)   # proc id -> projection id (-1: not known yet)
        self._numbers = RowMemo()  # a row of projection ids -> its number
        self.count = 0  # rows numbered so far
        self._batch = None  # the last rows numbered: (rows, numbers, positions of the rows numbered anew)

    def _rows(self, rows: np.ndarray) -> np.ndarray:
        """The projection ids of ``rows``' parts ((m, w - 1) int64)."""
        interner = self.interner
        self._of_group = grown(self._of_group, len(interner.groups), -1)
        self._of_proc = grown(self._of_proc, len(interner.procs), -1)
        for table, column, values, part in ((self._of_group, rows[:, :1], interner.groups, self.group),
                                            (self._of_proc, rows[:, 1:-1], interner.procs, self.proc)):
            ids = table[column]
            for i in np.unique(column[ids < 0]).tolist():
                table[i] = _intern(self._ids, self._values, part(values[i]))
        out = np.empty((len(rows), rows.shape[1] - 1), np.int64)
        out[:, 0] = self._of_group[rows[:, 0]]
        out[:, 1:] = self._of_proc[rows[:, 1:-1]]
        return out

    def number(self, rows: np.ndarray) -> tuple:
        """``(numbers, fresh)``: the number of each of ``rows``' projections ((m, w) int64
        id rows; the same array as the last call's gives the same answer) and the
        positions in ``rows`` of the first state of each projection numbered anew, in
        the order of their numbers (the last ``len(fresh)`` of ``count``)."""
        if self._batch is not None and self._batch[0] is rows:
            return self._batch[1:]
        fresh: list = []

        def numbered(firsts):
            fresh.extend(firsts)
            self.count += len(firsts)
            return list(range(self.count - len(firsts), self.count))
        numbers = self._numbers.resolve(self._rows(rows), len(self._values), numbered)
        self._batch = (rows, numbers, fresh)
        return numbers, fresh


class Projection:
    """A ``projected`` check (checker/properties.py) decided once per distinct
    projection of the states it is asked about (``Projected``, shared with the
    checks projected alike)."""

    def __init__(self, system: System, check, projected: Projected):
        self.system, self.check, self.projected = system, check, projected
        self._verdicts = np.empty(0, np.int64)  # projection number -> its verdict's index in _reasons
        self._known = 0  # projection numbers decided
        self._reasons: list = [None]
        self._reason_ids: dict = {None: 0}

    def decide(self, rows: np.ndarray, state_of) -> tuple:
        """``(verdicts, index of each row's)``: the check's verdicts (None where it
        holds) and, for each of the states with id rows ``rows`` ((m, w) int64), the
        index of its own, each distinct projection's computed once, on the first
        state that has it, ``state_of(i)``."""
        numbers, fresh = self.projected.number(rows)
        count = self.projected.count
        if self._known < count:
            if count - self._known != len(fresh):
                raise RuntimeError("a projected check missed a batch of the projection it shares")
            self._verdicts = grown(self._verdicts, count, 0)
            self._verdicts[self._known:count] = [
                _intern(self._reason_ids, self._reasons, self.check(self.system, state_of(i))) for i in fresh]
            self._known = count
        return self._reasons, self._verdicts[numbers]

    def holds(self, rows: np.ndarray, state_of) -> np.ndarray:
        """A uint8 array, 1 for each state of ``rows`` where the check holds (``decide``)."""
        verdicts, of_row = self.decide(rows, state_of)
        return np.array([0 if v else 1 for v in verdicts], np.uint8)[of_row]


def goal_holds(system: System, goal, interner: Interner):
    """A liveness goal (checker/properties.py) decided on rows of states:
    ``holds(rows, state_of)`` gives a uint8 array, 1 for each state of ``rows``
    ((m, w) int64 id rows) where the goal holds, ``state_of(i)`` the i-th's State.
    A ``projected`` goal is decided once per distinct projection (``Projection``),
    any other on each state."""
    if hasattr(goal, "projection"):
        return Projection(system, goal, Projected(interner, *goal.projection)).holds
    return lambda rows, state_of: np.array([0 if goal(system, state_of(i)) else 1 for i in range(len(rows))],
                                           np.uint8)
