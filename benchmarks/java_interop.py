"""Kafka 4.4.0's Java consumer against ``rebalance serve``: the interop scenarios it
plays (tests/test_interop_java.py and tests/test_interop_faults.py's Java variants),
each run once here with its trace and observed log kept, then judged again by
``rebalance conform`` on every side, for docs/java-agent.md's table.

    python benchmarks/java_interop.py [--out DIR]

Each scenario is the test function itself (its own assertions hold, or the run is
reported failed). Prints a header (machine, cores, load, date) and one Markdown
row per scenario: its wall time and each side's verdict with
its figures: the coordinator side's records checked, the member side's clients (a
process each), the clients side's overlaps of two members' ownership (a paused or
stalled member's, a zombie's, reported; or none a pause explains). Needs the
interop extras and the oracle's build (``rebalance kafka --build``).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the interop harness and the scenarios

import test_interop_faults as faults  # noqa: E402
import test_interop_java as java  # noqa: E402
from interop.harness import conform  # noqa: E402

SCENARIOS = {  # name: (what it plays, how to run it in a folder)
    "scale-up, pause, kill (cooperative-sticky)": (
        "2 -> 3 members; SIGSTOP past the session, SIGCONT; SIGKILL mid-rebalance",
        lambda tmp: faults.test_scale_up_pause_and_kill_mid_rebalance(tmp, "java", None)),
    "scale-up, pause, kill (range, eager)": (
        "the same, eager range",
        lambda tmp: faults.test_scale_up_pause_and_kill_mid_rebalance(tmp, "java", "range")),
    "static restart, duplicate fenced, pause/resume, close leave": (
        "KIP-345 restarts within the session; a duplicate group.instance.id fenced; KIP-1092 close",
        java.test_static_restart_within_the_session_and_a_duplicate_fenced),
    "poll timeout (dynamic)": (
        "stall past max.poll.interval.ms: LeaveGroup, then a rejoin as a new member",
        lambda tmp: java.test_poll_timeout_leaves_and_rejoins(tmp, False)),
    "poll timeout (static)": (
        "the same, static: no LeaveGroup, the rejoin replaces itself without a rebalance",
        lambda tmp: java.test_poll_timeout_leaves_and_rejoins(tmp, True)),
}


def judge(tmp: Path) -> dict:
    """Each side's verdict on the run kept in ``tmp`` (serve's trace.jsonl, observed.jsonl)."""
    _, coordinator = conform("coordinator", tmp / "trace.jsonl")
    _, members = conform("members", tmp / "trace.jsonl")
    _, clients = conform("clients", tmp / "observed.jsonl")
    overlaps = clients["figures"]["exclusive_processing"]
    unpaused = [o["to_ms"] - o["from_ms"] for o in overlaps if not o["paused"] and o["to_ms"] is not None]
    return {"coordinator": f"{coordinator['verdict']} ({coordinator['records_checked']} records)",
            "members": f"{members['verdict']} ({members['figures']['clients']} clients)",
            "clients": f"{clients['verdict']} ({sum(bool(o['paused']) for o in overlaps)} zombie, "
                       f"{sum(not o['paused'] for o in overlaps)} unpaused overlaps"
                       + (f", {max(unpaused):.0f} ms long" if unpaused else "") + ")"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="keep each run's trace and observed log here")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="java-interop-"))
    load = os.getloadavg()
    print(f"Kafka 4.4.0's Java consumer against rebalance serve: {platform.node()}, {os.cpu_count()} cores, "
          f"load average {load[0]:.1f} at the start, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} "
          f"UTC; runs kept under {out}\n")
    print("| scenario | what it plays | result | wall s | coordinator side | member side | "
          "clients side |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    failed = 0
    for k, (name, (plays, run)) in enumerate(SCENARIOS.items()):
        tmp = out / f"s{k + 1}"
        tmp.mkdir(parents=True)
        t0 = time.monotonic()
        try:
            with contextlib.redirect_stdout(sys.stderr):  # the scenario's own prints stay out of the table
                run(tmp)
            result = "passed"
        except Exception:  # a failed scenario is reported, and the others still run
            traceback.print_exc(file=sys.stderr)
            result, failed = "FAILED", failed + 1
        seconds = time.monotonic() - t0
        v = judge(tmp)
        print(f"| {name} | {plays} | {result} | {seconds:.1f} | {v['coordinator']} | "
              f"{v['members']} | {v['clients']} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
