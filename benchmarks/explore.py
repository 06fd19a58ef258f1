"""Exploration speed and memory on the default configuration (issue 17): distinct
states per CPU-second (time.process_time: the machine is shared, wall time is
not the engine's) and bytes of memory per distinct state (growth of peak RSS over
the run, divided by states), for the full check (with refinement and the
liveness analysis, which keeps the transition graph) and for safety alone.

It measures, in the same run and back to back, a commit from before the interned
representation (``--before``, default 4b3b32c: main before issue 17's successors
on ids) and this working tree, on the same configuration, and prints both: CPU
figures move with the machine (commit 4b3b32c has measured 28 CPU-s on one
machine and 62.5 on another), so only figures taken together compare. The earlier
commit runs from a temporary git worktree, imported through its own
pyproject's package-dir mapping; each run is a fresh process, so that its peak
RSS growth is its own.

    python benchmarks/explore.py [CONFIG.toml] [--before REV | --before none]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from contextlib import contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "examples" / "default.toml"
BEFORE_COMMIT = "4b3b32c"  # main before successors on ids (issue 17)
TARGET = (40_000, 100)  # issue 17 "must show", full check


def measure(config: str, full: bool) -> dict:
    """One exploration in this process: counts, CPU seconds, peak RSS growth."""
    from rebalance.checker.engines.explore import explore
    from rebalance.checker.properties import applicable, applicable_covers
    from rebalance.checker.settings import load_toml, resolve
    from rebalance.checker.system import System
    settings = resolve(load_toml(config))
    system = System(settings.group, settings.members, settings.joiners, settings.faults, settings.budget)
    props = [p for p in applicable(system) if full or p.kind != "liveness"]
    covers = applicable_covers(system)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    cpu = time.process_time()
    r = explore(system, props, covers=covers)
    cpu = time.process_time() - cpu
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    return {"distinct_states": r.distinct_states, "transitions": r.transitions, "depth": r.max_depth,
            "cpu_seconds": cpu, "rss_growth": grown, "statuses": r.statuses,
            "collision_probability": r.collision_probability}


@contextmanager
def checkout(rev: str):
    """A folder from which ``import rebalance`` loads commit ``rev``'s sources: a
    temporary git worktree, its packages laid out by its pyproject's
    ``[tool.setuptools.package-dir]`` as symlinks (so that the installed editable
    package, found after PYTHONPATH, is not the one imported). Raises
    subprocess.CalledProcessError if git does not know ``rev``."""
    with tempfile.TemporaryDirectory(prefix="rebalance-before-") as tmp:
        tree, root = Path(tmp) / "tree", Path(tmp) / "root"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), rev],
                       check=True, capture_output=True, text=True)
        try:
            dirs = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
            top = root / "rebalance"
            top.mkdir(parents=True)
            for f in (tree / dirs["rebalance"]).iterdir():
                (top / f.name).symlink_to(f)
            for package, folder in dirs.items():
                if package != "rebalance":
                    (top / package.split(".", 1)[1]).symlink_to(tree / folder)
            yield root
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)


def run(config: str, one: str, root: Path | None) -> dict:
    """One measurement in a fresh process, from ``root`` (``checkout``) or this tree."""
    env = dict(os.environ, PYTHONPATH=str(root)) if root else None
    out = subprocess.run([sys.executable, __file__, config, "--one", one], capture_output=True, text=True,
                         check=True, env=env).stdout
    return json.loads(out)


def figures(m: dict) -> tuple:
    """``(distinct states per CPU-second, bytes per distinct state)`` of a measurement."""
    return m["distinct_states"] / m["cpu_seconds"], m["rss_growth"] / m["distinct_states"]


def line(name: str, m: dict) -> str:
    rate, per_state = figures(m)
    return (f"  {name:<16} {m['distinct_states']:,} distinct states, {m['transitions']:,} transitions, depth "
            f"{m['depth']}: {m['cpu_seconds']:.1f} CPU-s, {rate:,.0f} distinct states per CPU-second, "
            f"{per_state:,.0f} bytes per distinct state (peak RSS grew {m['rss_growth'] / 2**20:,.0f} MiB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default=str(DEFAULT))
    ap.add_argument("--before", default=BEFORE_COMMIT,
                    help=f"the commit to measure back to back with this tree (default {BEFORE_COMMIT}; none: skip)")
    ap.add_argument("--one", choices=("full", "safety"), help=argparse.SUPPRESS)  # a child run
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.config, args.one == "full")))
        return
    print(f"configuration: {args.config}")
    with (checkout(args.before) if args.before != "none" else nullcontext()) as root:
        for label, one in (("full check", "full"), ("safety only", "safety")):
            print(label)
            before = run(args.config, one, root) if root else None
            if before:
                print(line(f"before ({args.before})", before), flush=True)
            m = run(args.config, one, None)
            print(line("now", m))
            if before:
                (rate, per_state), (old_rate, old_bytes) = figures(m), figures(before)
                print(f"  now / before: {rate / old_rate:.2f}x the distinct states per CPU-second, "
                      f"{per_state / old_bytes:.2f}x the bytes per distinct state")
            print(f"  fingerprint collision probability (TLC's optimistic estimate): {m['collision_probability']:.1e}")
            if label == "full check":
                rate, per_state = figures(m)
                print(f"  issue 17 target: >= {TARGET[0]:,} states per CPU-second, <= {TARGET[1]} bytes per state: "
                      f"{'met' if rate >= TARGET[0] and per_state <= TARGET[1] else 'not met'}", flush=True)


if __name__ == "__main__":
    main()
