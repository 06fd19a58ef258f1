"""Exploration speed and memory on the default configuration (issue 17): distinct
states per CPU-second (time.process_time: the machine is shared, wall time is
not the engine's) and bytes of memory per distinct state (growth of peak RSS over
the run, divided by states), for the full check (with refinement and the
liveness analysis, which keeps the transition graph) and for safety alone.

It prints the figures measured before the interned representation (constants,
measured on main at commit 4b3b32c on this 2-core machine, in the same session
and under the same load as the successor generation on ids) beside the ones measured now,
on the same configuration; each run is a fresh process, so that its peak RSS
growth is its own.

    python benchmarks/explore.py [CONFIG.toml]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "examples" / "default.toml"

# main at commit 4b3b32c (before successors on ids), examples/default.toml, this machine, measured back to
# back with the branch's run: distinct states per CPU-second and bytes per distinct state
# (commit 29e3935, before issue 17 items 1-3: 16,019 and 848; safety only 19,836)
BEFORE = {"full check": (17_682, 315), "safety only": (20_852, 196)}
BEFORE_COMMIT = "4b3b32c"
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default=str(DEFAULT))
    ap.add_argument("--one", choices=("full", "safety"), help=argparse.SUPPRESS)  # a child run
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.config, args.one == "full")))
        return
    print(f"configuration: {args.config}")
    for label, one in (("full check", "full"), ("safety only", "safety")):
        out = subprocess.run([sys.executable, __file__, args.config, "--one", one], capture_output=True,
                             text=True, check=True).stdout
        m = json.loads(out)
        rate, per_state = m["distinct_states"] / m["cpu_seconds"], m["rss_growth"] / m["distinct_states"]
        old_rate, old_bytes = BEFORE[label]
        print(f"{label}: {m['distinct_states']:,} distinct states, {m['transitions']:,} transitions, "
              f"depth {m['depth']}, {m['cpu_seconds']:.1f} CPU-s")
        print(f"  before ({BEFORE_COMMIT}): {old_rate:,} distinct states per CPU-second"
              + (f", {old_bytes:,} bytes per distinct state" if old_bytes else ""))
        print(f"  now:               {rate:,.0f} distinct states per CPU-second, {per_state:,.0f} bytes per "
              f"distinct state (peak RSS grew {m['rss_growth'] / 2**20:,.0f} MiB)")
        print(f"  fingerprint collision probability (TLC's optimistic estimate): {m['collision_probability']:.1e}")
        if label == "full check":
            print(f"  issue 17 target: >= {TARGET[0]:,} states per CPU-second, <= {TARGET[1]} bytes per state: "
                  f"{'met' if rate >= TARGET[0] and per_state <= TARGET[1] else 'not met'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
