"""KIP-848's historical bugs as mutations, each with its shortest counterexample: the
history table of docs/kip848.md, generated (never typed).

For every consumer-protocol mutation of model/mutations.py, explored (breadth first, so
each counterexample is a shortest one) in the configuration tests/test_kip848_check.py's
mutation matrix gives it, and, if no property breaks there, held to
`rebalance prove --protocol consumer`'s obligations, and if none fails, named by the Kafka
trace that pins its rule (tests/test_conform_kafka_traces.py's FIXES); prints a Markdown table row per
mutation (one with several rows in the matrix, untimed and timed, is shown in the first that catches it, a
timed one marked "timed"): the JIRA (or PR),
the Kafka versions, the mutation, each property it breaks with the length of its
shortest counterexample (steps), the distinct states and the CPU seconds, then the
machine and the date.

Usage: python benchmarks/kip848_history.py [--all]   (--all: the test-only mutations too)
"""
from __future__ import annotations

import argparse
import platform
import time
from datetime import date

from rebalance.checker import consumer_prove
from rebalance.checker.engines.explore import explore
from rebalance.checker.properties import applicable
from rebalance.model.mutations import REGISTRY

from from_tests import load



def matrix() -> list:
    """tests/test_kip848_check.py's FAST + SLOW: ``[(mutations, configuration, violated)]``."""
    module = load("test_kip848_check")
    return module, module.FAST + module.SLOW


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="the test-only mutations too")
    args = parser.parse_args()
    module, rows = matrix()
    fixes = load("test_conform_kafka_traces").FIXES  # model fixes a recorded Kafka trace pins
    print("| bug | Kafka versions | mutation | caught by (shortest counterexample, steps) | states | CPU s |")
    print("| --- | --- | --- | --- | --- | --- |")
    shown = set()
    for i, (mutations, config, _) in enumerate(rows):
        if len(mutations) != 1 or mutations[0] in shown:
            continue
        m = REGISTRY[mutations[0]]
        if m.test_only and not args.all:
            continue
        settings = module.settings_of(mutations, config)
        system = settings.system()
        t0 = time.process_time()
        result = explore(system, applicable(system))
        cpu = time.process_time() - t0
        expected = settings.expect_violated
        caught = ", ".join(f"{v.property} ({len(v.path) - 1})" for v in result.violations
                           if v.property not in expected)
        if not caught and any(mutations == later for later, _, _ in rows[i + 1:]):
            continue  # its next row (timed, say) may catch it
        shown.add(m.name)
        if caught and settings.timing is not None:
            caught += "; timed"
        if not caught:  # what the bounded check cannot reach, `rebalance prove --protocol consumer` may
            proofs = [ob.name.split(":")[0] for ob in consumer_prove.obligations(4, 6, frozenset(mutations))
                      if ob.status == "counterexample"]
            caught = ", ".join(f"prove: {name} (one step)" for name in proofs) or \
                ", ".join(f"conform: Kafka 4.4.0's trace {trace} diverges at {rule}" for trace, name, rule in fixes
                          if name == m.name) or "nothing"
        bug = m.jira or ("test-only" if m.test_only else m.source.split(":")[0])
        print(f"| {bug} | {m.versions or '—'} | `{m.name}` | {caught} | {result.distinct_states:,} | {cpu:.1f} |")
    print(f"\n{platform.node()} ({platform.processor() or platform.machine()}, Python {platform.python_version()}), "
          f"{date.today().isoformat()}; benchmarks/kip848_history.py")


if __name__ == "__main__":
    main()
