"""kafka-python's stale claim after a lost membership (docs/explanation/findings.md; issue 43):
how often a resumed kafka-python zombie's stale claim is followed by real double
ownership, and for how long, from repeated runs of the interop harness's pause
scenario (tests/interop: ``rebalance serve`` recording the trace, kafka-python
consumer agents in real processes writing the observed log).

Each run (``--scenario full``, the default: tests/test_interop_faults.py's): two
kafka-python 3.x consumers (cooperative-sticky, session 6 s) share 6 partitions, a
third joins; A is paused with SIGSTOP until B and C own everything, then resumed
(SIGCONT); once the group is balanced again D joins and C is killed mid-rebalance.
``--scenario pause``: three members, the pause alone. Then ``rebalance conform``
judges serve's trace on the member side (every divergence: the stale claim, R15,
and what follows it) and the observed log on the clients side (overlaps of two
members' ownership, each either during a pause, a zombie's, or not: double
ownership no pause explains).

    python benchmarks/interop_stale_claim.py [--runs N] [--out DIR]

Prints one line per run and a summary: runs with a stale claim, runs with an
unpaused overlap, its longest duration. Needs the interop extras (kafka-python).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the interop harness

from interop.harness import Group, Server, conform, wait_for  # noqa: E402

TOPIC, PARTITIONS, SESSION_MS = "t", 6, 6000


def one_run(tmp: Path, full: bool) -> float:
    """One pause scenario, its trace and observed log kept under ``tmp``; returns the
    resume's t_ms. ``full``: tests/test_interop_faults.py's whole scenario (a scale-up
    from 2 to 3 first, and after the pause D joins while C is killed)."""
    tmp.mkdir(parents=True)
    server = Server(tmp, f"{TOPIC}:{PARTITIONS}")
    group = Group(server, "g", TOPIC, PARTITIONS)
    try:
        for name in "ABC":
            group.start("kafka-python", name, session_ms=SESSION_MS)
            if full and name != "A":
                group.wait_balanced()
        group.wait_balanced()
        group.pause("A")
        wait_for(lambda: group.balanced_among(["B", "C"]), 60, "B and C to take over from the paused A")
        resumed = group.resume("A")
        (tmp / "resumed.json").write_text(json.dumps(resumed))
        group.wait_balanced(timeout=60)
        if full:
            mark = len(server.log)
            group.start("kafka-python", "D", session_ms=SESSION_MS)
            wait_for(lambda: server.rebalances_since(mark), 20, "D's JoinGroup to begin a rebalance")
            group.kill9("C")
            group.wait_balanced(timeout=60)
    finally:
        group.stop_all()
        server.stop()
    return resumed


def judge(tmp: Path, resumed: float) -> dict:
    """What ``rebalance conform`` finds in one run's trace and observed log."""
    _, members = conform("members", tmp / "trace.jsonl")
    _, clients = conform("clients", tmp / "observed.jsonl")
    unpaused = [o for o in clients["figures"]["exclusive_processing"] if not o["paused"]]
    return {"dir": str(tmp), "resumed_ms": resumed,
            "member_rules": [d["rule"] for d in members["divergences"]],
            "clients_verdict": clients["verdict"],
            "unpaused_overlaps": [{"partition": o["partition"], "members": o["members"],
                                   "after_resume_ms": round(o["from_ms"] - resumed),
                                   "ms": None if o["to_ms"] is None else round(o["to_ms"] - o["from_ms"])}
                                  for o in unpaused],
            "zombie_overlaps": [{"ms": round(o["to_ms"] - o["from_ms"]), "after_resume_ms": round(o["to_ms"] - resumed)}
                                for o in clients["figures"]["exclusive_processing"]
                                if o["paused"] and o["to_ms"] is not None]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--scenario", choices=("pause", "full"), default="full",
                    help="pause: three members, A paused and resumed; full: tests/test_interop_faults.py's scenario")
    ap.add_argument("--out", type=Path, default=None, help="keep each run's trace and observed log here")
    ap.add_argument("--judge", type=Path, default=None, help="judge the runs kept under DIR again, run nothing")
    ap.add_argument("--no-judge", action="store_true", help="record the runs only (judge them later with --judge)")
    args = ap.parse_args()
    if args.judge:
        print(f"judged on {platform.node()} ({os.cpu_count()} cores), {datetime.date.today()}: {args.judge}")
        runs = sorted(p for p in args.judge.iterdir() if (p / "trace.jsonl").exists())
        results = []
        for p in runs:
            results.append(judge(p, json.loads((p / "resumed.json").read_text())))
            print(f"{p.name}", end=": ")
            line(results[-1])
        return report(results, args.judge)
    out = args.out or Path(tempfile.mkdtemp(prefix="stale-claim-"))
    import kafka
    print(f"kafka-python {kafka.__version__}, {args.scenario} scenario, {args.runs} runs, {platform.node()} ({os.cpu_count()} cores), "
          f"{datetime.date.today()}; runs under {out}")
    results = []
    for k in range(args.runs):
        t0 = time.monotonic()
        resumed = one_run(out / f"run{k + 1:02d}", args.scenario == "full")
        print(f"run{k + 1:02d} ({time.monotonic() - t0:4.0f} s)", end=": ", flush=True)
        if args.no_judge:
            print("recorded")
            continue
        results.append(judge(out / f"run{k + 1:02d}", resumed))
        line(results[-1])
    if results:
        report(results, out)


def line(r: dict) -> None:
    longest = max((o["ms"] or 0 for o in r["unpaused_overlaps"]), default=0)
    print(f"member side {', '.join(r['member_rules']) or 'conforms'}; "
          f"clients side {r['clients_verdict']}, {len(r['unpaused_overlaps'])} overlap(s) no pause explains"
          + (f" (longest {longest} ms, from {r['unpaused_overlaps'][0]['after_resume_ms']} ms after the resume)"
             if r["unpaused_overlaps"] else ""), flush=True)


def report(results: list, out: Path) -> None:
    stale = sum("R15" in r["member_rules"] for r in results)
    double = [r for r in results if r["unpaused_overlaps"]]
    longest = max((o["ms"] or 0 for r in double for o in r["unpaused_overlaps"]), default=0)
    zombie = [o for r in results for o in r["zombie_overlaps"]]
    print(f"summary: stale claim (R15) in {stale} of {len(results)} runs; double ownership no pause explains in "
          f"{len(double)} of {len(results)} runs, the longest {longest} ms; the paused member's own window (an "
          f"overlap during its pause): {len(zombie)} overlaps, {min((o['ms'] for o in zombie), default=0)}-"
          f"{max((o['ms'] for o in zombie), default=0)} ms long, ending "
          f"{min((o['after_resume_ms'] for o in zombie), default=0)}-"
          f"{max((o['after_resume_ms'] for o in zombie), default=0)} ms after the resume (its lost callback)")
    (out / "summary.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
