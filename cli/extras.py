"""The optional parts of the install (pyproject.toml's extras) and the error for a missing one.

The base install (``pip install kafka-rebalance``) runs check, replay, conform, vectors,
serve, member, proxy and ctl; ``[prove]`` adds z3 (and hypothesis, for ``prove --assignor``'s
search), ``[spark]`` pyspark and matplotlib (``--engine spark``, ``simulate``), ``[fuzz]``
hypothesis (``rebalance.strategies``).
"""
from __future__ import annotations

import importlib

from rebalance.model.config import ConfigError

DISTRIBUTION = "kafka-rebalance"  # the import package is ``rebalance``; PyPI's name ``rebalance`` is another project's
EXTRAS = {"prove": ("z3", "hypothesis"), "spark": ("pyspark", "matplotlib"), "fuzz": ("hypothesis",)}
PROJECTS = {"z3": "z3-solver"}  # where an import name differs from its PyPI project's


class MissingExtra(ConfigError, ImportError):
    """An extra that is not installed: for a command, bad input to this install (exit 2, as
    every ConfigError); for an ``import`` of a module that needs it, an ImportError."""


def require(extra: str, what: str) -> None:
    """Import every module of ``extra`` (a key of EXTRAS) and return; if one cannot be
    imported, raise MissingExtra naming ``what`` needed it, the missing projects and the pip
    command."""
    missing = []
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(PROJECTS.get(module, module))
    if missing:
        raise MissingExtra(f"{what} needs the [{extra}] extra (cannot import {', '.join(missing)}): "
                           f"pip install '{DISTRIBUTION}[{extra}]'")
