"""Writing output files whole or not at all: a temporary file beside the target,
then a rename (the design brief: nothing is lost or half-written)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` by way of a temporary
    file in the same directory and ``os.replace``; on any error the temporary
    file is removed and ``path`` is left as it was. Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
