"""KIP-848 played by real clients on Kafka 4.4.0 and on ``rebalance serve``, side by side: the
lifecycle (tests/test_interop_kip848.py's ``lifecycle``: scale-up, a pause past the session
timeout, a kill, with librdkafka 2.16 and the Java consumer 4.4.0 at group.protocol=consumer)
and the online migration (tests/test_migration_online.py's ``migration``: the Java consumer
rolled from classic to group.protocol=consumer one member at a time, then back), ``--runs``
times each on each target.

    python benchmarks/kip848_runs.py [--runs N] [--targets kafka,serve]
                                     [--scenarios lifecycle-confluent,lifecycle-java,migration-java]
                                     [--out docs/oracle/kip848-side-by-side.md] [--keep DIR]

Prints a header (machine, cores, load, date) and one Markdown row per run: the scenario and
client, the target, the seconds each step took to settle (every partition owned once among the
running members), and ``rebalance conform``'s verdicts on the coordinator side (records checked,
the KIP-848 and migration rules seen), the members side (each client's reconciliation replayed,
K11-K15) and the clients side (no partition owned twice); for the migration, the committed
offsets the members fetched after each conversion. ``--out`` also writes the page. ``kafka``
starts a real Kafka 4.4.0 broker (the oracle's, as the test modules' ``kafka_broker`` mark
configures it); ``serve`` runs ``rebalance serve`` with the same group.consumer settings. Needs
the interop extras and the oracle's build. Exit 1 if a run does not conform on every side, 2 on
bad options.
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

# scenario-client -> (the test module, its scenario function, the client)
SCENARIOS = {"lifecycle-confluent": ("test_interop_kip848", "lifecycle", "confluent"),
             "lifecycle-java": ("test_interop_kip848", "lifecycle", "java"),
             "migration-java": ("test_migration_online", "migration", "java")}
PARTITIONS = {"lifecycle": 6, "migration": 4}


def _kafka(test, scenario: str, client: str, tmp: Path) -> dict:
    from catalogue.targets import create_topic
    from rebalance.oracle.broker import KafkaBroker

    topic = f"{scenario}-{client}"
    with KafkaBroker(dict(test.pytestmark.kwargs)) as broker:
        create_topic("127.0.0.1", broker.port, topic, PARTITIONS[scenario])  # listed before the proxy reads it
        return getattr(test, scenario)(client, ("127.0.0.1", broker.port), topic, tmp)


def _serve(test, scenario: str, client: str, tmp: Path) -> dict:
    return test.on_serve(client, tmp)


TARGETS = {"kafka": _kafka, "serve": _serve}


def verdicts(out: dict) -> dict:
    """Each side's verdict of a run's result, the members side judged from the trace where
    the scenario did not (the migration's)."""
    from interop.harness import conform

    members = out.get("members") or conform("members", out["trace"])[1]
    return {"coordinator": out["coordinator"], "members": members, "clients": out["clients"]}


def verdict(side: dict) -> str:
    """A side's verdict, a divergence with the rules it broke (K11 alone at generation -1 on the Java
    consumer's members side is finding K-F4)."""
    if side["verdict"] != "divergent":
        return side["verdict"]
    rules = sorted({d["rule"] for d in side.get("divergences") or [side["divergence"]]})
    return f"divergent ({', '.join(rules)}; line {side['divergence']['line']})"


def row(name: str, target: str, out: dict) -> str:
    sides = verdicts(out)
    c = sides["coordinator"]
    rules = " ".join(sorted(r for r in c["rules"] if r[0] in "KM"))
    steps = ", ".join(f"{what} {s}" for what, s in out["settled_s"].items())
    fetched = "; ".join(f"{kind}: {sorted(set(offsets))}" for kind, offsets in out.get("offsets", {}).items()
                        if kind != "classic")
    return (f"| {name} | {target} | {steps} | {verdict(c)} ({c['records_checked']} records; {rules}) | "
            f"{verdict(sides['members'])} | {verdict(sides['clients'])} | {fetched or '-'} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--out", type=Path, help="also write the rows as this Markdown page")
    p.add_argument("--keep", type=Path, help="keep each run's traces and logs under this folder")
    a = p.parse_args()
    targets, names = a.targets.split(","), a.scenarios.split(",")
    for what, given, known in (("--targets", targets, TARGETS), ("--scenarios", names, SCENARIOS)):
        unknown = set(given) - set(known)
        if unknown:
            print(f"{what}: unknown {sorted(unknown)}; known: {sorted(known)}", file=sys.stderr)
            return 2
    header = (f"machine: {platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
              f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {a.runs} run(s) per target")
    lines = [header, "", "| scenario, client | target | seconds to settle after each step | coordinator side "
             "| members side | clients side | offsets fetched after each conversion |", "|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    failed = 0
    for name in names:
        module, scenario, client = SCENARIOS[name]
        test = load(module)
        for target in targets:
            for n in range(a.runs):
                with tempfile.TemporaryDirectory(prefix="kip848-") as tmp:
                    where = a.keep / f"{name}-{target}-{n + 1}" if a.keep else Path(tmp)
                    where.mkdir(parents=True, exist_ok=True)
                    out = TARGETS[target](test, scenario, client, where)
                    lines.append(row(name, target, out))
                print(lines[-1], flush=True)
                failed += any(v["verdict"] != "conforms" for v in verdicts(out).values())
    if a.out:
        a.out.write_text(PAGE.format(rows="\n".join(lines)))
    return 1 if failed else 0


PAGE = """# KIP-848 on Kafka 4.4.0 and on `rebalance serve`, side by side

Generated by `python benchmarks/kip848_runs.py --out docs/oracle/kip848-side-by-side.md`
(outside CI; CI runs each scenario once per target in its `interop` and `kafka` suites:
tests/test_interop_kip848.py, tests/test_migration_online.py). Each run is played by real
clients through `rebalance proxy`; the verdicts are `rebalance conform`'s: the coordinator side
on the recorded trace (KIP-848's K rules, the migration's M rules), the members side (each
client's reconciliation replayed through model/consumer_group/membership.py, K11-K15) and the
clients side (no partition owned by two clients at once, from the clients' own logs). The
Java consumer's members side may diverge at K11 alone: finding K-F4 (docs/kip848.md), when its
auto-commit falls between its fencing and its rejoin.

{rows}
"""


if __name__ == "__main__":
    sys.exit(main())
