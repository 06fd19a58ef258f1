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
  group id before, group id after);
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
        self.checks = [self._bound(name, fn) for name, fn in checks]
        self.pending = list(covers)
        self.reached: list = []
        self.marking = [self._bound(bit, p.step) for bit, p in marking]
        self._entries = self.checks + self.marking  # one pass over both on each transition (``check``)
        self._kinds: dict = {}  # action kind -> code (the group memos' keys)

    def _bound(self, name, fn) -> tuple:
        """``(name, fn, memo)``: ``fn`` on ids, memo None; on groups, its memo dict;
        on States, memo False."""
        if hasattr(fn, "on_ids"):
            return name, fn.on_ids(self.system), None
        return name, fn, {} if getattr(fn, "on_groups", False) else False

    def drop(self, name: str, transitions_only: bool = False) -> None:
        """Stop checking property ``name`` (it has its counterexample); with
        ``transitions_only``, only on transitions (a state reached in the same level
        may still break it first)."""
        if not transitions_only:
            self.invariants = [c for c in self.invariants if c[0] != name]
            self.arrivals = [c for c in self.arrivals if c[0] != name]
        self.checks = [c for c in self.checks if c[0] != name]
        self._entries = self.checks + self.marking

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
        renamed: one pass over both, so a group memo's key is computed once. Covers it
        meets are added to ``reached``."""
        out = []
        marks = 0
        for key, why in self._broken(self._entries, s, ids, action, raw):
            if type(key) is int:  # a mark's bit; a check's key is its name
                marks |= key
            else:
                out.append((key, why))
        if self.pending:
            n = self.interner.state(raw)
            hit = [c for c in self.pending if c.reached(self.system, s, action, n)]
            if hit:
                self.reached.extend(c.name for c in hit)
                self.pending = [c for c in self.pending if c not in hit]
        return out, marks

    def _broken(self, entries: list, s: State, ids: tuple, action: Action, raw: tuple) -> list:
        """``[(name or bit, verdict)]`` of the ``entries`` (``_bound``) the transition sets."""
        out = []
        groups = None  # the memo key: action kind's code, group ids before and after, in one int
        for key, fn, memo in entries:
            if memo is None:
                why = fn(ids, action, raw)
            else:
                why = 0
                if memo is not False:
                    if groups is None:
                        groups = self._kinds.setdefault(action.kind, len(self._kinds)) | ids[0] << 8 | raw[0] << 40
                    why = memo.get(groups, 0)
                if why == 0:
                    why = fn(self.system, s, action, self.interner.state(raw))
                    if memo is not False:
                        memo[groups] = why
            if why:
                out.append((key, why))
        return out
