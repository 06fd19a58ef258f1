"""Coordinator failover (KIP-345's fault tolerance, seed 002; spec R72): the group's
coordinator moves to another broker, which loads the group from its last stored
record in __consumer_offsets; whatever the old coordinator held in memory and
every request and response in flight is lost.

``recorded(before, after)``: ``after`` (a coordinator step's result) carrying the
record a failover would load, ``stored(after)`` (R37) or else ``before``'s.
``load(cfg, group)``: the group as the new coordinator has it. Both pure; the
checker (checker/system.py) calls them only when it explores failovers, so a
group's ``record`` stays None otherwise.

After Kafka's GroupMetadataManager.storeGroup (written when the leader's
assignment arrives and when the group empties) and GroupMetadataManager.loadGroup
/ GroupMetadata.loadGroup (a loaded group is Stable with its members, or Empty;
the generation, leader, protocol and assignments are the record's; every
member's session timer starts anew).
"""
from __future__ import annotations

from .config import GroupConfig, rule
from .coordinator import EMPTY_GROUP, Group, stored


def recorded(before: Group, after: Group) -> Group:
    """``after`` with ``record`` the group as stored after this step (R37), or
    ``before``'s record if this step stores nothing. The record keeps no record of
    its own and no fresh-id counter (``issued``: member ids are UUIDs in Kafka, never
    handed out twice, so a load keeps the live counter)."""
    record = stored(after._replace(record=None))
    record = record._replace(issued=()) if record is not None else before.record
    return after if after.record == record else after._replace(record=record)


def _loaded_generation(record: Group) -> int:
    """R72: the loaded group resumes at the stored generation (GroupMetadata.loadGroup
    takes generationId from the record). Replaced by ``failover-stale-generation``."""
    return record.generation


def load(cfg: GroupConfig, group: Group) -> Group:
    """R72: the group as a new coordinator loads it: the last stored record (Stable or
    Empty, nothing owed to anybody), or an Empty group at generation 0 if none was
    ever stored (GroupMetadataManager finds no group: the next JoinGroup creates
    it). The fresh-id counter goes on from the live one."""
    record = group.record or EMPTY_GROUP
    return record._replace(generation=rule(cfg, _loaded_generation)(record), issued=group.issued,
                           record=group.record)
