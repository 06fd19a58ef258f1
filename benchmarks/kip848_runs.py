"""KIP-848's online migration run by the Java consumer 4.4.0 (tests/test_migration_online.py's
``migration``: two classic consumers rolled one by one to group.protocol=consumer, then back),
``--runs`` times on each target, for docs/kip848.md's table.

    python benchmarks/migration_runs.py [--runs N] [--targets kafka,serve]

Prints a header (machine, cores, load, date) and one Markdown row per run: the target, the
seconds each step took to settle (every partition owned once among the running members),
the coordinator side's verdict with its records checked and the migration rules it saw,
the clients side's verdict, and the committed offsets the members fetched in the consumer
group and after the downgrade (each partition's, committed in the classic group before). ``kafka`` starts a real Kafka 4.4.0 broker (the oracle's,
as the ``kafka_broker`` fixture of that test module configures it); ``serve`` runs
``rebalance serve`` with the same group.consumer settings. Needs the interop extras and the oracle's build.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
from pathlib import Path

from from_tests import load

TOPIC = "migrate"


def _kafka(test, tmp: Path):
    from confluent_kafka.admin import AdminClient, NewTopic
    from rebalance.oracle.broker import KafkaBroker

    with KafkaBroker(dict(test.pytestmark.kwargs)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, test.PARTITIONS, 1)])[TOPIC].result(20)
        return test.migration("java", ("127.0.0.1", broker.port), TOPIC, tmp)


def _serve(test, tmp: Path):
    return test.on_serve("java", tmp)


TARGETS = {"kafka": _kafka, "serve": _serve}


def row(target: str, out: dict) -> str:
    coordinator, clients = out["coordinator"], out["clients"]
    rules = sorted(r for r in coordinator["rules"] if r.startswith("M"))
    steps = ", ".join(f"{s}" for s in out["settled_s"].values())
    fetched = "; ".join(f"{kind}: {sorted(set(offsets))}" for kind, offsets in out["offsets"].items() if kind != "classic")
    return (f"| {target} | {steps} | {coordinator['verdict']} ({coordinator['records_checked']} records; "
            f"{' '.join(rules)}) | {clients['verdict']} ({clients['records_checked']} records) | {fetched} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--targets", default=",".join(TARGETS))
    a = p.parse_args()
    targets = a.targets.split(",")
    unknown = set(targets) - set(TARGETS)
    if unknown:
        print(f"--targets: unknown {sorted(unknown)}; known: {sorted(TARGETS)}", file=sys.stderr)
        return 2
    test = load("test_migration_online")
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {a.runs} runs per target\n")
    print("| target | seconds to settle: " + ", ".join(test.STEPS) + " | coordinator side | clients side "
          "| offsets fetched |")
    print("|---|---|---|---|---|")
    failed = 0
    for target in targets:
        for _ in range(a.runs):
            with tempfile.TemporaryDirectory(prefix="migration-") as tmp:
                out = TARGETS[target](test, Path(tmp))
            print(row(target, out), flush=True)
            failed += out["coordinator"]["verdict"] != "conforms" or out["clients"]["verdict"] != "conforms"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
