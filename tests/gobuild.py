"""A Go program of the tests (franz-go's kfake, tests/doubles/kfake; the franz-go agent,
tests/interop/franz) built with the machine's Go into
``$XDG_CACHE_HOME/rebalance/<name>-<digest>/<name>`` (default ``~/.cache``), once per
digest of its sources (main.go, go.mod, go.sum); the Go module proxy serves franz-go and
its dependencies, pinned by go.sum. Raises ``RuntimeError`` naming the problem when Go is
missing or the build fails (its last lines)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SOURCES = ("main.go", "go.mod", "go.sum")


def binary(source: Path, name: str) -> Path:
    """The binary ``name`` of the Go module in directory ``source``, built first if missing."""
    digest = hashlib.sha256(b"".join(n.encode() + b"\0" + (source / n).read_bytes() for n in SOURCES)).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rebalance" / f"{name}-{digest}"
    target = cache / name
    if target.exists():
        return target
    go = shutil.which("go")
    if go is None:
        raise RuntimeError(f"`go` not found: {name} is built with Go (https://go.dev/dl)")
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f"{name}.{os.getpid()}.tmp"
    p = subprocess.run([go, "build", "-o", str(partial), "."], cwd=source, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"building {name} failed:\n{p.stderr[-2000:]}")
    partial.rename(target)
    return target
