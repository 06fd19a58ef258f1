"""Exploration speed on the default configuration: distinct states/s and bytes of
memory per distinct state (growth of peak RSS over the run, divided by states),
for the safety properties alone and for the full check (with the liveness
analysis, which keeps the transition graph).

    python benchmarks/explore.py [CONFIG.toml] [--repeat N]
"""
from __future__ import annotations

import argparse
import pickle
import resource
import sys
from pathlib import Path

from rebalance.checker.engines.explore import explore
from rebalance.checker.properties import applicable, applicable_covers
from rebalance.checker.settings import load_toml, resolve
from rebalance.checker.system import System

DEFAULT = Path(__file__).resolve().parent.parent / "examples" / "default.toml"


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=1, help="runs (a fresh process is fairer for memory)")
    args = ap.parse_args()
    settings = resolve(load_toml(args.config))
    print(f"configuration: {args.config}")
    for i in range(args.repeat):
        for label, keep in (("full check", lambda p: True), ("safety only", lambda p: p.kind != "liveness")):
            system = System(settings.group, settings.members, settings.joiners, settings.faults, settings.budget)
            before = peak_rss()
            r = explore(system, [p for p in applicable(system) if keep(p)], covers=applicable_covers(system))
            grown = peak_rss() - before
            print(f"run {i + 1}, {label}: {r.distinct_states:,} distinct states, {r.transitions:,} transitions, "
                  f"{r.seconds:.2f} s -> {r.distinct_states / r.seconds:,.0f} distinct states/s, "
                  f"{r.transitions / r.seconds:,.0f} transitions/s")
            if i == 0 and label == "full check":  # the first run in this process: peak growth is its own
                print(f"  memory: peak RSS grew {grown / 2**20:,.0f} MiB -> {grown / r.distinct_states:,.0f} "
                      f"bytes per distinct state (pickled state: {len(pickle.dumps(system.initial()))} bytes)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
