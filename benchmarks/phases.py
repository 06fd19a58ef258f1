"""Where each process of a ``rebalance check`` spends its CPU (issue 44): the
CPU seconds (``time.process_time``: user + system of that process, which load on
the machine distorts far less than a sampling profiler's shares when owners
outnumber cores, though busy processes slow each other's memory traffic:
benchmarks/scaling.py ``--control``) spent inside each of the engine's phases, per process.

The phases are functions of checker/engines, each timed on its outermost call
(a phase called from within another counts in the outer one only):

- ``Level.expand``: a batch's successors, their renaming and the step checks;
- ``Steps.invalid``: the invariants of the states reached (Inv once per view);
- ``FingerprintSet.resolve``: the visited set;
- with ``--workers``: ``Components.keys_of`` (the components' stable keys, each
  computed when the component is first sent or placed), ``Components.owners`` (where each state goes),
  ``Components.learn``, ``definitions`` and ``translate`` (the component
  dictionary), ``Mesh.exchange`` and ``allgather`` (without their waits),
  ``_first_seen`` (deduplication), and in the driver ``gather`` (liveness on the
  gathered graph);
- without: ``decide_liveness``.

Each owner prints its line when its exploration ends, the driver (or the one
process) its own at exit, with its whole CPU time beside the phases'; an
owner's line also gives the wall seconds it waited for the others in the
collectives (``Mesh.exchange`` and ``allgather``: their wall less their CPU),
which the owners' uneven shares of each level cost, as they go in lockstep:

    python benchmarks/phases.py examples/default.toml --partitions 16
    python benchmarks/phases.py examples/default.toml --partitions 16 --workers 2

Every argument goes to ``rebalance check`` (``--json`` and a temporary ``--out``
are added); the lines go to stderr.
"""
from __future__ import annotations

import collections
import functools
import os
import sys
import tempfile
import time

from rebalance.checker.engines import explore, interning, level, steps, workers

PHASES = [(level.Level, "expand"), (steps.Steps, "invalid"), (interning.FingerprintSet, "resolve"),
          (workers.Components, "keys_of"), (workers.Components, "owners"), (workers.Components, "learn"),
          (workers.Components, "definitions"), (workers.Components, "translate"), (workers.Mesh, "exchange"),
          (workers.Mesh, "allgather"), (workers, "_first_seen"), (workers, "gather"), (explore, "decide_liveness")]
spent: collections.Counter = collections.Counter()  # phase -> CPU seconds in this process
waited = [0.0]  # wall seconds this owner's collectives (Mesh) spent waiting for the others: their wall less their CPU
_inside = [False]


def timed(owner, name: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its outermost calls' CPU seconds to ``spent``."""
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _inside[0]:
            return fn(*args, **kwargs)
        _inside[0] = True
        t, wall = time.process_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            cpu = time.process_time() - t
            spent[f"{getattr(owner, '__name__', '').rpartition('.')[2]}.{name}"] += cpu
            if owner is workers.Mesh:
                waited[0] += time.perf_counter() - wall - cpu
            _inside[0] = False
    setattr(owner, name, wrapper)


def line(who: str) -> str:
    phases = ", ".join(f"{name} {s:.1f}" for name, s in spent.most_common() if s >= 0.05)
    waits = f", waited {waited[0]:.1f} s" if spent["Mesh.exchange"] or spent["Mesh.allgather"] else ""
    return f"[{who} {os.getpid()}] {time.process_time():.1f} CPU-s{waits}: {phases}"


def main() -> None:
    for owner, name in PHASES:
        timed(owner, name)
    explore_owner = workers._explore

    def owner(job, mesh, *args):
        try:
            return explore_owner(job, mesh, *args)
        finally:
            print(line(f"owner {mesh.me}"), file=sys.stderr, flush=True)
    workers._explore = owner
    from rebalance.cli import main as rebalance
    with tempfile.TemporaryDirectory() as out:
        sys.argv = ["rebalance", "check", *sys.argv[1:], "--json", "--out", out]
        try:
            rebalance(standalone_mode=False)
        finally:
            print(line("driver" if "--workers" in sys.argv else "one process"), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
