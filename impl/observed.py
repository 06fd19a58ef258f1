"""Writing an observed log (spec/OBSERVED.md): what one application saw of its
group, for ``rebalance conform --side clients``.

``ObservedLog(target, member)``: ``target`` is a path or a text stream (the
interop agents' stdout: the header is then the reader's business); ``begin(topics)``
opens a path for appending and writes the header if the file is empty, under an
exclusive lock, so several applications can share one file.
Every record is one ``write`` of one line, so lines from several processes
appending to one file never interleave. Times are wall-clock epoch ms
(``time.time()``).
"""
from __future__ import annotations

import fcntl
import json
import os
import time

FORMAT, VERSION = "rebalance-observed", 1


def now_ms() -> float:
    return round(time.time() * 1000, 3)


def header(topics, group: str | None = None) -> dict:
    """The first line of a log: ``topics`` is [(name, partitions)]."""
    h = {"format": FORMAT, "version": VERSION, "topics": [{"name": t, "partitions": n} for t, n in topics]}
    return h | ({"group": group} if group else {})


class ObservedLog:
    def __init__(self, target, member: str, instance_id: str | None = None):
        """``member``: the application's name for the consumer; ``instance_id``: its
        group.instance.id (KIP-345), written on its callbacks, or None."""
        self.target, self.member, self.instance_id = target, member, instance_id
        self._write = None if isinstance(target, (str, os.PathLike)) else \
            (lambda line: (target.write(line), target.flush()))

    def begin(self, topics, group: str | None = None) -> None:
        """Before the first record: ``topics`` [(name, partitions)] for the header of
        a new file. Raises OSError."""
        if self._write is not None:
            return
        fd = os.open(self.target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_size == 0:
            os.write(fd, (json.dumps(header(topics, group)) + "\n").encode())
        fcntl.flock(fd, fcntl.LOCK_UN)
        self._write = lambda line: os.write(fd, line.encode())

    def _record(self, event: str, t_ms: float | None = None, **fields) -> None:
        record = {"t_ms": now_ms() if t_ms is None else t_ms, "member": self.member, "event": event, **fields}
        self._write(json.dumps(record) + "\n")

    def callback(self, kind: str, partitions, t_ms: float | None = None) -> None:
        """A rebalance callback: ``kind`` "assigned" | "revoked" | "lost",
        ``partitions`` [(topic, partition)]; ``t_ms``: the callback's entry for an
        assignment, its exit for a revocation or a loss (spec/OBSERVED.md)."""
        self._record(kind, t_ms, partitions=[{"topic": t, "partition": p} for t, p in sorted(partitions)],
                     **({"group_instance_id": self.instance_id} if self.instance_id else {}))

    def commit(self, offsets, outcome: str, sent_ms: float, error: str | None = None) -> None:
        """A commit of ``offsets`` [(topic, partition, offset)] sent at ``sent_ms``
        and answered now: ``outcome`` "ok" | "error" | "unknown"."""
        self._record("commit", offsets=[{"topic": t, "partition": p, "offset": o} for t, p, o in offsets],
                     outcome=outcome, sent_ms=sent_ms, **({"error": error} if error else {}))

    def marker(self, event: str) -> None:
        """"closed" (by the application), "killed", "paused", "resumed" (by whoever did it)."""
        self._record(event)
