"""Distinct states per core-second of the partitioned engines against the local
engine on the same configuration, in one run: ``--workers N`` (N forked owners)
and ``--engine spark`` (one owner per core of the Spark master; local mode here).
Each row is a real ``rebalance check --json`` process, run one after another
(the same machine, the same load: each row prints the 1-minute load average
before it); its wall seconds include start-up (Spark's JVM too). CPU seconds
are the process tree's as far as it is waited for (``RUSAGE_CHILDREN``): the
forked owners are, Spark's Python workers (children of its JVM's daemon) are
not, so Spark's row shows none.

    python benchmarks/spark_explore.py [--workers N] [--spark-master URL] [rebalance check options...]
    python benchmarks/spark_explore.py examples/default.toml      # the main job
    python benchmarks/spark_explore.py --standalone examples/default.toml

``--standalone`` adds a row: Spark on a standalone cluster on loopback (a master and
two workers with a core each per two of the machine's, checker/spark_standalone.py),
started before the rows and stopped after; its cores are the cluster's.

Default configuration: cooperative, faults join,leave,crash,restart, budget 2
(37,324 distinct states).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REBALANCE = Path(sys.executable).parent / "rebalance"
DEFAULT = ["--faults", "join,leave,crash,restart", "--max-faults", "2"]
SAME = ("verdict", "distinct_states", "transitions", "max_depth")


def run(args: list) -> dict:
    """One ``rebalance check`` run: its summary plus the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([str(REBALANCE), "check", *args, "--json", "--out", out], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):
        sys.exit(f"rebalance check {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout) | {"cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}


def cores_of(master: str) -> int:
    """The task slots of a local master (``local``, ``local[N]``, ``local[*]``)."""
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master)
    if not m:
        sys.exit(f"--spark-master {master}: give the cores by hand for a cluster (this benchmark reads local[N])")
    return os.cpu_count() if m.group(1) in (None, "*") else int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--spark-master", default="local[*]")
    ap.add_argument("--standalone", action="store_true", help="add a row on a Spark standalone cluster on loopback")
    known, rest = ap.parse_known_args()
    args = rest or DEFAULT
    print(f"configuration: rebalance check {' '.join(args)}")
    with contextlib.ExitStack() as stack:
        rows = [("local", 1, args),
                (f"workers {known.workers}", known.workers, [*args, "--workers", str(known.workers)]),
                ("spark", cores_of(known.spark_master),
                 [*args, "--engine", "spark", "--spark-master", known.spark_master])]
        if known.standalone:
            from rebalance.checker.spark_standalone import LoopbackCluster
            per_worker = -(-(os.cpu_count() or 2) // 2)
            cluster = stack.enter_context(LoopbackCluster(workers=2, cores=per_worker))
            rows.append(("standalone", 2 * per_worker, [*args, "--engine", "spark", "--spark-master", cluster.master]))
        seen = measure(rows)
    report(rows, seen)


def measure(rows: list) -> dict:
    """Each row's run, one after another, printed as it ends: name -> summary (and CPU seconds)."""
    seen = {}
    for name, cores, argv in rows:
        load = os.getloadavg()[0]
        s = seen[name] = run(argv)
        cpu = "" if name in ("spark", "standalone") else (
            f", {s['cpu']:.1f} CPU-s ({s['distinct_states'] / s['cpu']:,.0f} states per CPU-second)")
        print(f"{name:>10}: {s['distinct_states']:,} distinct states, {s['transitions']:,} transitions, depth "
              f"{s['max_depth']}, verdict {s['verdict']}; load {load:.1f}; {s['seconds']:.1f} s on {cores} core(s) "
              f"-> {_per_core(s, cores):,.0f} states per core-second{cpu}", flush=True)
    return seen


def report(rows: list, seen: dict) -> None:
    local = seen["local"]
    for name, cores, _ in rows[1:]:
        s = seen[name]
        print(f"{name}: same counts and verdict as local: {all(s[k] == local[k] for k in SAME)}; speed-up "
              f"{local['seconds'] / s['seconds']:.2f}x; states per core-second {_per_core(s, cores) / _per_core(local, 1):.2f}"
              f" of local's")


def _per_core(s: dict, cores: int) -> float:
    return s["distinct_states"] / (s["seconds"] * cores)


if __name__ == "__main__":
    main()
