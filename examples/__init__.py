"""The example configurations and scenarios, shipped with the package (``rebalance.examples``),
so an installed ``rebalance`` finds them: ``rebalance check --example default`` and
``pytest --rebalance default`` read ``default.toml`` here; ``connect/worker_joins`` names
``connect/worker_joins.toml``."""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from rebalance.model.config import ConfigError


def names() -> list[str]:
    """Every shipped example, as ``name`` or ``folder/name`` (no ``.toml``), sorted."""
    root = Path(str(files(__name__)))
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.toml"))


def path(name: str) -> Path:
    """The file of the shipped example ``name`` (``default``, ``connect/worker_joins``; a
    trailing ``.toml`` is allowed). Raises ConfigError naming the known examples."""
    stem = name.removesuffix(".toml")
    if stem not in names():
        raise ConfigError(f"no example named {name!r}; the examples are: {', '.join(names())}")
    return Path(str(files(__name__))) / f"{stem}.toml"
