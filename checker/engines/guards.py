"""Guards on a check: limits on wall time and memory that stop an exploration
(exit 3, with the figures reached), and an up-front estimate of whether a
configuration is within the machine's reach at all.

TLC stops on ``-maxSetSize`` and its fingerprint set's memory; this checker keeps
every distinct state, so memory is what ends a run that is beyond reach.
"""
from __future__ import annotations

import os
import resource
import time

from rebalance.model.protocol import MAX_SLOTS

PAGE = os.sysconf("SC_PAGE_SIZE")
PHYSICAL_MB = os.sysconf("SC_PHYS_PAGES") * PAGE // 2**20
# Default --max-memory: 80% of physical memory. Every distinct state stays in memory, so a run beyond
# reach only ends when memory does; stopping at 80% ends it with exit 3 and its figures instead of the
# kernel's OOM killer (or swapping the machine to a standstill), while any run that fits is untouched.
DEFAULT_MAX_MEMORY_MB = PHYSICAL_MB * 4 // 5
# The most client slots (members + joiners) a check accepts. Settling the initial state alone grows as
# about slots^3 in time and slots^2.4 in memory (measured: 100 slots 0.6 CPU-s and 43 MB, 300 slots 14 CPU-s
# and 578 MB), and the model's ids hold MAX_SLOTS (1024) slots at most: ``--members 2000`` is refused.
MAX_CHECK_SLOTS = 256
assert MAX_CHECK_SLOTS <= MAX_SLOTS


def rss_mb() -> float:
    """This process's resident set now, MB (Linux /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def peak_rss_mb() -> float:
    """This process's peak resident set so far, MB (getrusage: ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Guard:
    """Stops a run past ``max_seconds`` (wall seconds since the guard was built) or
    ``max_memory_mb`` (resident set, MB); None: no limit. ``exceeded()`` returns the
    limit hit, as ``Result.limit`` names it (e.g. "max_seconds 60"), or None."""

    def __init__(self, max_seconds: float | None = None, max_memory_mb: float | None = None):
        self.max_seconds = max_seconds
        self.max_memory_mb = max_memory_mb
        self.t0 = time.perf_counter()

    def exceeded(self) -> str | None:
        if self.max_seconds is not None and time.perf_counter() - self.t0 > self.max_seconds:
            return f"max_seconds {self.max_seconds:g}"
        if self.max_memory_mb is not None and rss_mb() > self.max_memory_mb:
            return f"max_memory {self.max_memory_mb:g} MB"
        return None


# The estimate, calibrated on measured full checks (cooperative, one joiner; the states counted by
# `rebalance check --json`, on this 2-core machine). All five faults, budget 2: 2x2 17,126, 2x4 31,343, 3x2
# 216,635, 3x3 300,731, 3x4 492,020 states (42.8 s, 442 MB peak); 3x4 budget 1 4,846. Without pause, 3x4:
# budget 1 1,608, budget 2 37,324, 4x4 budget 2 214,151 (issue 17); join,leave only, 3x4 budget 2 27,263;
# crash,restart only, 2x2: budget 2 185, 3 483, 4 765. So: about x11 per client slot, x1.4 per partition, and
# per unit of budget x100 with the pause fault, x5 with crash and restart only, x23 otherwise. A run does
# about 11,500 states per second and keeps about 1,000 bytes per state (the deferred protocol about 5,000).
BASE_STATES = 2.5  # 2 members + 1 joiner, 2 partitions, budget 0
PER_SLOT, PER_PARTITION = 11.0, 1.4
PER_BUDGET_PAUSE, PER_BUDGET_CRASH_RESTART, PER_BUDGET = 100.0, 5.0, 23.0
STATES_PER_SECOND = 11_500
BYTES_PER_STATE = {"deferred": 5_000}
DEFAULT_BYTES_PER_STATE = 1_000
REACH_SECONDS = 3_600  # beyond an hour, a run is out of reach without --max-seconds saying otherwise


def estimate_states(members: int, joiners: int, partitions: int, faults, budget: int) -> float:
    """A rough count of the distinct states a full check explores (within 10x on the
    calibration runs above): the calibration's log-linear fit."""
    faults = set(faults)
    per_budget = (PER_BUDGET_PAUSE if "pause" in faults else
                  PER_BUDGET_CRASH_RESTART if faults <= {"crash", "restart"} else PER_BUDGET)
    return (BASE_STATES * PER_SLOT ** (members + joiners - 3) * PER_PARTITION ** (partitions - 2)
            * (per_budget if faults else 1.0) ** budget)


def reach_warning(settings, max_seconds: float | None, max_memory_mb: float | None) -> str | None:
    """A warning when ``settings`` (checker/settings.py CheckSettings) is beyond what
    this machine can explore: the estimated states take longer than ``max_seconds``
    (default an hour) or more memory than ``max_memory_mb``; None when within reach."""
    g = settings.group
    states = estimate_states(settings.members, settings.joiners, g.num_partitions, settings.faults,
                             settings.budget)
    if settings.max_states:
        states = min(states, settings.max_states)
    seconds = states / STATES_PER_SECOND
    mb = states * BYTES_PER_STATE.get(g.protocol, DEFAULT_BYTES_PER_STATE) / 2**20
    over = []
    if seconds > (max_seconds or REACH_SECONDS):
        over.append(f"about {seconds:,.0f} s")
    if max_memory_mb is not None and mb > max_memory_mb:
        over.append(f"about {mb:,.0f} MB (limit {max_memory_mb:,.0f} MB)")
    if not over:
        return None
    return (f"this configuration is likely beyond exhaustive reach: an estimated {states:.2g} distinct states, "
            f"{' and '.join(over)}; random walks check its safety properties on deep executions instead "
            f"(--walks N --depth D)")
