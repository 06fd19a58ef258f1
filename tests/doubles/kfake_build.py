"""franz-go's kfake built from tests/doubles/kfake (main.go, go.mod, go.sum) with the
machine's Go into ``$XDG_CACHE_HOME/rebalance/kfake-<digest>/kfake`` (default
``~/.cache``), once per digest of those files; the Go module proxy serves kfake and its
dependencies, pinned by go.sum. Raises ``RuntimeError`` naming the problem when Go is
missing or the build fails (its last lines)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).parent / "kfake"
SOURCES = ("main.go", "go.mod", "go.sum")


def binary() -> Path:
    """The kfake binary, built first if missing."""
    digest = hashlib.sha256(b"".join(n.encode() + b"\0" + (HERE / n).read_bytes() for n in SOURCES)).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rebalance" / f"kfake-{digest}"
    target = cache / "kfake"
    if target.exists():
        return target
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("`go` not found: franz-go's kfake is built with Go (https://go.dev/dl)")
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f"kfake.{os.getpid()}.tmp"
    p = subprocess.run([go, "build", "-o", str(partial), "."], cwd=HERE, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"building kfake failed:\n{p.stderr[-2000:]}")
    partial.rename(target)
    return target
