"""The store of ``rebalance serve``: a folder holding one embedded SQLite database
(``store.db``, WAL mode, synchronous=FULL), so a row is on disk when its write
returns, before anyone is answered (R37; an acknowledged record likewise).

``Store(path)``: the folder (created if missing) that keeps everything across
restarts; ``Store()``: a fresh temporary folder, deleted by ``close`` (serve's
default: every run starts empty, as kfake and librdkafka's mock cluster do).

Tables:

* ``meta(key, value)``: ``format`` = ``FORMAT``, ``next_producer_id``;
* ``groups(group_id, record)``: the group as ``model.coordinator.stored`` gives
  it, with impl/'s names for its member and instance ids and each member's
  timeouts, as JSON text (bytes as base64); ``offsets(group_id, topic, partition,
  offset, metadata)``. Kafka keeps both in __consumer_offsets (GroupMetadataManager);
* ``topics(name, partitions, configs)``: the topics created at run time, with
  their topic configs (JSON: retention.ms, retention.bytes, max.message.bytes);
* the records, as Kafka keeps log segments on disk: ``batches(log_id,
  base_offset, last_offset, max_timestamp, running_max, position, data)``, each
  record batch as appended (its base offset written in), ``running_max`` the
  largest timestamp of the partition up to it (Kafka's time index) and
  ``position`` the bytes appended before it (the segment file position, for
  retention.bytes); ``logs(log_id, topic, partition, start, end, position,
  max_timestamp)``: each partition's log start and end offsets, and
  ``producers(log_id, producer_id, epoch, batches)``: the idempotent producers'
  states (Kafka's ProducerStateManager snapshot). Both are written in the same
  transaction as the batch they follow, so they are a checkpoint that is always
  current: a restart reads them and no batch (UnifiedLog's recovery reads only
  the segments past its recovery point; here there are none). Memory stays
  bounded whatever the log's size: batches are read back from disk.

Failure: a write that fails (disk full, an I/O error, a read-only file) takes the
store offline (``offline``: why), and every later write raises StoreOffline at
once, so no batch is stored past one that was not, and no offset is given twice:
Kafka's LogDirFailureChannel takes the log directory offline until the broker
restarts (ReplicaManager.handleLogDirFailure), and producers get
KAFKA_STORAGE_ERROR. Reading a store never runs code from it: records are JSON,
decoded field by field into the model's values.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

from rebalance.model.config import ConfigError
from rebalance.model.coordinator import Group, MemberMetadata
from rebalance.model.protocol import EMPTY_ASSIGNMENT, Phase, Protocols
from rebalance.model.timing import Timeouts

FORMAT = 2
DATABASE = "store.db"
CACHE_KIB = 8192  # SQLite's page cache per connection (KiB): the log's pages are read from disk, not held


class StoreError(ConfigError):
    """The --store folder cannot be used: not writable, not a store, a format this
    version does not read, or a record that does not decode; the message names the
    path and why (exit 2)."""


class StoreOffline(Exception):
    """A write refused because the store is offline (a write failed before: disk full,
    I/O error); the message says why. Kafka: KAFKA_STORAGE_ERROR, log directory offline."""


class GroupRecord(NamedTuple):
    """A stored group: ``group`` (model.coordinator.Group), ``names`` {member id:
    member.id string}, ``instances`` {group.instance.id string: instance id},
    ``timeouts`` {member id: model.timing.Timeouts (session and rebalance timeout, ms)}."""

    group: tuple
    names: dict
    instances: dict
    timeouts: dict


class LogState(NamedTuple):
    """A partition's log as stored: its id, log start and end offsets, the bytes
    appended (``position``), the largest timestamp (ms, -1 for none) and its
    producers {producer id: (epoch, ((first sequence, last sequence, base offset), ...))}."""

    log_id: int
    start: int
    end: int
    position: int
    max_timestamp: int
    producers: dict


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _bytes(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _member_json(m: MemberMetadata) -> dict:
    sub, a = m.subscription, m.assignment
    return {"member_id": m.member_id, "instance_id": m.instance_id, "conn": m.conn,
            "protocol_type": sub.protocol_type, "protocols": [[name, _b64(data)] for name, data in sub.protocols],
            "assignment": None if a is EMPTY_ASSIGNMENT else _b64(a),
            "awaiting_join": m.awaiting_join, "awaiting_sync": m.awaiting_sync, "pending_sync": m.pending_sync}


def _member_of(d: dict) -> MemberMetadata:
    sub = Protocols(d["protocol_type"], tuple((name, _bytes(data)) for name, data in d["protocols"]))
    assignment = EMPTY_ASSIGNMENT if d["assignment"] is None else _bytes(d["assignment"])
    return MemberMetadata(d["member_id"], d["instance_id"], d["conn"], sub, assignment, d["awaiting_join"],
                          d["awaiting_sync"], d["pending_sync"])


def encode(record: GroupRecord) -> str:
    """A group record as JSON text: the Group's fields by name (members as objects,
    the phase as its Kafka name's enum value), the maps with string keys."""
    g = record.group
    group = {"phase": int(g.phase), "generation": g.generation, "leader": g.leader,
             "members": [_member_json(m) for m in g.members], "first_joiner": g.first_joiner,
             "issued": [list(x) for x in g.issued], "initial_delay": g.initial_delay, "protocol": g.protocol,
             "pending": list(g.pending)}
    return json.dumps({"group": group, "names": {str(k): v for k, v in record.names.items()},
                       "instances": record.instances,
                       "timeouts": {str(k): list(t) for k, t in record.timeouts.items()}},
                      sort_keys=True, separators=(",", ":"))


def decode(text: str) -> GroupRecord:
    """The inverse of ``encode``. Raises ValueError, KeyError or TypeError on a record
    that is not one (the Store names the group)."""
    d = json.loads(text)
    g = d["group"]
    group = Group(Phase(g["phase"]), g["generation"], g["leader"], tuple(_member_of(m) for m in g["members"]),
                  g["first_joiner"], tuple(tuple(x) for x in g["issued"]), g["initial_delay"], g["protocol"],
                  tuple(g["pending"]))
    return GroupRecord(group, {int(k): v for k, v in d["names"].items()}, dict(d["instances"]),
                       {int(k): Timeouts(*t) for k, t in d["timeouts"].items()})


SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS groups (group_id TEXT PRIMARY KEY, record TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS offsets (group_id TEXT, topic TEXT, partition INTEGER, offset INTEGER NOT NULL, "
    "metadata TEXT, PRIMARY KEY (group_id, topic, partition))",
    "CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL, configs TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS logs (log_id INTEGER PRIMARY KEY, topic TEXT NOT NULL, partition INTEGER NOT NULL, "
    "start INTEGER NOT NULL, end INTEGER NOT NULL, position INTEGER NOT NULL, max_timestamp INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS batches (log_id INTEGER NOT NULL, base_offset INTEGER NOT NULL, "
    "last_offset INTEGER NOT NULL, max_timestamp INTEGER NOT NULL, running_max INTEGER NOT NULL, "
    "position INTEGER NOT NULL, data BLOB NOT NULL, UNIQUE (log_id, base_offset))",
    "CREATE INDEX IF NOT EXISTS batches_by_time ON batches (log_id, running_max, base_offset)",
    "CREATE INDEX IF NOT EXISTS batches_by_position ON batches (log_id, position)",
    "CREATE TABLE IF NOT EXISTS producers (log_id INTEGER, producer_id INTEGER, epoch INTEGER NOT NULL, "
    "batches TEXT NOT NULL, PRIMARY KEY (log_id, producer_id))",
)


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    db.execute("PRAGMA synchronous=FULL")
    return db


class Store:
    """The store folder at ``path`` (created if missing), or a temporary one for
    None. Raises StoreError if the folder cannot be created or written, holds no
    store database but other files, or its database is not one or of another
    format. Writes (every method but the readers named so) run on the caller's
    one writer thread, in order; readers may run on any thread (one connection each)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.temporary = path is None
        self.folder = Path(tempfile.mkdtemp(prefix="rebalance-store-") if path is None else path)
        self.path = str(self.folder)
        self.offline: str | None = None
        self._readers = threading.local()
        self._opened: list = []  # the readers' connections, closed by close
        try:
            if self.folder.exists() and not self.folder.is_dir():
                raise StoreError(f"--store {self.path}: not a folder (a store is a folder holding {DATABASE}; a "
                                 "store file of an earlier rebalance is not read)")
            self.folder.mkdir(parents=True, exist_ok=True)
            if not os.access(self.folder, os.W_OK | os.X_OK):  # a read-only file system too
                raise StoreError(f"--store {self.path}: the folder is not writable")
            self.database = self.folder / DATABASE
            self.db = _connect(self.database)
            self.db.execute("PRAGMA journal_mode=WAL")
            tables = {name for (name,) in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "groups" in tables and "meta" not in tables:
                raise StoreError(f"--store {self.path}: written by an older rebalance (pickled group records); it "
                                 "is not read, since unpickling a file runs code from it: start with a new store")
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")  # a write now, so a read-only store is refused at start
                for statement in SCHEMA:
                    self.db.execute(statement)
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (str(FORMAT),))
            (found,) = self.db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except (sqlite3.Error, OSError) as e:
            raise StoreError(f"--store {self.path}: cannot be used ({e})") from None
        if found != str(FORMAT):
            raise StoreError(f"--store {self.path}: store format {found}, this rebalance reads format {FORMAT}")

    # --- writes (the writer thread) ------------------------------------------------------
    def _write(self, statements) -> None:
        """Run ``statements`` ((sql, args or list of args for many), ...) in one
        transaction. Raises StoreOffline if the store is (or here goes) offline."""
        if self.offline is not None:
            raise StoreOffline(self.offline)
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                for sql, args in statements:
                    if isinstance(args, list):
                        self.db.executemany(sql, args)
                    else:
                        self.db.execute(sql, args)
        except sqlite3.Error as e:
            self.offline = f"a write to {self.database} failed: {e}"
            raise StoreOffline(self.offline) from None

    def save_topic(self, name: str, partitions: int, configs: dict) -> None:
        self._write([("INSERT OR REPLACE INTO topics VALUES (?, ?, ?)", (name, partitions, json.dumps(configs)))])

    def delete_topic(self, name: str) -> None:
        """Forget a topic, its records and its producers' states, in one transaction."""
        logs = "(SELECT log_id FROM logs WHERE topic = ?)"
        self._write([("DELETE FROM topics WHERE name = ?", (name,)),
                     (f"DELETE FROM batches WHERE log_id IN {logs}", (name,)),
                     (f"DELETE FROM producers WHERE log_id IN {logs}", (name,)),
                     ("DELETE FROM logs WHERE topic = ?", (name,))])

    def append(self, topic: str, partition: int, state: LogState, base: int, last: int, max_ts: int,
               data: bytes, producer=None) -> None:
        """Store one batch (``data``, offsets ``base``..``last``, its largest timestamp
        ``max_ts``) and the log's state after it (``state``: its end, position and
        running max already advanced), with the producer's ``(id, epoch, batches)``
        if idempotent, in one transaction. Raises StoreOffline."""
        statements = [
            ("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)",
             (state.log_id, base, last, max_ts, state.max_timestamp, state.position - len(data), data)),
            ("INSERT OR REPLACE INTO logs VALUES (?, ?, ?, ?, ?, ?, ?)",
             (state.log_id, topic, partition, state.start, state.end, state.position, state.max_timestamp))]
        if producer is not None:
            pid, epoch, kept = producer
            statements.append(("INSERT OR REPLACE INTO producers VALUES (?, ?, ?, ?)",
                               (state.log_id, pid, epoch, json.dumps(kept))))
        self._write(statements)

    def truncate_head(self, log_id: int, start: int) -> None:
        """Delete the log's batches below offset ``start``, its new log start
        (retention: UnifiedLog.deleteOldSegments)."""
        self._write([("DELETE FROM batches WHERE log_id = ? AND base_offset < ?", (log_id, start)),
                     ("UPDATE logs SET start = ? WHERE log_id = ?", (start, log_id))])

    def delete_records(self, log_id: int, start: int, end: int) -> None:
        """Move the log start to ``start`` (DeleteRecords; ``end``: the log's end
        offset): the batches wholly below it are deleted, the one holding ``start``
        stays (a fetch from inside a batch is answered with the whole batch)."""
        holding = "(SELECT MAX(base_offset) FROM batches WHERE log_id = ? AND base_offset <= ?)"
        delete = (("DELETE FROM batches WHERE log_id = ?", (log_id,)) if start >= end else
                  (f"DELETE FROM batches WHERE log_id = ? AND base_offset < {holding}", (log_id, log_id, start)))
        self._write([delete, ("UPDATE logs SET start = ? WHERE log_id = ?", (start, log_id))])

    def save_producer_id(self, next_id: int) -> None:
        """The next producer id InitProducerId hands out, so none is handed out twice."""
        self._write([("INSERT OR REPLACE INTO meta VALUES ('next_producer_id', ?)", (str(next_id),))])

    def save_group(self, group_id: str, record: GroupRecord) -> None:
        self._write([("INSERT OR REPLACE INTO groups VALUES (?, ?)", (group_id, encode(record)))])

    def delete_group(self, group_id: str) -> None:
        """Forget a group and its committed offsets (an expired group:
        GroupMetadataManager.cleanupGroupMetadata's tombstones)."""
        self._write([("DELETE FROM groups WHERE group_id = ?", (group_id,)),
                     ("DELETE FROM offsets WHERE group_id = ?", (group_id,))])

    def forget_group(self, group_id: str) -> None:
        """Forget a group's stored record and keep its committed offsets (a classic group the
        online migration converted to a consumer group: convertToConsumerGroup writes the
        classic group's tombstone, not its offsets')."""
        self._write([("DELETE FROM groups WHERE group_id = ?", (group_id,))])

    def commit_offsets(self, group_id: str, offsets) -> None:
        """``offsets``: ((topic, partition, offset, metadata), ...)."""
        self._write([("INSERT OR REPLACE INTO offsets VALUES (?, ?, ?, ?, ?)", [(group_id, *o) for o in offsets])])

    def delete_offsets(self, group_id: str, partitions) -> None:
        """Forget the group's committed offsets of ``partitions`` ((topic, partition), ...)
        (OffsetDelete: GroupMetadataManager.cleanupGroupMetadata's tombstones)."""
        self._write([("DELETE FROM offsets WHERE group_id = ? AND topic = ? AND partition = ?",
                      [(group_id, t, p) for t, p in partitions])])

    # --- reads at start (the loop's thread, before serving) --------------------------------
    def topics(self) -> tuple:
        """The topics created at run time: ((name, partitions, configs), ...), in creation order."""
        return tuple((name, n, json.loads(configs))
                     for name, n, configs in self.db.execute("SELECT name, partitions, configs FROM topics "
                                                              "ORDER BY rowid"))

    def logs(self) -> dict:
        """Every partition's stored log: {(topic, partition): LogState} (the checkpoint)."""
        producers: dict = {}
        for log_id, pid, epoch, kept in self.db.execute("SELECT log_id, producer_id, epoch, batches FROM producers"):
            producers.setdefault(log_id, {})[pid] = (epoch, tuple(tuple(b) for b in json.loads(kept)))
        return {(topic, p): LogState(log_id, start, end, position, max_ts, producers.get(log_id, {}))
                for log_id, topic, p, start, end, position, max_ts in self.db.execute(
                    "SELECT log_id, topic, partition, start, end, position, max_timestamp FROM logs")}

    def next_producer_id(self) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'next_producer_id'").fetchone()
        return int(row[0]) if row else 0

    def groups(self) -> dict:
        """Every stored group: {group_id: GroupRecord}. Raises StoreError naming a group
        whose record does not decode."""
        out = {}
        for gid, text in self.db.execute("SELECT group_id, record FROM groups"):
            try:
                out[gid] = decode(text)
            except (ValueError, KeyError, TypeError) as e:
                raise StoreError(f"--store {self.path}: group {gid!r}: unreadable record ({e!r})") from None
        return out

    def with_offsets(self) -> set:
        """The group ids with committed offsets."""
        return {gid for (gid,) in self.db.execute("SELECT DISTINCT group_id FROM offsets")}

    def offsets(self, group_id: str) -> dict:
        """{(topic, partition): (offset, metadata)} committed for the group (on the writer thread)."""
        rows = self.db.execute("SELECT topic, partition, offset, metadata FROM offsets WHERE group_id = ?",
                               (group_id,))
        return {(t, p): (o, m) for t, p, o, m in rows}

    # --- readers (any thread) ----------------------------------------------------------------
    def _reader(self) -> sqlite3.Connection:
        db = getattr(self._readers, "db", None)
        if db is None:
            db = self._readers.db = _connect(self.database)
            self._opened.append(db)
        return db

    def read(self, log_id: int, offset: int, end: int, max_bytes: int, first_whole: bool) -> list:
        """The log's batches from the one holding ``offset`` up to offset ``end``
        (the high watermark), while their bytes fit ``max_bytes``; the first one
        whatever its size if ``first_whole`` (KIP-74). A list of bytes."""
        db, out, size = self._reader(), [], 0
        rows = db.execute("SELECT data FROM batches WHERE log_id = ? AND base_offset >= COALESCE((SELECT "
                          "MAX(base_offset) FROM batches WHERE log_id = ? AND base_offset <= ?), 0) AND "
                          "base_offset < ? ORDER BY base_offset", (log_id, log_id, offset, end))
        for (data,) in rows:
            if size + len(data) > max_bytes and (out or not first_whole):
                break
            out.append(data)
            size += len(data)
        return out

    def batch_reaching(self, log_id: int, timestamp: int, end: int):
        """The bytes of the first batch below offset ``end`` whose records reach
        ``timestamp`` (ms; the partition's running maximum, as Kafka's time index
        keeps it), or None."""
        row = self._reader().execute(
            "SELECT data FROM batches WHERE log_id = ? AND running_max >= ? AND base_offset < ? "
            "ORDER BY running_max, base_offset LIMIT 1", (log_id, timestamp, end)).fetchone()
        return row and row[0]

    def batches(self, log_id: int):
        """Every stored batch of the log, in offset order (an iterator of bytes)."""
        for (data,) in self._reader().execute("SELECT data FROM batches WHERE log_id = ? ORDER BY base_offset",
                                              (log_id,)):
            yield data

    def retention_start(self, log_id: int, end: int, position: int, cutoff_ms: int | None,
                        keep_bytes: int | None) -> int | None:
        """The log start offset retention gives the log (whose end offset is ``end``
        and end position ``position``), or None if neither limit applies: past every
        batch whose timestamps all precede ``cutoff_ms`` (retention.ms;
        UnifiedLog.deleteRetentionMsBreachedSegments, UnifiedLog.java:2017, Kafka
        4.4.0), and past the oldest batches while those after them still hold
        ``keep_bytes`` (retention.bytes; deleteRetentionSizeBreachedSegments,
        UnifiedLog.java:2055). A batch is serve's segment (Kafka deletes whole
        segments of segment.bytes, so it keeps more)."""
        db, starts = self._reader(), []
        if cutoff_ms is not None:
            row = db.execute("SELECT base_offset FROM batches WHERE log_id = ? AND running_max >= ? "
                             "ORDER BY running_max, base_offset LIMIT 1", (log_id, cutoff_ms)).fetchone()
            starts.append(row[0] if row else end)
        if keep_bytes is not None:
            row = db.execute("SELECT base_offset FROM batches WHERE log_id = ? AND position <= ? "
                             "ORDER BY position DESC LIMIT 1", (log_id, position - keep_bytes)).fetchone()
            if row:
                starts.append(row[0])
        return max(starts) if starts else None

    def close(self) -> None:
        for reader in self._opened:
            reader.close()
        self.db.close()
        if self.temporary:
            shutil.rmtree(self.folder, ignore_errors=True)
