"""Checkpoint and resume of the local engine (``rebalance check --checkpoint DIR``,
``--resume DIR``; issue 44), as TLC's ``-checkpoint``/``-recover``: a run killed at
any moment and resumed gives the counts, verdicts and counterexamples of one
that never stopped.

A checkpoint is taken at the end of a complete breadth-first level (never after
a level cut short by a limit): the first level to end ``interval_s`` after the
last checkpoint (each syncs a dozen files, milliseconds each on a disk: every
level would cost a short run much of its time), and the last level before the
run stops or its liveness analysis starts. There, everything the
rest of the run reads is a few append-only arrays and a handful of counters:

- the explored states (explore.py ``_Store``: its id columns, and the parent
  links when no liveness graph is kept), one file per array, named by its type
  code (``column0.H``; a column widened to int32 is written whole to a new file);
- the interned Group and Proc values those ids stand for (``Interner``), as
  pickled chunks, each checkpoint appending the values interned since the last;
- the liveness graph (``Graph``), whose spill files live in DIR itself
  (``Graph(spill=DIR)``), so that nothing of it is copied;
- in ``checkpoint.pkl`` (the manifest): each file's length at the checkpoint and
  the CRC-32 of its bytes up to there (a resume refuses a file that differs), the
  frontier (its first and last state), depth, transitions, actions fired, the
  violations found and the covers reached, and the run's *key* (``run_key``: the
  checkpoint format, rebalance's version, the System's arguments, the
  properties, covers and fairness checked), which a resume must match.

Each checkpoint appends only what the level added, syncs it, then replaces the
manifest atomically (written to a temporary file, synced, ``os.replace``d, the
directory synced): a run killed while writing one resumes from the one before,
its files cut back to the lengths that one recorded. A resumed run rebuilds the
visited set from the stored states (their fingerprints, in order) and its memos
as it goes (pure caches: the ids they are keyed by are the restored ones), and
goes on checkpointing into DIR. The manifest and the value chunks are pickles:
resume only checkpoints you wrote.
"""
from __future__ import annotations

import dataclasses
import os
import pickle
import time
import zlib
from array import array
from pathlib import Path

from rebalance import __version__
from rebalance.model.config import ConfigError

from .interning import FingerprintSet, Interner, fold

MANIFEST = "checkpoint.pkl"
INTERVAL_S = 60.0  # rebalance check's --checkpoint-interval (TLC's -checkpoint: 30 minutes)
FORMAT = 1  # the layout of a checkpoint directory: a change refuses the older ones
GRAPH_FILES = ("graph.dst", "graph.cls", "graph.ends")  # liveness.py Graph(spill=root)
_CRC_CHUNK = 1 << 20  # bytes per read of a file's CRC-32
_FOLD_CHUNK = 1 << 20  # stored states per chunk of the visited set's rebuild
# what ``run_key`` holds, as a mismatch names it
KEY_PARTS = {"format": "checkpoint format", "version": "rebalance version", "configuration": "configuration",
             "properties": "properties checked", "covers": "covers", "stop_on": "properties that stop the run "
             "(--continue)", "fairness": "fairness (--no-timer-fairness)"}
# System.spec's parts, as a configuration mismatch names them
SPEC_PARTS = ("group configuration", "members", "joiners", "faults", "fault budget (--max-faults)",
              "static members", "spec mutations", "start state", "timing")


class Checkpoint:
    """A checkpoint directory ``root``: a new one (``resume`` False: refused if it
    holds a checkpoint already) or one to resume (refused if it holds none, or a
    corrupt one). Raises ConfigError (bad input, exit 2) either way, naming the
    directory and the problem. ``last``: ``(depth, distinct states, seconds the
    write took, time.perf_counter() when written)`` of the last checkpoint written,
    ``(depth, distinct states, None, None)`` of the one resumed from, else None.
    ``interval_s``: the least time between two checkpoints (``due``); ``written``:
    how many this run wrote."""

    def __init__(self, root, resume: bool = False, interval_s: float = INTERVAL_S):
        self.root = Path(root)
        self.interval_s = interval_s
        manifest = self.root / MANIFEST
        option = "--resume" if resume else "--checkpoint"
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"{option} {root} is not a directory")
        if resume and not manifest.is_file():
            raise ConfigError(f"--resume {root}: no checkpoint there ({MANIFEST} is missing)")
        if not resume and manifest.exists():
            raise ConfigError(f"--checkpoint {root} holds a checkpoint already: continue it with --resume {root}, "
                              "or give an empty directory")
        self.saved = self._load_manifest() if resume else None
        self.root.mkdir(parents=True, exist_ok=True)
        if not resume:  # a run killed before its first checkpoint left these: the graph's files append
            for name in GRAPH_FILES:
                (self.root / name).unlink(missing_ok=True)
        self._files: dict = dict(self.saved["files"]) if self.saved else {}  # file -> (bytes, CRC-32, entries)
        self.key = None
        self.last = None if self.saved is None else (self.saved["depth"], self.saved["distinct"], None, None)
        self._since = time.perf_counter()  # the last checkpoint written, or the start
        self.written = 0  # checkpoints written by this run

    def due(self, final: bool) -> bool:
        """Whether to checkpoint the level just ended: the last one before the run
        stops or its liveness analysis starts (``final``), or ``interval_s`` after
        the last checkpoint (0: every level)."""
        return final or time.perf_counter() - self._since >= self.interval_s

    def _corrupt(self, why: str) -> ConfigError:
        return ConfigError(f"--resume {self.root}: the checkpoint is corrupt ({why}); start again with "
                           "--checkpoint into an empty directory")

    def _load_manifest(self) -> dict:
        """The manifest, each file it names checked: present, as long as recorded,
        and of the recorded CRC-32 over that length."""
        try:
            with open(self.root / MANIFEST, "rb") as f:
                saved = pickle.load(f)
            for key in ("key", "files", "graph", "lo", "hi", "depth", "distinct", "transitions", "kinds",
                        "violations", "reached"):
                saved[key]  # noqa: B018 (present)
            files = [(name, int(size), int(crc)) for name, (size, crc, _) in saved["files"].items()]
        except (OSError, EOFError, pickle.UnpicklingError, KeyError, TypeError, ValueError, AttributeError,
                ImportError, IndexError) as e:
            raise self._corrupt(f"{MANIFEST}: {type(e).__name__}: {e}") from None
        for name, size, crc in files:
            path = self.root / name
            have = path.stat().st_size if path.is_file() else None
            if have is None or have < size:
                raise self._corrupt(f"{name} is missing" if have is None else
                                    f"{name} holds {have:,} bytes, the checkpoint recorded {size:,}")
            with open(path, "rb") as f:
                if _crc(f, 0, size) != crc:
                    raise self._corrupt(f"{name}'s first {size:,} bytes are not those written (CRC-32)")
        return saved

    # -- the run's key --------------------------------------------------------------
    def bind(self, key: dict) -> None:
        """The run's key (``run_key``), saved with every checkpoint; refuses
        (ConfigError) to resume a checkpoint of another run, naming what differs."""
        self.key = key
        if self.saved is None or self.saved["key"] == key:
            return
        theirs = self.saved["key"]
        part = next(p for p in KEY_PARTS if theirs.get(p) != key.get(p))
        what = f"its {KEY_PARTS[part]} differs"
        if part in ("format", "version"):
            what += f" ({theirs.get(part)} there, {key[part]} here)"
        elif part == "configuration":
            what += f" ({_difference(theirs[part], key[part])})"
        raise ConfigError(f"--resume {self.root}: the checkpoint is of another run, {what}; "
                          + ("resume it with the rebalance that wrote it, or start again with --checkpoint"
                             if part in ("format", "version") else "give the options it was started with"))

    # -- files: name -> (bytes, CRC-32 of them, entries) ---------------------------
    def _record(self, name: str, f, old_size: int, count) -> None:
        """``name`` (open as ``f``) now ends at its current size: synced, its CRC-32
        carried on from the last checkpoint's over the bytes past ``old_size``."""
        f.flush()
        os.fsync(f.fileno())
        size = os.fstat(f.fileno()).st_size
        was_size, was_crc, _ = self._files.get(name, (0, 0, 0))
        crc = _crc(f, old_size, size, was_crc if old_size == was_size else 0)
        self._new[name] = (size, crc, count)

    def _append(self, name: str, values: array) -> None:
        """Write ``values``' entries past those already in file ``name.typecode``
        (all of them, to a new file, if the type widened), synced."""
        file = f"{name}.{values.typecode}"
        size = self._files.get(file, (0,))[0]
        path = self.root / file
        with open(path, "r+b" if path.exists() else "w+b") as f:
            f.seek(size)
            f.truncate()
            f.write(memoryview(values).cast("B")[size:])
            self._record(file, f, size, len(values))

    def _read(self, name: str) -> array:
        file = next(f for f in self.saved["files"] if f.rsplit(".", 1)[0] == name)
        out = array(file.rsplit(".", 1)[1])
        with open(self.root / file, "rb") as f:
            out.fromfile(f, self.saved["files"][file][2])
        return out

    def _append_values(self, name: str, values: list) -> None:
        """Append the values of ``values`` (a growing list) past those written, as one pickled chunk."""
        size, _, count = self._files.get(name, (0, 0, 0))
        path = self.root / name
        with open(path, "r+b" if path.exists() else "w+b") as f:
            f.seek(size)
            f.truncate()
            if len(values) > count:
                pickle.dump(values[count:], f, protocol=pickle.HIGHEST_PROTOCOL)
            self._record(name, f, size, len(values))

    def _read_values(self, name: str) -> list:
        size, _, count = self.saved["files"][name]
        out: list = []
        with open(self.root / name, "rb") as f:
            while len(out) < count and f.tell() < size:
                out.extend(pickle.load(f))
        if len(out) != count:
            raise ValueError(f"{name}: {len(out):,} values, the checkpoint recorded {count:,}")
        return out

    # -- save and restore -------------------------------------------------------------
    def save(self, store, graph, interner: Interner, **figures) -> None:
        """Checkpoint the end of a level: ``store`` (explore.py ``_Store``), ``graph``
        (or None), ``interner``, and ``figures`` (lo, hi, depth, transitions, kinds,
        violations, reached): the files first, then the manifest, atomically."""
        t0 = time.perf_counter()
        self._new = {}  # this checkpoint's files (a widened column's is a new one); ``_files`` the last one's
        for j, column in enumerate(store.columns):
            self._append(f"column{j}", column)
        self._append("faults", store.faults)
        if store.parents is not None:
            self._append("parents", store.parents)
            self._append("steps", store.steps)
        self._append_values("groups", interner.groups)
        self._append_values("procs", interner.procs)
        graph_state = None
        if graph is not None:
            self._append("marked", graph.marked)
            self._append("mark_bits", graph.mark_bits)
            graph_state = graph.checkpoint()
            for name in GRAPH_FILES:  # written by the graph as it went: synced and summed here
                with open(self.root / name, "rb") as f:
                    self._record(name, f, self._files.get(name, (0,))[0], None)
        manifest = {"key": self.key, "files": dict(self._new), "graph": graph_state,
                    "distinct": len(store), **figures}
        tmp = self.root / (MANIFEST + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(manifest, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / MANIFEST)
        _sync_directory(self.root)
        stale, self._files = set(self._files) - set(self._new), self._new
        for name in stale:  # a column's file before it widened
            (self.root / name).unlink(missing_ok=True)
        self._since = now = time.perf_counter()
        self.written += 1
        self.last = (figures["depth"], len(store), now - t0, now)

    def restore(self, store, graph, interner: Interner) -> tuple:
        """Load the checkpoint into a fresh run's ``store`` (built with the initial
        state only), ``graph`` and ``interner``: ``(the manifest's figures, the
        visited set rebuilt from the stored states' fingerprints)``. Raises
        ConfigError if a file does not read back."""
        s = self.saved
        try:
            groups, procs = self._read_values("groups"), self._read_values("procs")
            columns = [self._read(f"column{j}") for j in range(len(store.columns))]
            faults = self._read("faults")
            links = (self._read("parents"), self._read("steps")) if store.parents is not None else None
            marks = (self._read("marked"), self._read("mark_bits")) if graph is not None else None
        except (OSError, EOFError, pickle.UnpicklingError, StopIteration, ValueError, TypeError, AttributeError,
                ImportError) as e:
            raise self._corrupt(f"{type(e).__name__}: {e}") from None
        interner.groups[:], interner.procs[:] = groups, procs
        interner._group_ids.clear()
        interner._group_ids.update((v, i) for i, v in enumerate(groups))
        interner._proc_ids.clear()
        interner._proc_ids.update((v, i) for i, v in enumerate(procs))
        store.columns, store.faults = columns, faults
        if links is not None:
            store.parents, store.steps = links
        if graph is not None:
            graph.marked, graph.mark_bits = marks
            graph.resume(s["graph"])
        visited = FingerprintSet()
        n = len(store)
        for lo in range(0, n, _FOLD_CHUNK):
            visited.resolve(fold(store.matrix(lo, min(lo + _FOLD_CHUNK, n))), lo)
        figures = {k: v for k, v in s.items() if k not in ("key", "files", "graph", "distinct")}
        return figures, visited


def _crc(f, lo: int, hi: int, crc: int = 0) -> int:
    """The CRC-32 of bytes ``lo`` .. ``hi - 1`` of open file ``f``, carried on from ``crc``."""
    while lo < hi:
        chunk = os.pread(f.fileno(), min(_CRC_CHUNK, hi - lo), lo)
        if not chunk:
            break
        crc, lo = zlib.crc32(chunk, crc), lo + len(chunk)
    return crc


def _sync_directory(root: Path) -> None:
    """Make a rename in ``root`` durable (where the platform can open a directory)."""
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _difference(theirs: tuple, mine: tuple) -> str:
    """Where two ``System.spec`` tuples differ, named (``SPEC_PARTS``; a group
    configuration's field by its name): ``what A there, B here``."""
    for name, a, b in zip(SPEC_PARTS, theirs, mine):
        if a == b:
            continue
        if dataclasses.is_dataclass(a) and type(a) is type(b):
            field = next(f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name))
            return f"{name} {field} {getattr(a, field)!r} there, {getattr(b, field)!r} here"
        return f"{name} {a!r} there, {b!r} here"
    return "its System's arguments"


def run_key(system, properties, covers, stop_on, fair) -> dict:
    """What a resumed run must share with the checkpointed one (``KEY_PARTS``)."""
    return {"format": FORMAT, "version": __version__, "configuration": system.spec,
            "properties": tuple(p.name for p in properties), "covers": tuple(c.name for c in covers),
            "stop_on": tuple(sorted(stop_on)),
            "fairness": None if fair is None else f"{fair.__module__}.{fair.__qualname__}"}
