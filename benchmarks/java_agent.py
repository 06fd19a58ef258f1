"""Start-up of the Java consumer agent (oracle/src/main/java, docs/java-agent.md) against
``rebalance serve``, beside librdkafka's Python agent: what a Java interop test pays per
consumer process.

Each run starts one agent alone in a fresh group of a running ``rebalance serve``
(initial rebalance delay 0) through the interop harness (tests/interop/harness.py) and
prints, per kind, the median and the worst of ``--runs`` runs of:

* ``join_s``: from the launch to the first JoinGroup request in serve's trace;
* ``assigned_s``: from the launch to the agent's first ``assigned`` record;
* ``cpu_s``: the CPU seconds (user + system, /proc/PID/stat) the process had used then.

Kinds: ``java`` (what the harness runs: rebalance.oracle.agent.command(), the JVM
options -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 and the agent's class-data
archive), ``java-no-cds`` (the same without the archive), ``java-default`` (neither the
options nor the archive) and ``confluent`` (agent.py with librdkafka). Prints the
machine (cores, load average) and the date.

Usage: python benchmarks/java_agent.py [--runs 5]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from interop.harness import Group, Server, wait_for  # noqa: E402
from rebalance.oracle import agent  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(server: Server, kind: str, n: int) -> dict:
    name, group = f"{kind}-{n}", f"g-{kind}-{n}"
    g = Group(server, group, "t", 4)
    variant = {"java": {}, "java-no-cds": {"cds": False}, "java-default": {"cds": False, "jvm_options": ()}}
    java = agent.command(**variant[kind]) if kind in variant else None
    launched_ms = time.time() * 1000
    with mock.patch.object(agent, "command", lambda: java):
        proc = g.start("confluent" if kind == "confluent" else "java", name)
    try:
        first = wait_for(lambda: next((e for e in g.snapshot() if e["event"] == "assigned"), None), 60,
                         f"{name}'s first assignment")
        cpu = cpu_seconds(proc.pid)
        joins = [r for r in server.records("request") if r["api"] == "JoinGroup" and r["body"]["group_id"] == group]
        return {"join_s": (joins[0]["t_ms"] - launched_ms) / 1000, "assigned_s": (first["t_ms"] - launched_ms) / 1000,
                "cpu_s": cpu}
    finally:
        g.stop_all()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    agent.archive()  # built and trained before the clock starts
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; date: {datetime.date.today()}; "
          f"runs: {a.runs}")
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), "t:4", initial_delay_ms=0)
        try:
            for kind in ("java", "java-no-cds", "java-default", "confluent"):
                runs = [one(server, kind, n) for n in range(a.runs)]
                figures = {k: (round(statistics.median(r[k] for r in runs), 2), round(max(r[k] for r in runs), 2))
                           for k in runs[0]}
                print(kind, json.dumps({k: {"median": m, "max": x} for k, (m, x) in figures.items()}))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
