"""How ``rebalance check`` reports an exploration while it runs (issue 41 item 7).

On a terminal: rich's transient live line. Off a terminal (CI logs): a plain line on stderr
every ``INTERVAL_S`` seconds, as TLC prints one every minute, from a daemon thread, so that a
long level or the liveness analysis (which reports nothing until it ends) still shows the
run alive::

    progress 40 s: exploring, 1,234,567 states, 4,567,890 transitions, depth 61, queue 80,123, 30,864 states/s

With ``--checkpoint`` or ``--resume``, each line ends with the last checkpoint written
(``, checkpoint at depth D (N states) written S s ago in T s``).

The engines call ``update(distinct, transitions, frontier, depth)`` after each
breadth-first level, and with ``phase="liveness"`` when the liveness analysis starts
(checker/engines/explore.py); ``enter(phase)`` names what the command does next.
"""
from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

INTERVAL_S = 20.0  # at most this long between two lines off a terminal (the issue asks for 30)


class Reporter:
    """Context manager; ``update`` is the engines' ``progress`` callback."""

    def __init__(self, console: Console, interval_s: float = INTERVAL_S, checkpoint=None):
        self.console, self.interval_s = console, interval_s
        self.checkpoint = checkpoint  # checker/engines/checkpoint.py Checkpoint, or None
        self.figures = (0, 0, 0, 0)
        self.phase = "exploring"
        self._t0 = time.perf_counter()
        self._last = (self._t0, 0)  # the time and distinct states of the previous line
        self._stop = threading.Event()
        self._live = None

    def __enter__(self) -> Reporter:
        if self.console.is_terminal:
            self._live = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                  console=self.console, transient=True)
            self._live.__enter__()
            self._task = self._live.add_task(self.phase, total=None)
        else:
            threading.Thread(target=self._tick, name="progress", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, distinct: int, transitions: int, frontier: int, depth: int, phase: str | None = None) -> None:
        self.figures = (distinct, transitions, frontier, depth)
        self.phase = phase or self.phase
        if self._live is not None:
            self._live.update(self._task, description=self._text(time.perf_counter(), since_start=True))

    def enter(self, phase: str) -> None:
        """What runs from now on: exploring, liveness, counterexamples."""
        self.phase = phase
        if self._live is not None:
            self._live.update(self._task, description=self._text(time.perf_counter(), since_start=True))

    def _text(self, now: float, since_start: bool = False) -> str:
        distinct, transitions, frontier, depth = self.figures
        then, before = (self._t0, 0) if since_start else self._last
        rate = (distinct - before) / max(now - then, 1e-9)
        line = (f"{self.phase}, {distinct:,} states, {transitions:,} transitions, depth {depth}, "
                f"queue {frontier:,}, {rate:,.0f} states/s")
        last = self.checkpoint.last if self.checkpoint is not None else None
        if last is not None:
            at, states, took, when = last
            line += (f", checkpoint at depth {at} ({states:,} states) written {now - when:.0f} s ago "
                     f"in {took:.2f} s" if took is not None else
                     f", resumed from the checkpoint at depth {at} ({states:,} states)")
        return line

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            now = time.perf_counter()
            self.console.print(f"progress {now - self._t0:.0f} s: {self._text(now)}", highlight=False,
                               markup=False, soft_wrap=True)
            self._last = (now, self.figures[0])
