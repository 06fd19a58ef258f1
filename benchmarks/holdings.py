"""Where each owner of ``rebalance check --workers N`` holds its memory (issue 44):
at the end of each owner's exploration, the bytes reachable from each of the
engine's structures, per owner, and their sum over the owners. Run it at two
values of N: a structure whose sum grows with N is one the owners hold twice
(the Group and Proc values an owner meets, and the memos keyed by them), one
whose sum stays is split among them (the visited set, the parent links).

A structure's bytes are those of the objects reachable from it (``sys.getsizeof``
of each object, ``nbytes`` of each numpy array that owns its data) and not
counted before it, in this order: the interned Group and Proc values
(checker/engines/interning.py ``Interner``), the interner's dictionaries, the
visited set (``FingerprintSet``), the parent links, then the attributes of the
``System`` (its handler memos and the refinement check's), of the level's
``Level`` (the expansion's and renaming's tables), of ``Steps`` (the invariants)
and of ``Components`` (the component dictionary). Beside them, the owner's
proportional set size (scaling.py ``tree_pss``: ``/proc/PID/smaps_rollup``;
Linux) as its exploration ends, before the walk (not its peak, which falls
within a level): what the sum leaves out is the interpreter's own pages and the
allocators' free and fragmented space.

    python benchmarks/holdings.py examples/default.toml --partitions 16 --workers 2
    python benchmarks/holdings.py examples/default.toml --partitions 16 --workers 8

Every argument goes to ``rebalance check`` (``--json`` and a temporary ``--out``
are added; ``--workers N``, N of 2 or more, is needed: without it the script
stops with an error, exit status 2); each owner writes its line to stderr, and
the driver the table of sums once they have exited.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import types
from collections import defaultdict
from pathlib import Path

import numpy as np

from rebalance.checker.engines import workers

sys.path.insert(0, str(Path(__file__).parent))
from scaling import tree_pss  # noqa: E402 - the same PSS reading as the scaling table

SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def reachable_bytes(root, seen: set) -> int:
    """Bytes of the objects reachable from ``root`` not in ``seen`` (ids), which it extends."""
    total, stack = 0, [root]
    while stack:
        x = stack.pop()
        if id(x) in seen or isinstance(x, SKIP):
            continue
        seen.add(id(x))
        if isinstance(x, np.ndarray):
            total += x.nbytes if x.base is None else 0
            continue
        total += sys.getsizeof(x)
        if isinstance(x, (tuple, list, set, frozenset)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.keys()), stack.extend(x.values())
        elif hasattr(x, "__dict__"):
            stack.extend(vars(x).values())
    return total


def ranked(mb: dict) -> list:
    """``(structure, MB)`` pairs of 0.5 MB or more, largest first."""
    return sorted(((name, x) for name, x in mb.items() if x >= 0.5), key=lambda item: -item[1])


def holdings(answer: dict, kept: tuple) -> dict:
    """MB per structure of one owner, in the order the module docstring gives."""
    system, interner, level, stepping, components, visited = kept
    holders = (("system", system), ("level", level), ("steps", stepping), ("components", components))
    seen = {id(interner), *(id(holder) for _, holder in holders)}  # their references to each other end a walk
    parts = {"groups": interner.groups, "procs": interner.procs,
             "interner's dicts": (interner._group_ids, interner._proc_ids), "visited set": visited}
    out = {name: reachable_bytes(x, seen) for name, x in parts.items()}
    out["parent links"] = sum(len(b) for b in answer["links"])
    for who, holder in holders:
        for name, x in vars(holder).items():
            out[f"{who}.{name}"] = reachable_bytes(x, seen)
    return {name: b / 2 ** 20 for name, b in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(prog="holdings.py", add_help=False)  # --workers alone; the rest is check's
    ap.add_argument("--workers", type=int, default=0)
    if ap.parse_known_args()[0].workers < 2:
        ap.error("it measures the owners of --workers N: give --workers with N of 2 or more")
    explore_owner = workers._explore
    lines = tempfile.TemporaryDirectory(prefix="holdings-")  # each owner's line, for the driver's sums

    def owner(job, mesh, report, keep, edges):
        answer = explore_owner(job, mesh, report, keep, edges)
        pss = tree_pss(os.getpid()) / 2 ** 20  # before the walk, whose own table of the objects seen is large
        mb = holdings(answer, keep[-1])
        top = ", ".join(f"{name} {x:.1f}" for name, x in ranked(mb))
        print(f"[owner {mesh.me}] {pss:.0f} MB PSS, {sum(mb.values()):.1f} MB counted: {top}",
              file=sys.stderr, flush=True)
        with open(os.path.join(lines.name, f"{mesh.me}.json"), "w") as f:
            json.dump({"pss": pss, "mb": mb}, f)
        return answer
    workers._explore = owner
    from rebalance.cli import main as rebalance
    with lines, tempfile.TemporaryDirectory() as out:
        sys.argv = ["rebalance", "check", *sys.argv[1:], "--json", "--out", out]
        try:
            rebalance(standalone_mode=False)
        finally:
            owners = [json.loads(f.read_text()) for f in sorted(Path(lines.name).iterdir())]
            if owners:
                total: dict = defaultdict(float)
                for o in owners:
                    for name, x in o["mb"].items():
                        total[name] += x
                print(f"\n{len(owners)} owners, summed MB (counted {sum(total.values()):.0f}, "
                      f"PSS {sum(o['pss'] for o in owners):.0f}):", file=sys.stderr)
                for name, x in ranked(total):
                    print(f"  {x:8.1f}  {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
