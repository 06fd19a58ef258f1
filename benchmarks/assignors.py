"""The leader's assignors (model/assignors.py) at production scale, in CPU seconds
(time.process_time): a Stable group of N - 1 members, each owning a contiguous
share of the partitions at generation 1, and one member joining with nothing.

Prints one row per size, members x partitions, with the CPU seconds of ``range``,
``roundrobin``, ``sticky`` (eager) and ``cooperative-sticky`` (cooperative: the
joiner's share is withheld this round, R23). Issue 17 item 9's target:
cooperative-sticky at 1,000 x 100,000 in under 1 CPU-second.

Usage: python benchmarks/assignors.py [--sizes 100x10000,300x30000,1000x100000]
"""
from __future__ import annotations

import argparse
import time

from rebalance.model.assignors import assign
from rebalance.model.config import GroupConfig
from rebalance.model.protocol import EMPTY_SUBSCRIPTION, Subscription, member_id

ASSIGNORS = (("range", "eager"), ("roundrobin", "eager"), ("sticky", "eager"), ("cooperative-sticky", "cooperative"))


def joining(members: int, partitions: int) -> tuple:
    """The JoinGroup member list: ``members - 1`` owners of contiguous shares (the
    first ``partitions mod (members - 1)`` one larger), then the joiner."""
    owners = members - 1
    per, extra = divmod(partitions, owners)
    out, start = [], 0
    for i in range(owners):
        size = per + (i < extra)
        out.append((member_id(i + 1, 1), 0, Subscription(((1 << size) - 1) << start, 1)))
        start += size
    return tuple(out) + ((member_id(members, 1), 0, EMPTY_SUBSCRIPTION),)


def size(text: str) -> tuple:
    members, partitions = text.lower().split("x")
    if int(members) < 2 or int(partitions) < 1:
        raise argparse.ArgumentTypeError(f"size {text!r}: need at least 2 members and 1 partition")
    return int(members), int(partitions)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100x10000,300x30000,1000x100000",
                    type=lambda s: [size(x) for x in s.split(",")], help="members x partitions, comma-separated")
    args = ap.parse_args()
    print(f"{'members x partitions':>22} " + " ".join(f"{name:>19}" for name, _ in ASSIGNORS) + "   (CPU-s)")
    for members, partitions in args.sizes:
        group = joining(members, partitions)
        cells = []
        for assignor, protocol in ASSIGNORS:
            cfg = GroupConfig(topics=(("t", partitions),), protocol=protocol, assignor=assignor)
            start = time.process_time()
            assign(cfg, group)
            cells.append(time.process_time() - start)
        print(f"{members:>10,} x {partitions:>9,} " + " ".join(f"{c:>19.3f}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
