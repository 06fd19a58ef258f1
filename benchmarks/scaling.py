"""How ``rebalance check --workers N`` scales against one process of the local
engine (no ``--workers``), on the same configuration, as a table (issue 44).

Each row is a real ``rebalance check --json`` process, run one after another.
Per row:

- **CPU-s**: user + system seconds of the whole process tree (the forked owners
  are waited for, so ``RUSAGE_CHILDREN`` counts them), and its ratio to the
  baseline's: what N workers add in work, which load on the machine does not
  distort (the must-show: within 1.25x at N = 2, 4, 8);
- **peak PSS**: the largest sum, over the tree, of each process's proportional
  set size (``/proc/PID/smaps_rollup``; Linux), sampled every
  ``--every`` seconds: shared pages count once in the sum, not once per worker
  as RSS would (the must-show: within 1.5x of the baseline's peak);
- **wall** seconds and the speed-up against the baseline, with the 1-minute
  load average before the row: on a shared machine (load above its cores) the
  wall figures mean nothing, and the table says so;
- the counts (distinct states, transitions, depth, verdict), which must be the
  baseline's.

    python benchmarks/scaling.py examples/default.toml --partitions 16
    python benchmarks/scaling.py examples/default.toml --max-faults 3 --workers 2,4,8

Options not its own (``--workers LIST``, ``--every S``) go to ``rebalance check``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REBALANCE = Path(sys.executable).parent / "rebalance"
SAME = ("verdict", "distinct_states", "transitions", "max_depth")
RAM = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")  # bytes


def _descendants(pid: int) -> list:
    """``pid`` and every process below it alive now (Linux: /proc/PID/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo.extend(int(c) for c in task.read_text().split())
            except OSError:
                pass
    return out


def tree_pss(pid: int) -> int:
    """The summed PSS (bytes) of ``pid`` and its descendants alive now
    (/proc/PID/smaps_rollup; a process gone meanwhile counts nothing)."""
    total = 0
    for p in _descendants(pid):
        try:
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith("Pss:")), 0)
    return total


def machine() -> str:
    """The line naming where and when a table was measured: host, cores, RAM, date, commit."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    return (f"machine: {platform.node()}, {os.cpu_count()} cores, {RAM / 2**30:.0f} GiB; "
            f"{datetime.date.today()}; commit {commit or '?'}")


def run(argv: list, every: float) -> dict:
    """One ``rebalance check`` run: its summary, CPU seconds, wall seconds and peak summed PSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = 0
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(REBALANCE), "check", *argv, "--json", "--out", out],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = [], []
        readers = [threading.Thread(target=lambda s=s, b=b: b.append(s.read())) for s, b in
                   ((proc.stdout, stdout), (proc.stderr, stderr))]
        for r in readers:
            r.start()
        while proc.poll() is None:
            peak = max(peak, tree_pss(proc.pid))
            time.sleep(every)
        for r in readers:
            r.join()
        wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1) or not "".join(stdout).strip():
        sys.exit(f"rebalance check {' '.join(argv)} failed ({proc.returncode}): {''.join(stderr)[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return json.loads("".join(stdout)) | {"cpu": cpu, "wall": wall, "pss": peak}


def options(doc: str, name: str, default: str, what: str) -> tuple:
    """The benchmarks' command line: ``--NAME`` (comma-separated integers, ``what`` they
    are; ``default`` a string) and ``--every`` (seconds between PSS samples); every other
    option goes to ``rebalance check``. Returns ``(parser, the integers, every, the rest)``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(f"--{name}", default=default, help=f"comma-separated {what} (default {default})")
    ap.add_argument("--every", type=float, default=0.25, help="seconds between PSS samples (default 0.25)")
    known, args = ap.parse_known_args()
    return ap, [int(n) for n in getattr(known, name).split(",")], known.every, args


def main() -> None:
    _, counts, every, args = options(__doc__, "workers", "2,4,8", "worker counts")
    print(f"rebalance check {' '.join(args)}")
    print(machine())
    rows = []
    for n in [1, *counts]:
        load = os.getloadavg()[0]
        s = run(args if n == 1 else [*args, "--workers", str(n)], every)
        rows.append((n, load, s))
        print(f"  ran {'one process' if n == 1 else f'{n} workers'}: {s['distinct_states']:,} states, "
              f"{s['cpu']:.1f} CPU-s, {s['wall']:.1f} s, peak PSS {s['pss'] / 2**20:,.0f} MB", flush=True)
    base = rows[0][2]
    print()
    print("| workers | states | transitions | depth | same as one | CPU-s | CPU ratio | peak PSS MB | PSS ratio "
          "| wall s | speed-up | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, load, s in rows:
        same = all(s[k] == base[k] for k in SAME)
        print(f"| {'1 (local)' if n == 1 else n} | {s['distinct_states']:,} | {s['transitions']:,} | "
              f"{s['max_depth']} | {'yes' if same else 'NO'} | {s['cpu']:.1f} | {s['cpu'] / base['cpu']:.2f} | "
              f"{s['pss'] / 2**20:,.0f} | {s['pss'] / base['pss']:.2f} | {s['wall']:.1f} | "
              f"{base['wall'] / s['wall']:.2f} | {load:.1f} |")
    busy = max(load for _, load, _ in rows) > 0.5
    if busy:
        print(f"\nwall figures: the load average reached {max(load for _, load, _ in rows):.1f} on "
              f"{os.cpu_count()} cores before a row, so the speed-ups are not an idle machine's")
    if any(not all(s[k] == base[k] for k in SAME) for _, _, s in rows):
        sys.exit("counts differ from one process's")


if __name__ == "__main__":
    main()
