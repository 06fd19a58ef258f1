"""Startup of ``rebalance.testing``'s cluster (issue 19 item 4): from the fixture's
call (``Cluster(...)``, what the ``kafka_cluster`` fixture does) to a client's
first successful Metadata response (librdkafka: ``list_topics`` of one topic),
in-process and as a ``rebalance serve`` subprocess. Goal: well under 1 s.

Prints the median and the worst of ``--runs`` runs of each, in ms.

Usage: python benchmarks/startup.py [--runs 10]
"""
from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka.admin import AdminClient

from rebalance.testing import Cluster


def startup(subprocess: bool = False, runs: int = 10) -> list:
    """``runs`` times (s) from ``Cluster({"t": 4})`` to librdkafka's first Metadata
    response naming topic t."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        with Cluster({"t": 4}, subprocess=subprocess, trace=False) as cluster:
            metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("t", timeout=10)
            times.append(time.perf_counter() - t0)
            assert len(metadata.topics["t"].partitions) == 4
    return times


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args()
    for mode, sub in (("in-process", False), ("subprocess", True)):
        times = startup(sub, args.runs)
        print(f"{mode}: fixture call to first Metadata response: median {statistics.median(times) * 1000:.0f} ms, "
              f"worst {max(times) * 1000:.0f} ms ({args.runs} runs)")
