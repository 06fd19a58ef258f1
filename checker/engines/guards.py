"""Guards on a check: limits on wall time and memory that stop an exploration
(exit 3, with the figures reached), and an up-front estimate of whether a
configuration is within the machine's reach at all.

TLC stops on ``-maxSetSize`` and its fingerprint set's memory; this checker keeps
every distinct state, so memory is what ends a run that is beyond reach.
"""
from __future__ import annotations

import ctypes
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


_LIBC = ctypes.CDLL(None)
_MALLOC_TRIM = getattr(_LIBC, "malloc_trim", None)  # glibc's; absent elsewhere
_MALLOPT = getattr(_LIBC, "mallopt", None)
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
ANALYSIS_MMAP_THRESHOLD = 32 * 1024  # bytes: the liveness analysis's 64k-element chunk masks and above
LARGE_RUN_STATES = 1 << 20  # distinct states from which an exploration maps only blocks of a MiB or more


def exploration_mmap_threshold(distinct: int) -> int:
    """The mapping threshold (bytes, ``map_large_blocks``) for an exploration that
    has found ``distinct`` states so far: 64 KiB, and 1 MiB from
    ``LARGE_RUN_STATES`` on, where the few MB more that the heap then keeps are
    under 10 bytes a state."""
    return 1 << 20 if distinct >= LARGE_RUN_STATES else 64 * 1024


def map_large_blocks(threshold: int) -> None:
    """Serve every C heap block of ``threshold`` bytes or more from a mapping of its
    own, handed back to the system when it is freed (glibc ``mallopt``
    ``M_MMAP_THRESHOLD``; a no-op without glibc). Process-wide; the engines call it
    as a run starts and at each level's end, with
    ``exploration_mmap_threshold``, and the local engine again before its
    liveness analysis, with ``ANALYSIS_MMAP_THRESHOLD``.

    Left to itself, glibc raises the threshold each time such a block is freed (up
    to 32 MB), so that later arrays come from the heap, where freed ones stay
    resident until a trim (``release_free_heap``). A mapping costs system time
    instead: the kernel zero-fills each page on first touch and unmaps it on
    free. The exploration's threshold weighs the two. On the main job (492,020
    states) a threshold of 32 KiB cost a quarter of its CPU time (5.1 CPU-s, of
    which 1.5 system); 64 KiB gives 4.5 CPU-s at 95 bytes a state of peak RSS
    growth, while 1 MiB gives 3.8 CPU-s but 113 bytes, the heap keeping some 9 MB
    more. At `--partitions 16` (3,510,506 states), 1 MiB from the start took the
    run from 49.4 to 41.9 s (system time 11.4 -> 2.7 s) for 11 MB more (574 ->
    585 MB), and `--workers 2` from 37.8 to 30.8 s; switching at
    ``LARGE_RUN_STATES``, 44.7 s at 569 MB, and 33.7 s. The liveness analysis is the other way
    round: at glibc's initial 128 KiB it kept about 9 MB of its chunks'
    temporaries resident and made the run's peak, while at 32 KiB, which maps its
    64 KB chunk masks too, it stays below the exploration's. Fixing the threshold
    fixes the heap's trim threshold too (glibc mallopt(3))."""
    if _MALLOPT is not None:
        _MALLOPT(_M_MMAP_THRESHOLD, threshold)


def release_free_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``; a
    no-op without glibc). The engines call it at the end of each breadth-first
    level and before the liveness analysis: the visited set and each level's
    candidates are numpy arrays allocated afresh every level, and the many blocks
    below ``map_large_blocks``'s threshold that a level frees leave free pages
    inside the heap, which stay resident otherwise (the main job's exploration
    about 1 MB lower with the threshold at 32 KiB, 3 MB at 128 KiB, 12 MB with it
    left dynamic; no measurable CPU cost)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


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
# `rebalance check --json`). All five faults: 2x2 budget 1 429, 2 17,126, 3 436,406; 3x2 budget 2 216,635,
# 3x3 300,731, 3x4 492,020 (42.8 s, 442 MB peak); 3x4 budget 1 4,846. crash,restart,pause, 2x2: budget 1 320,
# 2 5,348, 3 28,352, 4 75,340. Without pause, 3x4: budget 1 1,608, budget 2 37,324, 4x4 budget 2 214,151
# (issue 17); join,leave only, 3x4 budget 2 27,263; crash,restart only, 2x2: budget 2 185, 3 483, 4 765;
# all five, 3x4 budget 3 28,033,546 (2026-11-27: 180 s, 1.45 GB peak).
# So: about x11 per client slot, x1.4 per partition, and per unit of budget a factor that shrinks as the
# budget grows (the faults left can only be spent in fewer places): the u-th unit multiplies by
# FIRST x SHRINK^(u-1), per class of faults. A run does 35,000 to 150,000 states per second by machine
# (the main job: 36,729 on the slower 2-core machine of 2026-11-26, 93,193 on that of 2026-11-27; 3x4
# budget 3: 148,000 to 165,000) and keeps about 100 bytes per state (the main job 93 to 95, 3x4 budget 3
# 54; the deferred protocol's churn search about 1,000: 4x4 budget 2, 526 MB for 588,603 states); the
# estimate takes the slower machine's rate.
BASE_STATES = 2.5  # 2 members + 1 joiner, 2 partitions, budget 0
PER_SLOT, PER_PARTITION = 11.0, 1.4
# fault class -> (FIRST, SHRINK)
PER_BUDGET = {"pause and membership churn": (172.0, 0.45), "pause": (128.0, 0.2),
              "crash and restart only": (5.0, 1.0), "other": (23.0, 1.0)}
STATES_PER_SECOND = 35_000
BYTES_PER_STATE = {"deferred": 1_000}
DEFAULT_BYTES_PER_STATE = 100
REACH_SECONDS = 3_600  # beyond an hour, a run is out of reach without --max-seconds saying otherwise


def _fault_class(faults: set) -> str:
    if "pause" in faults:
        return "pause and membership churn" if faults & {"join", "leave"} else "pause"
    return "crash and restart only" if faults <= {"crash", "restart"} else "other"


def estimate_states(members: int, joiners: int, partitions: int, faults, budget: int) -> float:
    """A rough count of the distinct states a full check explores (within 10x on the
    calibration runs above): the calibration's fit, log-linear in client slots and
    partitions, with a per-budget factor that shrinks as the budget grows."""
    faults = set(faults)
    states = BASE_STATES * PER_SLOT ** (members + joiners - 3) * PER_PARTITION ** (partitions - 2)
    if faults:
        first, shrink = PER_BUDGET[_fault_class(faults)]
        for unit in range(budget):
            states *= first * shrink ** unit
    return states


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
