"""Writing output files whole or not at all: a temporary file beside the target,
then a rename (the design brief: nothing is lost or half-written)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` by way of a temporary
    file in the same directory and ``os.replace``; on any error the temporary
    file is removed and ``path`` is left as it was. The file is readable by others
    as a plain ``open`` would make it (0666 less the umask; mkstemp's 0600 would hide
    counterexamples from a CI artifact uploader or a reviewer). Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o22)
    os.umask(mask)
    return mask
