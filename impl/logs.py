"""Logging for ``rebalance serve`` (and the proxy): one record per line that no
client-chosen string can forge, and warnings a flood cannot multiply.

* Text (the default): ``<time> <LEVEL> <message>``, with every control character
  of the message (a newline in a group.id or client.id among them) escaped as
  ``\\n``, ``\\x1b``, ... so one record is one line.
* JSON (``--log-format json``): one object per line, ``{"t", "level", "logger",
  "message"}`` plus ``suppressed`` where warnings were dropped; JSON escapes.
* Rate limit: per logger and message template, at most ``burst`` warnings (and
  errors) in each ``window_s`` seconds; the first one let through after a drop
  carries how many were dropped (``suppressed``, and "(N similar suppressed)" in
  text). Info records are not limited (the server logs one per generation).
Kafka's brokers log through log4j with the same concerns (request logging is
throttled per connection); this is the serve-sized equivalent.
"""
from __future__ import annotations

import json
import logging
import re
import sys
import time

FORMATS = ("text", "json")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape(text: str) -> str:
    """``text`` with control characters written as Python escapes (one line always)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class RateLimit(logging.Filter):
    """Lets through at most ``burst`` WARNING-or-worse records per (logger, message
    template) in each window of ``window_s`` seconds; counts the rest and marks the
    next record let through with ``record.suppressed``."""

    def __init__(self, burst: int = 10, window_s: float = 60.0, clock=time.monotonic):
        super().__init__()
        self.burst, self.window_s, self.clock = burst, window_s, clock
        self.windows: dict = {}  # key -> [window start, let through, dropped]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        now = self.clock()
        key = (record.name, record.msg)
        w = self.windows.get(key)
        if w is None or now - w[0] >= self.window_s:
            dropped = w[2] if w else 0
            w = self.windows[key] = [now, 0, 0]
            if dropped:
                record.suppressed = dropped
        if w[1] >= self.burst:
            w[2] += 1
            return False
        w[1] += 1
        return True


class TextFormatter(logging.Formatter):
    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape(record.message)
        line = super().formatMessage(record)
        dropped = getattr(record, "suppressed", 0)
        return f"{line} ({dropped} similar suppressed)" if dropped else line

    def formatException(self, ei) -> str:
        return escape(super().formatException(ei))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"t": round(record.created, 3), "level": record.levelname, "logger": record.name,
               "message": record.getMessage()}
        if getattr(record, "suppressed", 0):
            out["suppressed"] = record.suppressed
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, separators=(",", ":"))


def configure(fmt: str = "text", stream=None, burst: int = 10, window_s: float = 60.0) -> None:
    """Send the ``rebalance`` loggers' INFO and above to ``stream`` (stderr) in ``fmt``
    ("text" or "json"), rate-limited as above. Raises ValueError for another format."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (expected one of {', '.join(FORMATS)})")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(TextFormatter() if fmt == "text" else JsonFormatter())
    handler.addFilter(RateLimit(burst, window_s))
    root = logging.getLogger("rebalance")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
