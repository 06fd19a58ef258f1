"""What the engines check on each state and transition, on interned ids (issue 17,
"refinement on ids"): on each state reached, the invariants (``Property.invariant``)
and the parts of step properties that read only the state a step reaches; on
each transition, the step properties (``Property.step``), the covers not reached
yet and the liveness marks (explore.py ``marks_of``).

A transition is ``(state, its ids, action, successor ids)``, the successor not
yet renamed (checker/engines/interning.py, expansion.py). Most checks never need
the successor as a State, so it is built only for those that do:

* a step function with an ``on_arrival`` attribute, ``(System) -> ((ids) ->
  None | str)``, has that part checked once per state reached, as if on the step
  that first reached it, and not on the transitions (the spec's inductive
  invariant, checker/refinement.py: a state reached again was checked already);
* a step function with an ``on_ids`` attribute, ``(System) -> ((ids, Action,
  successor ids) -> None | str)``, is called on the ids (the refinement check,
  checker/refinement.py, whose caches are keyed by them);
* one marked ``on_groups`` (checker/properties.py) reads nothing but the action's
  kind and the two states' Groups, so its verdict is memoised per (action kind,
  group id before, group id after), one memo for all of them;
* any other gets the two States.
"""
from __future__ import annotations

from ..system import Action, State, System
from .interning import Interner


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

    def _sort(self, entries: list) -> None:
        """Split ``[(name or bit, step function)]`` by what each reads: on ids
        (``on_ids``, bound to this system), on groups (``on_groups``: one memo for
        them all, ``(kind code, group id before, group id after) -> ((name or bit,
        verdict), ...)``, the ones set) and on States."""
        self._entries = entries
        self._on_ids = [(key, fn.on_ids(self.system)) for key, fn in entries if hasattr(fn, "on_ids")]
        self._on_groups = [(key, fn) for key, fn in entries
                           if not hasattr(fn, "on_ids") and getattr(fn, "on_groups", False)]
        self._on_states = [(key, fn) for key, fn in entries
                           if not hasattr(fn, "on_ids") and not getattr(fn, "on_groups", False)]
        self._groups: dict = {}

    def drop(self, name: str, transitions_only: bool = False) -> None:
        """Stop checking property ``name`` (it has its counterexample); with
        ``transitions_only``, only on transitions (a state reached in the same level
        may still break it first)."""
        if not transitions_only:
            self.invariants = [c for c in self.invariants if c[0] != name]
            self.arrivals = [c for c in self.arrivals if c[0] != name]
        if any(key == name for key, _ in self._entries):
            self._sort([c for c in self._entries if c[0] != name])

    def invalid(self, ids: tuple, state: State | None = None) -> list:
        """``[(part, name, reason)]``: what the state with ids ``ids`` (``state``, built
        from them if not given), newly reached, breaks: part 0, an invariant; part 1,
        a step property's part checked on arrival (its place in the order a
        sequential search meets violations: the step that first reached it)."""
        out = []
        for name, on_ids in self.arrivals:
            why = on_ids(ids)
            if why:
                out.append((1, name, why))
        for name, fn in self.invariants:
            if state is None:
                state = self.interner.state(ids)
            why = fn(self.system, state)
            if why:
                out.append((0, name, why))
        return out

    def check(self, s: State, ids: tuple, action: Action, raw: tuple) -> tuple:
        """``([(name, reason)], marks)``: the step checks that the transition from ``s``
        (ids ``ids``) by ``action`` to the successor with ids ``raw`` breaks, and its
        liveness marks (explore.py ``marks_of``), seen before the successor is
        renamed: one pass over both, so that the group memo's key is computed once
        and its entry holds the checks' and the marks' verdicts together. Covers it
        meets are added to ``reached``."""
        out = []
        marks = 0
        for key, fn in self._on_ids:
            why = fn(ids, action, raw)
            if why:
                out.append((key, why))
        n = None
        if self._on_groups:
            code = self._kinds.get(action.kind)
            if code is None:
                code = self._kinds[action.kind] = len(self._kinds)
            key = code | ids[0] << 8 | raw[0] << 40
            hit = self._groups.get(key)
            if hit is None:
                n = self.interner.state(raw)
                hit = self._groups[key] = tuple((k, why) for k, fn in self._on_groups
                                                for why in (fn(self.system, s, action, n),) if why)
            if hit:
                out.extend(hit)
        if n is None and (self._on_states or self.pending):
            n = self.interner.state(raw)
        for key, fn in self._on_states:
            why = fn(self.system, s, action, n)
            if why:
                out.append((key, why))
        if out:  # a mark's key is its bit, a check's its name
            for key, _ in out:
                if type(key) is int:
                    marks |= key
            out = [hit for hit in out if type(hit[0]) is not int]
        if self.pending:
            hit = [c for c in self.pending if c.reached(self.system, s, action, n)]
            if hit:
                self.reached.extend(c.name for c in hit)
                self.pending = [c for c in self.pending if c not in hit]
        return out, marks
