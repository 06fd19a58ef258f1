"""What checkpointing costs the main job (issue 44 item 4): ``rebalance check`` as
given (default: the main job, examples/default.toml) without a checkpoint, with
``--checkpoint DIR`` at the default interval (60 s: on a run this short, the one
checkpoint before the liveness analysis) and with ``--checkpoint-interval 0``
(every breadth-first level), and the resume of the finished checkpoint (the
visited set rebuilt, the liveness analysis run again), each a fresh process,
in rounds (the variants in turn, so that a change of load on a shared machine
falls on all of them), the median of each printed.

Per variant: wall seconds, CPU seconds (user + system of the process,
``RUSAGE_CHILDREN``; which load on the machine distorts far less than the wall,
though not wholly: benchmarks/scaling.py ``--control``) and their
overhead on the plain run, the checkpoints written, the directory's size, and
the counts, which must be the plain run's.

    python benchmarks/checkpoint.py [--rounds 3] [CHECK OPTIONS...]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REBALANCE = Path(sys.executable).parent / "rebalance"
SAME = ("verdict", "distinct_states", "transitions", "max_depth", "properties", "actions_fired", "covers")
VARIANTS = ("plain", "checkpoint (default interval)", "checkpoint every level", "resume of the finished one")


def run(argv: list, scratch: Path) -> dict:
    """One ``rebalance check ... --json`` process: its summary, wall and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(["nice", str(REBALANCE), "check", *argv, "--json", "--out", str(scratch / "out")],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):
        sys.exit(f"rebalance check {' '.join(argv)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout) | {"wall": wall,
                                   "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}


def round_of(args: list, scratch: Path) -> list:
    """The four variants once each, in order; the checkpoint directories removed after."""
    ck, every = scratch / "ck", scratch / "every"
    for d in (ck, every):
        shutil.rmtree(d, ignore_errors=True)
    rows = [run(args, scratch), run([*args, "--checkpoint", str(ck)], scratch),
            run([*args, "--checkpoint", str(every), "--checkpoint-interval", "0"], scratch),
            run([*args, "--resume", str(ck)], scratch)]
    rows[1]["bytes"] = sum(f.stat().st_size for f in ck.iterdir())
    rows[2]["bytes"] = sum(f.stat().st_size for f in every.iterdir())
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the four runs (default 3)")
    known, args = ap.parse_known_args()
    args = args or [str(ROOT / "examples" / "default.toml")]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    print(f"rebalance check {' '.join(args)}")
    print(f"machine: {platform.node()}, {os.cpu_count()} cores; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} "
          f"UTC; commit {commit or '?'}; load average before: {os.getloadavg()[0]:.1f}")
    rounds = []
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(known.rounds):
            rows = round_of(args, Path(scratch))
            rounds.append(rows)
            print(f"  round {r + 1}: " + ", ".join(f"{s['wall']:.2f} s / {s['cpu']:.2f} CPU-s" for s in rows),
                  flush=True)
    base = rounds[0][0]
    same = all({k: s[k] for k in SAME} == {k: base[k] for k in SAME} for rows in rounds for s in rows)
    wall0 = statistics.median(rows[0]["wall"] for rows in rounds)
    cpu0 = statistics.median(rows[0]["cpu"] for rows in rounds)
    print(f"\n{base['distinct_states']:,} states, {base['transitions']:,} transitions, depth {base['max_depth']}, "
          f"verdict {base['verdict']}; every run's counts, statuses, actions and covers the same: "
          f"{'yes' if same else 'NO'}; medians of {known.rounds} rounds; load average after: "
          f"{os.getloadavg()[0]:.1f}")
    print("\n| run | wall s | overhead | CPU-s | overhead | checkpoints written | directory MB |")
    print("|---|---|---|---|---|---|---|")
    for i, name in enumerate(VARIANTS):
        wall = statistics.median(rows[i]["wall"] for rows in rounds)
        cpu = statistics.median(rows[i]["cpu"] for rows in rounds)
        size = rounds[-1][i].get("bytes")
        ck = rounds[-1][i].get("checkpoint")
        print(f"| {name} | {wall:.2f} | {100 * (wall / wall0 - 1):+.1f}% | {cpu:.2f} | {100 * (cpu / cpu0 - 1):+.1f}% "
              f"| {'' if ck is None else ck['written']} | {'' if size is None else f'{size / 2**20:.1f}'} |")
    if not same:
        sys.exit("counts differ from the plain run's")


if __name__ == "__main__":
    main()
