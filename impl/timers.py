"""The coordinator's timers on the event loop, shared by the classic and the consumer
group runtimes (impl/coordinator.py, impl/consumer_group.py): a timer that comes due
runs its step only once the connections that have bytes delivered have read and
stepped them (``Coordinator.settle``), unless one of them restarted or cancelled it
(Kafka expires a member only when its heartbeat truly did not arrive)."""
from __future__ import annotations

import asyncio


class SettledTimers:
    """Mixed into a group runtime that has ``server`` (the Coordinator), ``timers``
    ({key: asyncio handle or future}) and ``step(event)``."""

    def _arm_after(self, key, timer, delay_s: float) -> None:
        """Start (or restart) timer ``key``: ``step(timer)`` after ``delay_s`` seconds."""
        if key in self.timers:
            self.timers[key].cancel()
        self.timers[key] = asyncio.get_running_loop().call_later(delay_s, self._fire, key, timer)

    def _fire(self, key, timer) -> None:
        due = self.timers[key] = asyncio.ensure_future(self.server.settle())
        due.add_done_callback(lambda f: self._due(key, timer, f))

    def _due(self, key, timer, due) -> None:
        if due.cancelled() or self.timers.get(key) is not due:
            return
        del self.timers[key]
        self.step(timer)

    def close(self) -> None:
        for handle_ in self.timers.values():
            handle_.cancel()
