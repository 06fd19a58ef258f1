"""Durable group metadata and committed offsets: an embedded SQLite database in
WAL mode with synchronous=FULL, so a row is on disk when ``save_group`` or
``commit_offsets`` returns, before the coordinator answers (R37).

Tables: ``meta(key, value)`` with ``format`` = ``FORMAT``; ``groups(group_id,
record)``: the group as ``model.coordinator.stored`` gives it, with impl/'s names
for its member and instance ids and each member's timeouts, as JSON text (bytes —
the members' protocol metadata and assignments, opaque to the coordinator — as
base64); ``offsets(group_id, topic, partition, offset, metadata)``. Kafka keeps
both in the __consumer_offsets topic (GroupMetadataManager). In a file (not
":memory:"), the records too: ``topics(name, partitions)``, the topics created at
run time, and ``batches(topic, partition, base_offset, data)``, each record batch
as appended (impl/records.py), as Kafka keeps its log segments on disk.

Reading a store never runs code from it: records are JSON, decoded field by field
into the model's values. A store written before format 1 (pickled records, which
unpickling would execute) is refused with StoreError, not read.
"""
from __future__ import annotations

import base64
import json
import sqlite3
from typing import NamedTuple

from rebalance.model.config import ConfigError
from rebalance.model.coordinator import Group, MemberMetadata
from rebalance.model.protocol import EMPTY_ASSIGNMENT, Phase, Protocols
from rebalance.model.timing import Timeouts

FORMAT = 1


class StoreError(ConfigError):
    """The --store file cannot be used: not a database, a format this version does
    not read, or a record that does not decode; the message names the file and why."""


class GroupRecord(NamedTuple):
    """A stored group: ``group`` (model.coordinator.Group), ``names`` {member id:
    member.id string}, ``instances`` {group.instance.id string: instance id},
    ``timeouts`` {member id: model.timing.Timeouts (session and rebalance timeout, ms)}."""

    group: tuple
    names: dict
    instances: dict
    timeouts: dict


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


class Store:
    """``path``: a database file, created if missing, or ":memory:" (nothing survives).
    Raises StoreError if the file is not a SQLite database or holds another format
    (a store of rebalance before format 1 among them)."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            tables = {name for (name,) in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.Error as e:
            raise StoreError(f"--store {path}: not a usable SQLite database ({e})") from None
        if "groups" in tables and "meta" not in tables:
            raise StoreError(f"--store {path}: written by an older rebalance (pickled group records); it is not "
                             "read, since unpickling a file runs code from it: start with a new store file")
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (str(FORMAT),))
        (found,) = self.db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if found != str(FORMAT):
            raise StoreError(f"--store {path}: store format {found}, this rebalance reads format {FORMAT}")
        self.db.execute("CREATE TABLE IF NOT EXISTS groups (group_id TEXT PRIMARY KEY, record TEXT NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS offsets (group_id TEXT, topic TEXT, partition INTEGER, "
                        "offset INTEGER NOT NULL, metadata TEXT, PRIMARY KEY (group_id, topic, partition))")
        self.db.execute("CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS batches (topic TEXT, partition INTEGER, base_offset INTEGER, "
                        "data BLOB NOT NULL, PRIMARY KEY (topic, partition, base_offset))")

    @property
    def keeps_records(self) -> bool:
        """Whether records are written here: only to a file (":memory:" would hold every
        batch a second time, in the same process)."""
        return self.path != ":memory:"

    def topics(self) -> tuple:
        """The topics created at run time: ((name, partitions), ...), in creation order."""
        return tuple(self.db.execute("SELECT name, partitions FROM topics ORDER BY rowid"))

    def save_topic(self, name: str, partitions: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO topics VALUES (?, ?)", (name, partitions))

    def delete_topic(self, name: str) -> None:
        """Forget a topic and its records, in one transaction."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM topics WHERE name = ?", (name,))
            self.db.execute("DELETE FROM batches WHERE topic = ?", (name,))

    def append_batch(self, topic: str, partition: int, base_offset: int, data: bytes) -> None:
        self.db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?)", (topic, partition, base_offset, data))

    def batches(self):
        """Every stored batch, ``(topic, partition, data)``, in each partition's offset order."""
        return self.db.execute("SELECT topic, partition, data FROM batches ORDER BY topic, partition, base_offset")

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

    def delete_group(self, group_id: str) -> None:
        """Forget a group and its committed offsets, in one transaction (an expired
        group: GroupMetadataManager.cleanupGroupMetadata's tombstones)."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM groups WHERE group_id = ?", (group_id,))
            self.db.execute("DELETE FROM offsets WHERE group_id = ?", (group_id,))

    def save_group(self, group_id: str, record: GroupRecord) -> None:
        self.db.execute("INSERT OR REPLACE INTO groups VALUES (?, ?)", (group_id, encode(record)))

    def commit_offsets(self, group_id: str, offsets) -> None:
        """``offsets``: ((topic, partition, offset, metadata), ...), written in one transaction."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO offsets VALUES (?, ?, ?, ?, ?)",
                                [(group_id, *o) for o in offsets])

    def delete_offsets(self, group_id: str, partitions) -> None:
        """Forget the group's committed offsets of ``partitions`` ((topic, partition), ...),
        in one transaction (OffsetDelete: GroupMetadataManager.cleanupGroupMetadata's tombstones)."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("DELETE FROM offsets WHERE group_id = ? AND topic = ? AND partition = ?",
                                [(group_id, t, p) for t, p in partitions])

    def offsets(self, group_id: str) -> dict:
        """{(topic, partition): (offset, metadata)} committed for the group."""
        rows = self.db.execute("SELECT topic, partition, offset, metadata FROM offsets WHERE group_id = ?",
                               (group_id,))
        return {(t, p): (o, m) for t, p, o, m in rows}

    def close(self) -> None:
        self.db.close()
