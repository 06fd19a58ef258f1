"""Distinct states/s of the Spark engine against the local engine on the same
configuration, in one run (Spark in local mode on this machine's cores).

    python benchmarks/spark_explore.py [rebalance check options...]

Default configuration: cooperative, faults join,leave,crash, budget 2.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REBALANCE = Path(sys.executable).parent / "rebalance"
DEFAULT = ["--faults", "join,leave,crash", "--max-faults", "2"]


def run(engine: str, args: list) -> dict:
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([str(REBALANCE), "check", *args, "--engine", engine, "--json", "--out", out],
                           capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"{engine} engine failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout)


def main() -> None:
    args = sys.argv[1:] or DEFAULT
    print(f"configuration: rebalance check {' '.join(args)}")
    rows = {}
    for engine in ("local", "spark"):
        s = run(engine, args)
        rows[engine] = s
        print(f"{engine:>5}: {s['distinct_states']:,} distinct states, {s['transitions']:,} transitions, "
              f"depth {s['max_depth']}, {s['seconds']:.1f} s -> {s['distinct_states'] / s['seconds']:,.0f} "
              f"distinct states/s, verdict {s['verdict']}")
    same = all(rows["local"][k] == rows["spark"][k] for k in ("distinct_states", "transitions", "max_depth", "verdict"))
    print(f"same counts and verdict: {same}; Spark/local time: "
          f"{rows['spark']['seconds'] / rows['local']['seconds']:.1f}x")


if __name__ == "__main__":
    main()
