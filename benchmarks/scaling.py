"""How ``rebalance check --workers N`` scales against one process of the local
engine (no ``--workers``), on the same configuration, as a table (issue 44).

Each row is a real ``rebalance check --json`` process, run one after another.
Per row:

- **CPU-s**: user + system seconds of the whole process tree (the forked owners
  are waited for, so ``RUSAGE_CHILDREN`` counts them), and its ratio to the
  baseline's: what N workers add in work, distorted by other load far less than
  the wall, though not wholly: busy processes slow each other's memory traffic
  (``--control`` measures by how much); the must-show: within 1.25x at N = 2, 4, 8;
- **peak PSS**: the largest sum, over the tree, of each process's proportional
  set size (``/proc/PID/smaps_rollup``; Linux), sampled every
  ``--every`` seconds: shared pages count once in the sum, not once per worker
  as RSS would (the must-show: within 1.5x of the baseline's peak);
- **wall** seconds and the speed-up against the baseline, with the 1-minute
  load average before the row: on a shared machine (load above its cores) the
  wall figures mean nothing, and the table says so;
- the counts (distinct states, transitions, depth, verdict), which must be the
  baseline's.

With ``--control``, each N also runs N copies of the baseline at once (no
``--workers``), with nothing shared between them: the **machine's ratio** is
their mean CPU-s over the baseline's, what N busy processes cost each other on
this machine alone (caches, memory bandwidth, a hypervisor's siblings, time
slices past the cores), and the **engine's ratio** is the CPU ratio over it,
what the partitioned engine adds in work of its own. Without a control, the
CPU ratio counts both.

    python benchmarks/scaling.py examples/default.toml --partitions 16
    python benchmarks/scaling.py examples/default.toml --max-faults 3 --workers 2,4,8
    python benchmarks/scaling.py examples/default.toml --partitions 16 --control

Options not its own (``--workers LIST``, ``--every S``, ``--repeat R``, ``--control``) go to
``rebalance check``. ``--repeat R`` runs every row R times, round the rows, and gives
the median CPU-s and wall: on a virtual machine whose speed drifts by 10-20 % from one
minute to the next (as this project's does), one run a row is not enough.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
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


def run(argv: list, every: float, copies: int = 1) -> dict:
    """``copies`` ``rebalance check`` runs at once, each with ``argv``: the first's
    summary, their mean CPU seconds, the wall seconds until the last ended and the
    peak of their summed PSS. Exits naming the run if one fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = 0
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        procs = [subprocess.Popen([str(REBALANCE), "check", *argv, "--json", "--out", f"{out}/{i}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(copies)]
        texts = [([], []) for _ in procs]
        readers = [threading.Thread(target=lambda s=s, b=b: b.append(s.read())) for proc, bufs in zip(procs, texts)
                   for s, b in zip((proc.stdout, proc.stderr), bufs)]
        for r in readers:
            r.start()
        while any(proc.poll() is None for proc in procs):
            peak = max(peak, sum(tree_pss(proc.pid) for proc in procs if proc.poll() is None))
            time.sleep(every)
        for r in readers:
            r.join()
        wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for proc, (stdout, stderr) in zip(procs, texts):
        if proc.returncode not in (0, 1) or not "".join(stdout).strip():
            sys.exit(f"rebalance check {' '.join(argv)} failed ({proc.returncode}): {''.join(stderr)[-2000:]}")
    summaries = [json.loads("".join(stdout)) for stdout, _ in texts]
    if any(any(s[k] != summaries[0][k] for k in SAME) for s in summaries):
        sys.exit(f"rebalance check {' '.join(argv)}: copies run at once gave different counts")
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / copies
    return summaries[0] | {"cpu": cpu, "wall": wall, "pss": peak}


def options(doc: str, name: str, default: str, what: str, own: tuple = ()) -> tuple:
    """The benchmarks' command line: ``--NAME`` (comma-separated integers, ``what`` they
    are; ``default`` a string), ``--every`` (seconds between PSS samples) and the
    benchmark's ``own`` options (``(flag, add_argument's keywords)`` pairs); every other
    option goes to ``rebalance check``. Returns ``(parser, the integers, every, the rest,
    the parsed namespace)``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(f"--{name}", default=default, help=f"comma-separated {what} (default {default})")
    ap.add_argument("--every", type=float, default=0.25, help="seconds between PSS samples (default 0.25)")
    for flag, keywords in own:
        ap.add_argument(flag, **keywords)
    known, args = ap.parse_known_args()
    return ap, [int(n) for n in getattr(known, name).split(",")], known.every, args, known


def _median(runs: list) -> dict:
    """One row's figures over its repeats: the first run's counts, the median CPU-s and
    wall, the largest peak PSS and the largest load before a run."""
    def mid(k):
        return statistics.median(r[k] for r in runs)
    return runs[0] | {"cpu": mid("cpu"), "wall": mid("wall"), "pss": max(r["pss"] for r in runs),
                      "load": max(r["load"] for r in runs)}


def main() -> None:
    ap, counts, every, args, known = options(__doc__, "workers", "2,4,8", "worker counts", (
        ("--repeat", {"type": int, "default": 1, "help": "runs of each row, interleaved; the table gives the "
                      "median CPU-s and wall (default 1)"}),
        ("--control", {"action": "store_true", "help": "also run, for each N, N copies of one process at once: "
                       "the machine's ratio"})))
    if known.repeat < 1:
        ap.error("--repeat needs at least 1")
    print(f"rebalance check {' '.join(args)}")
    print(machine())
    # (label, argv, copies) per row; the repeats go round the rows, so that a drift of the machine's speed
    # meets every row alike
    plan = [("one process", args, 1)]
    for n in counts:
        plan.append((f"{n} workers", [*args, "--workers", str(n)], 1))
        if known.control:
            plan.append((f"{n} copies of one process at once", args, n))
    runs: dict = {label: [] for label, _, _ in plan}
    for r in range(known.repeat):
        for label, argv, copies in plan:
            load = os.getloadavg()[0]
            s = run(argv, every, copies) | {"load": load}
            runs[label].append(s)
            print(f"  ran {label}{f' (repeat {r + 1})' if known.repeat > 1 else ''}: {s['distinct_states']:,} "
                  f"states, {s['cpu']:.1f} CPU-s{' each' if copies > 1 else ''}, {s['wall']:.1f} s, "
                  f"peak PSS {s['pss'] / 2**20:,.0f} MB", flush=True)
    base = _median(runs["one process"])
    rows = [(1, base, base["cpu"])] + [
        (n, _median(runs[f"{n} workers"]),
         _median(runs[f"{n} copies of one process at once"])["cpu"] if known.control else None) for n in counts]
    control = "| machine's ratio | engine's ratio " if known.control else ""
    print()
    print(f"| workers | states | transitions | depth | same as one | CPU-s | CPU ratio {control}| peak PSS MB "
          "| PSS ratio | wall s | speed-up | load |")
    print("|---|---|---|---|---|---|---|" + "---|---|" * bool(known.control) + "---|---|---|---|---|")
    for n, s, alone in rows:
        same = all(s[k] == base[k] for k in SAME)
        ratios = f" {alone / base['cpu']:.2f} | {s['cpu'] / alone:.2f} |" if known.control else ""
        print(f"| {'1 (local)' if n == 1 else n} | {s['distinct_states']:,} | {s['transitions']:,} | "
              f"{s['max_depth']} | {'yes' if same else 'NO'} | {s['cpu']:.1f} | {s['cpu'] / base['cpu']:.2f} |{ratios} "
              f"{s['pss'] / 2**20:,.0f} | {s['pss'] / base['pss']:.2f} | {s['wall']:.1f} | "
              f"{base['wall'] / s['wall']:.2f} | {s['load']:.1f} |")
    if known.repeat > 1:
        print(f"\n{known.repeat} runs a row, interleaved: median CPU-s and wall, largest peak PSS and load")
    busy = max(s["load"] for _, s, _ in rows) > 0.5
    if busy:
        print(f"\nwall figures: the load average reached {max(s['load'] for _, s, _ in rows):.1f} on "
              f"{os.cpu_count()} cores before a row, so the speed-ups are not an idle machine's")
    if any(s[k] != base[k] for row in runs.values() for s in row for k in SAME):
        sys.exit("counts differ from one process's")


if __name__ == "__main__":
    main()
