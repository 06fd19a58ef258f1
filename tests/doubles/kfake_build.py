"""franz-go's kfake built from tests/doubles/kfake (main.go, go.mod, go.sum) with the
machine's Go, once per digest of those files (tests/gobuild.py). Raises ``RuntimeError``
naming the problem when Go is missing or the build fails."""
from __future__ import annotations

from pathlib import Path

from gobuild import binary as _built

HERE = Path(__file__).parent / "kfake"


def binary() -> Path:
    """The kfake binary, built first if missing."""
    return _built(HERE, "kfake")
