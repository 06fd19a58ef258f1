"""The seeds' situations as simulation scripts (seed 000, "Motivation" and the
Design II examples; KIP-345's rolling bounce; KIP-429's scaling examples).

``script(name, rng, members)`` returns ``((time_ms, action, slot), ...)`` for
checker/simulation.py, drawn from ``rng`` (a ``random.Random``): times are ms from
the moment the group has settled, slots ``0..members-1`` are the initial
processes and ``members, members+1, ...`` new ones.

* ``rolling_bounce``: every process in turn is stopped gracefully and started
  again 5–15 s later (a deploy); the next goes 10–20 s after it is back
  (Kubernetes waiting for readiness).
* ``process_death``: one process is killed (no LeaveGroup) and Kubernetes
  restarts it 5–60 s later — sometimes within session.timeout.ms, sometimes not.
* ``scale_up``: a quarter more processes (at least one) start within 2 s.
* ``scale_down``: a quarter of the processes (at least one) stop within 2 s.
* ``host_swap``: one process stops for good and a new one, on another host
  (another slot, so another group.instance.id), starts 5–20 s later.
"""
from __future__ import annotations

import random

S = 1_000  # ms


def _rolling_bounce(rng: random.Random, members: int) -> list:
    out, t = [], 0
    for slot in range(members):
        down = rng.randint(5 * S, 15 * S)
        out += [(t, "stop", slot), (t + down, "start", slot)]
        t += down + rng.randint(10 * S, 20 * S)
    return out


def _process_death(rng: random.Random, members: int) -> list:
    slot = rng.randrange(members)
    return [(0, "crash", slot), (rng.randint(5 * S, 60 * S), "start", slot)]


def _scale_up(rng: random.Random, members: int) -> list:
    return [(rng.randint(0, 2 * S), "start", members + i) for i in range(max(1, members // 4))]


def _scale_down(rng: random.Random, members: int) -> list:
    return [(rng.randint(0, 2 * S), "stop", slot) for slot in rng.sample(range(members), max(1, members // 4))]


def _host_swap(rng: random.Random, members: int) -> list:
    return [(0, "stop", rng.randrange(members)), (rng.randint(5 * S, 20 * S), "start", members)]


SITUATIONS = {
    "rolling_bounce": _rolling_bounce,
    "process_death": _process_death,
    "scale_up": _scale_up,
    "scale_down": _scale_down,
    "host_swap": _host_swap,
}


def script(name: str, rng: random.Random, members: int) -> tuple:
    """The script of situation ``name``, sorted by time. Raises KeyError for an unknown name."""
    return tuple(sorted(SITUATIONS[name](rng, members)))
