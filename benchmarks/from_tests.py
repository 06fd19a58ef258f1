"""The tables a benchmark prints live with the tests that hold them: ``load(name)`` is
tests/NAME.py loaded as a module (tests/ put on sys.path first, for its own imports)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


def load(name: str):
    """tests/``name``.py as a module. Raises FileNotFoundError if there is no such file."""
    sys.path.insert(0, str(TESTS))
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
