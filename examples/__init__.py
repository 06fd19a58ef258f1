"""The example configurations, scenarios and assignors, shipped with the package
(``rebalance.examples``), so an installed ``rebalance`` finds them by name:
``rebalance check --example default`` and ``pytest --rebalance default`` read
``default.toml`` here, ``rebalance replay --example connect/worker_joins`` reads
``connect/worker_joins.toml``, and ``--assignor rebalance.examples.assignors.sticky:assign``
imports ``assignors/sticky.py``.

A file is for ``check`` unless it scripts replay's steps (``[[events]]``, or a Streams seed
scenario's ``[[rounds]]``); it is for ``replay`` when it starts from a group's state
(``[initial]``). Some are both (``design1_member_joins``)."""
from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path

from rebalance.model.config import ConfigError

COMMANDS = ("check", "replay")


def _root() -> Path:
    return Path(str(files(__name__)))


def commands(name: str) -> tuple:
    """The commands that take the shipped example ``name``: a sub-tuple of COMMANDS."""
    with open(_root() / f"{name}.toml", "rb") as f:
        data = tomllib.load(f)
    scripted = "events" in data or "rounds" in data
    return tuple(c for c, takes in (("check", not scripted), ("replay", "initial" in data)) if takes)


def names(command: str | None = None) -> list[str]:
    """Every shipped example, as ``name`` or ``folder/name`` (no ``.toml``), sorted; with
    ``command``, only those it takes."""
    root = _root()
    every = sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.toml"))
    return every if command is None else [n for n in every if command in commands(n)]


def path(name: str, command: str = "check") -> Path:
    """The file of the shipped example ``name`` (``default``, ``connect/worker_joins``; a
    trailing ``.toml`` is allowed) for ``command``. Raises ConfigError naming the examples
    ``command`` takes, or the command that takes ``name``."""
    stem = name.removesuffix(".toml")
    if stem not in names():
        raise ConfigError(f"no example named {name!r}; the examples {command} takes are: {', '.join(names(command))}")
    if command not in commands(stem):
        other = " or ".join(f"rebalance {c} --example {stem}" for c in commands(stem))
        raise ConfigError(f"example {stem!r} is not for {command}: {other}")
    return _root() / f"{stem}.toml"
