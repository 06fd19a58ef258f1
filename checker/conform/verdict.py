"""What every side of ``rebalance conform`` returns: the interface between the trace
reader (``trace.py``), the sides (``coordinator.py``, ``members.py``, ``clients.py``)
and the command line.

A side is a function ``check(trace, options) -> Verdict``. ``trace`` is the parsed,
schema-valid trace (header and records with their 1-based line numbers, spec/TRACE.md);
a malformed trace never reaches a side (the reader raises ``TraceError``: exit 2).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

CONFORMS, DIVERGENT, INCOMPLETE = "conforms", "divergent", "incomplete"
EXIT_CODE = {CONFORMS: 0, DIVERGENT: 1, INCOMPLETE: 3}


class Divergence(NamedTuple):
    """A record the model cannot match. ``line``: its 1-based line in the
    trace; ``record``: the record as read; ``side``: "coordinator", "members" or
    "clients"; ``rule``: the spec/SPEC.md rule (R..) broken, or a property name for
    the clients side; ``expected``: what the model allows there, one readable line
    each (when it allows nothing, the line says why); ``reason``: one sentence; ``context``: the records (line, record) of the
    connections or members involved up to and including ``line``, for the lane SVG."""

    line: int
    record: dict
    side: str
    rule: str
    expected: tuple
    reason: str
    context: tuple = ()


class Verdict(NamedTuple):
    """``status``: CONFORMS, DIVERGENT or INCOMPLETE. ``records_checked``: records
    consumed by the model; ``rules``: the rules (R..) the consumed records exercised;
    ``divergence``: the first divergence (DIVERGENT only); ``divergences``: every
    one, in trace order, the first included: after a divergence a side
    resynchronises on the next record the model can accept, skipping those it
    cannot, so one divergence does not hide the next; ``uninterpreted``: what the
    side could not interpret, named (INCOMPLETE only, e.g. "line 12: SyncGroup
    assignment is opaque bytes"); ``figures``: side-specific counts for --json."""

    status: str
    records_checked: int
    rules: frozenset = frozenset()
    divergence: Divergence | None = None
    uninterpreted: tuple = ()
    figures: dict = {}
    divergences: tuple = ()


def divergent(records_checked: int, rules, divergences, figures: dict) -> Verdict:
    """A DIVERGENT verdict of ``divergences`` (at least one), sorted by line."""
    ordered = tuple(sorted(divergences, key=lambda d: d.line))
    return Verdict(DIVERGENT, records_checked, frozenset(rules), ordered[0], figures=figures, divergences=ordered)


def option(options, name: str, default):
    """A side's option ``name`` from ``options`` (a mapping, an options object, or None)."""
    return options.get(name, default) if isinstance(options, Mapping) else getattr(options, name, default)
