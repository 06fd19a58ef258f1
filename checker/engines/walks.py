"""Random walks: TLC's simulation mode, for configurations beyond exhaustive reach.

Each walk starts at the checker's initial state (``System.initial``) and takes up
to ``depth`` steps, each chosen uniformly among the enabled transitions of
``System.successors``, the same successor function the exhaustive engines use.
Every safety property is checked along the way, as ``explore.explore`` checks it:
the invariants on every state, the step checks (refinement among them) on every
step, the quiescent properties on every state where nothing but the environment
can move. Liveness properties need the whole graph and are not checked; nor are
the properties the configuration expects violated (``expect_violated``).

Walk ``i`` draws from ``random.Random(f"{seed}/{i}")`` (string seeds go through
SHA-512: the same in every process and Python run), so a walk depends on the seed
and its index only: the same seed gives the same walks, verdict and
counterexample on any engine and any number of workers. The run stops at the
first walk (by index) that violates a property; its violation is already the
shortest violating prefix of that walk (every step is checked), and is then
shortened further by dropping steps while the rest still replays (each step
matched by its fairness class: the same action of the same actor) and violates
the same property (``shorten``).
"""
from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass, field

from .explore import UNFAIR_KINDS, Violation, fairness_class
from ..properties import PROPERTIES
from ..system import System, build

SHORTEN_SECONDS = 30.0  # the most a shortening spends replaying candidates
SPARK_BATCH = 64  # walks per Spark job: the run stops at the end of the batch holding a violation


class Checks:
    """The safety checks a walk makes: ``names`` of applicable properties, less
    the liveness ones and those in ``skip`` (expected violated)."""

    def __init__(self, names):
        names = frozenset(names)  # any iterable: a generator is read once
        props = [p for p in PROPERTIES if p.name in names and p.kind != "liveness"]
        self.names = tuple(p.name for p in props)
        self.state = [(p.name, p.invariant) for p in props if p.invariant]
        self.step = [(p.name, p.step) for p in props if p.kind == "invariant" and p.step]
        self.quiescent = [(p.name, p.check) for p in props if p.kind == "quiescent"]


def checked_names(properties, expected=frozenset()) -> tuple:
    """The names of the properties a walk checks, in ``properties``' order."""
    return tuple(p.name for p in properties if p.kind != "liveness" and p.name not in expected)


def run(system: System, checks: Checks, initial, pick, depth: int) -> tuple:
    """Follow ``pick(i, successors) -> index | None`` from ``initial`` for up to
    ``depth`` steps, checking along the way. Returns ``(path, choices, violation,
    followed)``: ``path`` ``[(Action | None, State), ...]`` up to the first
    violation, the successor indices chosen, ``(property, reason)`` or None, and
    False if ``pick`` gave None (a replay that could not follow)."""
    path, choices, state = [(None, initial)], [], initial
    for name, check in checks.state:
        why = check(system, initial)
        if why:
            return path, choices, (name, why), True
    for i in range(depth + 1):
        succ = system.successors(state)
        if checks.quiescent and not any(a.kind not in UNFAIR_KINDS and n != state for a, n in succ):
            for name, check in checks.quiescent:
                why = check(system, state)
                if why:
                    return path, choices, (name, why), True
        if i == depth or not succ:
            break
        k = pick(i, succ)
        if k is None:
            return path, choices, None, False
        action, nxt = succ[k]
        choices.append(k)
        path.append((action, nxt))
        for name, step in checks.step:
            why = step(system, state, action, nxt)
            if why:
                return path, choices, (name, why), True
        for name, check in checks.state:
            why = check(system, nxt)
            if why:
                return path, choices, (name, why), True
        state = nxt
    return path, choices, None, True


def walk(system: System, checks: Checks, initial, seed: int, index: int, depth: int) -> tuple:
    """Walk ``index`` of ``seed``: ``(steps taken, choices, (property, reason) | None)``."""
    rng = random.Random(f"{seed}/{index}")
    path, choices, bad, _ = run(system, checks, initial, lambda i, succ: rng.randrange(len(succ)), depth)
    return len(path) - 1, choices, bad


def replay_choices(system: System, checks: Checks, initial, choices) -> tuple:
    """The path and violation of a walk from its successor indices."""
    path, _, bad, _ = run(system, checks, initial, lambda i, succ: choices[i], len(choices))
    return path, bad


def replay_classes(system: System, checks: Checks, initial, classes, lenient: bool = False) -> tuple:
    """Follow a sequence of fairness classes (the first successor of each class);
    ``(path, violation)``, or ``(None, None)`` when some step is not enabled.
    ``lenient``: a step not enabled is skipped instead (the path is still an
    execution of the system, of the classes that were enabled)."""
    todo = iter(classes)

    def pick(i, succ):
        for want in todo:
            k = next((k for k, (a, _) in enumerate(succ) if fairness_class(a) == want), None)
            if k is not None or not lenient:
                return k
        return None
    path, _, bad, followed = run(system, checks, initial, pick, len(classes))
    return (path, bad) if followed or (lenient and bad is not None) else (None, None)


def signature(reason: str) -> str:
    """A violation's reason without its names and numbers (member ids, generations,
    partitions, lists of them): what shortening keeps, so that a shorter path shows
    the same violation, not another one of the same property."""
    return re.sub(r"#(, #)+", "#", re.sub(r"\b[A-Z]?\d+\b", "#", reason))


def shorten(system: System, checks: Checks, initial, path: list, bad: tuple, seconds: float = SHORTEN_SECONDS):
    """Drop steps from a ``path`` violating ``bad`` (``(property, reason)``) while
    what is left still replays (``replay_classes``, leniently: a step no longer
    enabled is skipped too) and violates the same property the same way (its
    reason's ``signature``): chunks of half the path, then a
    quarter, ... down to single steps (delta debugging's ddmin, complements
    only), within ``seconds``. Returns ``(path, reason)`` of the shortest found."""
    deadline = time.perf_counter() + seconds
    classes = [fairness_class(a) for a, _ in path[1:]]
    best, reason = path, bad[1]
    want = (bad[0], signature(bad[1]))
    chunk = max(1, len(classes) // 2)
    while chunk >= 1 and time.perf_counter() < deadline:
        i = 0
        while i < len(classes) and time.perf_counter() < deadline:
            candidate = classes[:i] + classes[i + chunk:]
            got, bad = replay_classes(system, checks, initial, candidate, lenient=True)
            if got is not None and bad is not None and (bad[0], signature(bad[1])) == want:
                best, reason = got, bad[1]
                classes = [fairness_class(a) for a, _ in got[1:]]
            else:
                i += chunk
        chunk //= 2
    return best, reason


@dataclass
class WalksResult:
    """The outcome of a walks run: walks finished (up to and including the
    violating one), steps taken, seconds; the violation (shortened) and the
    length of the walk's violating prefix before shortening."""

    walks: int
    steps: int
    seconds: float
    checked: tuple  # property names checked
    violation: Violation | None = None
    prefix_length: int | None = None
    limit: str | None = None
    shorten_seconds: float = 0.0
    per_walk: list = field(default_factory=list)  # steps of each walk, by index


def _outcome(system, checks, initial, outcomes, t0, limit) -> WalksResult:
    """``outcomes``: ``[(index, steps, choices, violation)]`` for walks 0..k in
    order; the result stops at the first violating one (the lowest index)."""
    per_walk, bad_walk = [], None
    for index, steps, choices, bad in outcomes:
        per_walk.append(steps)
        if bad is not None:
            bad_walk = (choices, bad)
            break
    seconds = time.perf_counter() - t0
    result = WalksResult(len(per_walk), sum(per_walk), seconds, checks.names, limit=limit, per_walk=per_walk)
    if bad_walk is not None:
        path, bad = replay_choices(system, checks, initial, bad_walk[0])
        t1 = time.perf_counter()
        short, reason = shorten(system, checks, initial, path, bad)
        result.violation = Violation(bad[0], reason, short)
        result.prefix_length = len(path) - 1
        result.shorten_seconds = time.perf_counter() - t1
        result.limit = None
    return result


def walks_local(system: System, names, walks: int, depth: int, seed: int, guard=None) -> WalksResult:
    """``walks`` walks of up to ``depth`` steps, in index order, in this process;
    ``names``: the properties checked (``checked_names``); ``guard``
    (checker/engines/guards.py) asked between walks."""
    t0 = time.perf_counter()
    checks = Checks(names)
    initial = system.initial()
    outcomes, limit = [], None
    for index in range(walks):
        limit = guard.exceeded() if guard is not None else None
        if limit:
            break
        steps, choices, bad = walk(system, checks, initial, seed, index, depth)
        outcomes.append((index, steps, choices, bad))
        if bad is not None:
            break
    return _outcome(system, checks, initial, outcomes, t0, limit)


_INITIAL: dict = {}  # executor-side cache: system key -> (System, initial state)


def _walk_task(key, names, seed: int, depth: int, index: int) -> tuple:
    """Executor side: walk ``index`` of the system ``key`` (``System.spec``)."""
    hit = _INITIAL.get(key)
    if hit is None:
        system = build(*key)
        hit = _INITIAL[key] = (system, system.initial())
    system, initial = hit
    return (index,) + walk(system, Checks(names), initial, seed, index, depth)


def walks_spark(system: System, names, walks: int, depth: int, seed: int, master: str = "local[*]",
                guard=None) -> WalksResult:
    """The walks as Spark tasks, ``SPARK_BATCH`` per job, one task per walk index
    (the seed is split per index, not per worker: the same walks as
    ``walks_local``); the driver replays and shortens the first violation. Stops
    after the batch holding a violation, or when ``guard`` says so between batches."""
    from ..spark_session import session
    t0 = time.perf_counter()
    spark = session(master)
    key = system.spec
    outcomes, limit = [], None
    try:
        sc = spark.sparkContext
        for start in range(0, walks, SPARK_BATCH):
            limit = guard.exceeded() if guard is not None else None
            if limit:
                break
            indices = list(range(start, min(walks, start + SPARK_BATCH)))
            got = sc.parallelize(indices, min(len(indices), max(2, sc.defaultParallelism))) \
                .map(lambda i: _walk_task(key, names, seed, depth, i)).collect()
            outcomes.extend(sorted(got))
            if any(bad is not None for *_, bad in got):
                break
    finally:
        spark.stop()
    return _outcome(system, Checks(names), system.initial(), outcomes, t0, limit)


def summary(result: WalksResult, properties, expected, walks: int, depth: int, seed: int, files: dict | None) -> dict:
    """The ``--json`` object of a walks run (cli ``check --walks``). Statuses:
    "violated", "not violated" (no walk broke it: not a proof), "not checked"
    (liveness, or expected violated). Verdict: violated (exit 1), incomplete (a
    guard stopped the walks early, exit 3), else holds (exit 0: no walk found a
    violation, TLC's simulation convention)."""
    v = result.violation
    verdict = "violated" if v else ("incomplete" if result.limit else "holds")
    seconds = max(result.seconds, 1e-9)

    def status(p):
        if v is not None and p.name == v.property:
            return "violated"
        return "not violated" if p.name in result.checked else "not checked"
    return {
        "verdict": verdict, "mode": "walks", "seed": seed, "depth": depth, "walks_requested": walks,
        "walks": result.walks, "steps": result.steps, "seconds": round(result.seconds, 3),
        "walks_per_second": round(result.walks / seconds, 2), "steps_per_second": round(result.steps / seconds),
        "limit": result.limit,
        "properties": [{"name": p.name, "kind": p.kind, "status": status(p),
                        "expected": "violated" if p.name in expected else "holds"} for p in properties],
        "counterexample": None if v is None else {
            "property": v.property, "reason": v.reason, "walk": result.walks - 1,
            "walk_prefix_length": result.prefix_length, "length": len(v.path) - 1,
            "shorten_seconds": round(result.shorten_seconds, 3), "files": files},
    }
