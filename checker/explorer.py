"""Browsing a configuration's state space one step at a time (``rebalance explore``), as
Stateright's Explorer does: from the initial state, each state's enabled actions are
its successors in ``System.successors``' fixed order (the model's own handlers, run
live), so a position is the list of successor indices chosen from the initial state,
``choices``; stepping appends one, stepping back drops the last. A counterexample file
(checker/counterexample.py ``to_json``) is turned into the choices that replay it.

The initial state is the one every engine starts from (``System.initial()``, up to
renaming), so a counterexample that ``check`` wrote for the same configuration
replays from it step for step.
"""
from __future__ import annotations

import json
from typing import NamedTuple

from rebalance.model.config import ConfigError

from .counterexample import diagram, title_of
from .engines.renaming import Renamer
from .properties import applicable
from .render import action_lane, action_text, changes, state_view
from .settings import CheckSettings
from .system import State


class Broken(NamedTuple):
    """A property broken at a step: its ``name`` and the checker's one-line ``reason``."""

    name: str
    reason: str


class Explorer:
    """A configuration's state space, browsed by successor indices (module docstring).
    ``settings``: check's resolved settings (checker/settings.py ``resolve``)."""

    def __init__(self, settings: CheckSettings):
        self.cfg = settings.group
        self.system = settings.system()
        self.properties = applicable(self.system)
        self.initial = Renamer().canonical(self.system.initial())

    def path(self, choices) -> list:
        """The execution ``choices`` picks: ``[(Action | None, State), ...]``, the first
        the initial state, each next the ``choices[k]``-th successor of the one before.
        Raises ConfigError naming the first choice that is not an enabled action."""
        state = self.initial
        path = [(None, state)]
        for k, i in enumerate(choices):
            successors = self.system.successors(state)
            if not 0 <= i < len(successors):
                raise ConfigError(f"step {k + 1}: there is no action {i} (the state has {len(successors)} "
                                  f"enabled, 0 to {len(successors) - 1})")
            action, state = successors[i]
            path.append((action, state))
        return path

    def enabled(self, state: State) -> list:
        """The actions enabled in ``state``, in successor order: ``[(kind, lane, text)]``,
        the lane ``coordinator`` for the coordinator's deliveries, timers and the clock."""
        return [(a.kind, action_lane(a), action_text(self.cfg, a)) for a, _ in self.system.successors(state)]

    def broken(self, path) -> list:
        """The properties broken at ``path``'s last step: every applicable invariant on
        its state, every step check (single_leader's, refinement, ...) on its last
        transition; ``[Broken]``. Liveness and quiescence are the whole graph's to decide:
        ``check`` decides them."""
        action, state = path[-1]
        out = []
        for p in self.properties:
            why = p.invariant(self.system, state) if p.invariant else None
            if not why and p.step and action is not None:
                why = p.step(self.system, path[-2][1], action, state)
            if why:
                out.append(Broken(p.name, why))
        return out

    def diagram(self, path, broken) -> str:
        """``path``'s sequence diagram as DOT source, by the counterexamples' renderer
        (checker/counterexample.py ``diagram``): lanes, messages and per step the
        owned and assigned partitions; the last step drawn red with the partitions
        named bold when it broke properties (``broken``: ``self.broken(path)``)."""
        reason = "; ".join(b.reason for b in broken)
        head = f"step {len(path) - 1}" + (f": {', '.join(b.name for b in broken)} violated" if broken else "")
        return diagram(self.cfg, path, title_of(self.cfg, head), reason=reason)

    def choices_of(self, doc: dict, source: str = "the counterexample") -> list:
        """The choices that replay a counterexample (a ``check`` JSON file's document,
        ``to_json``): at each step the first successor with the step's action kind and
        text whose rendering changes what the step says it changed. Raises ConfigError
        naming the first step that no successor matches (a file written for another
        configuration or model)."""
        try:
            steps = doc["steps"]
            if state_view(self.cfg, self.initial) != _plain(steps[0]["changes"]):
                raise ConfigError(f"{source}: its initial state is not this configuration's: was it written by "
                                  "`rebalance check` for another configuration?")
            state, view, choices = self.initial, state_view(self.cfg, self.initial), []
            for step in steps[1:]:
                want, kind, text = _plain(step["changes"]), step["action"]["kind"], step["action"]["text"]
                for i, (a, n) in enumerate(self.system.successors(state)):
                    if a.kind == kind and action_text(self.cfg, a) == text:
                        after = state_view(self.cfg, n)
                        if _plain(changes(view, after)) == want:
                            break
                else:
                    raise ConfigError(f"{source}: step {step['step']} ({text}) is not an action enabled there in "
                                      "this configuration")
                state, view = n, after
                choices.append(i)
        except (KeyError, TypeError, IndexError) as e:
            raise ConfigError(f"{source}: not a counterexample written by `rebalance check` "
                              f"(missing or malformed {e})") from None
        return choices


def _plain(x):
    """``x`` as JSON reads it back (tuples as lists), to compare a rendering with a file's."""
    return json.loads(json.dumps(x))
