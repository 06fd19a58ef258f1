"""JSONL traces of the model steps impl/ takes (the format: spec/TRACE.md).

One line per step of a model handler: ``{"t_ms", "actor", "input", "outputs"}``,
where ``actor`` is ``coordinator:<group id>`` or ``member:<group id>/<name>`` and
inputs and outputs are model values encoded by ``encode``.
"""
from __future__ import annotations

import base64
import json
import time
from enum import IntEnum


def encode(value):
    """A model value as JSON: a message or input (NamedTuple) as an object with its
    ``type`` and fields (the ``tag`` field dropped), an enum by name, bytes as
    base64, tuples as lists."""
    if isinstance(value, IntEnum):
        return value.name
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        out = {"type": type(value).__name__}
        out.update((k, encode(v)) for k, v in zip(value._fields, value) if k != "tag")
        return out
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    return value


class Trace:
    """Appends steps to ``path`` (line-buffered, so a killed process loses at most
    the line being written). ``None``: record nothing."""

    def __init__(self, path):
        self.file = open(path, "a", buffering=1) if path else None
        self.start = time.monotonic()

    def step(self, actor: str, event, outputs) -> None:
        if self.file is None:
            return
        line = {"t_ms": round((time.monotonic() - self.start) * 1000, 3), "actor": actor,
                "input": encode(event), "outputs": [encode(o) for o in outputs]}
        self.file.write(json.dumps(line, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
