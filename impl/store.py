"""Durable group metadata and committed offsets: an embedded SQLite database in
WAL mode with synchronous=FULL, so a row is on disk when ``save_group`` or
``commit_offsets`` returns, before the coordinator answers (R37).

Tables: ``groups(group_id, record)``: the group as ``model.coordinator.stored``
gives it, with impl/'s names for its member and instance ids and each member's
timeouts, pickled; ``offsets(group_id, topic, partition, offset, metadata)``.
Kafka keeps both in the __consumer_offsets topic (GroupMetadataManager).
"""
from __future__ import annotations

import pickle
import sqlite3
from typing import NamedTuple


class GroupRecord(NamedTuple):
    """A stored group: ``group`` (model.coordinator.Group), ``names`` {member id:
    member.id string}, ``instances`` {group.instance.id string: instance id},
    ``timeouts`` {member id: model.timing.Timeouts (session and rebalance timeout, ms)}."""

    group: tuple
    names: dict
    instances: dict
    timeouts: dict


class Store:
    """``path``: a database file, created if missing, or ":memory:" (nothing survives).
    Raises sqlite3.Error if the file cannot be opened as a database."""

    def __init__(self, path: str):
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS groups (group_id TEXT PRIMARY KEY, record BLOB NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS offsets (group_id TEXT, topic TEXT, partition INTEGER, "
                        "offset INTEGER NOT NULL, metadata TEXT, PRIMARY KEY (group_id, topic, partition))")

    def groups(self) -> dict:
        """Every stored group: {group_id: GroupRecord}."""
        return {gid: GroupRecord(*pickle.loads(blob)) for gid, blob in self.db.execute("SELECT * FROM groups")}

    def save_group(self, group_id: str, record: GroupRecord) -> None:
        self.db.execute("INSERT OR REPLACE INTO groups VALUES (?, ?)", (group_id, pickle.dumps(tuple(record))))

    def commit_offsets(self, group_id: str, offsets) -> None:
        """``offsets``: ((topic, partition, offset, metadata), ...), written in one transaction."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO offsets VALUES (?, ?, ?, ?, ?)",
                                [(group_id, *o) for o in offsets])

    def offsets(self, group_id: str) -> dict:
        """{(topic, partition): (offset, metadata)} committed for the group."""
        rows = self.db.execute("SELECT topic, partition, offset, metadata FROM offsets WHERE group_id = ?",
                               (group_id,))
        return {(t, p): (o, m) for t, p, o, m in rows}

    def close(self) -> None:
        self.db.close()
