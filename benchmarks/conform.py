"""``rebalance conform`` figures: a trace of about 10,000 records emitted from a
seeded timed run of the model (checker/conform/emit.py: 10 cooperative members,
6 scripted restarts, commits every 2 s), then judged on the coordinator side.

Prints records, the time to read and validate the trace (spec/trace.schema.json
per line), the time to check it, and records/s for each and for both.

Usage: python benchmarks/conform.py [--records 10000] [--members 10] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from rebalance.checker.conform import coordinator, trace
from rebalance.checker.conform.emit import emit
from rebalance.checker.simulation import Timing
from rebalance.model.config import GroupConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--profile", action="store_true", help="print the check's top functions (cProfile)")
    args = ap.parse_args()
    cfg = GroupConfig(topics=(("orders", 3 * args.members),))
    timing = Timing(session_ms=10_000, rebalance_ms=30_000, commit_ms=2_000)
    # records per simulated second: each member heartbeats every 3 s and commits every 2 s (request + response)
    per_second = args.members * 2 * (1 / 3 + 1 / 2) * 0.82  # less while members rejoin
    until = int(args.records / per_second * 1000)
    script = tuple((until * (i + 1) // 8, action, i) for i, action in enumerate(["crash", "stop"] * 3))
    script += tuple((t + 5_000, "start", slot) for t, _, slot in script)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        t0 = time.perf_counter()
        n = emit(path, cfg, args.members, False, script, timing, seed=1, until_ms=until)
        t1 = time.perf_counter()
        parsed = trace.read(path)
        t2 = time.perf_counter()
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
        verdict = coordinator.check(parsed)
        t3 = time.perf_counter()
        if args.profile:
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(15)
    print(f"trace: {n:,} records ({args.members} members, {until / 1000:.0f} s simulated), emitted in {t1 - t0:.2f} s")
    print(f"read + schema:  {t2 - t1:6.2f} s  {n / (t2 - t1):10,.0f} records/s")
    print(f"coordinator:    {t3 - t2:6.2f} s  {n / (t3 - t2):10,.0f} records/s  ({verdict.status}, "
          f"{verdict.records_checked:,} checked, rules {', '.join(sorted(verdict.rules))})")
    print(f"conform total:  {t3 - t1:6.2f} s  {n / (t3 - t1):10,.0f} records/s")


if __name__ == "__main__":
    main()
