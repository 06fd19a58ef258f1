"""Recording traces in format v2 (spec/TRACE.md, spec/trace.schema.json): what a
broker, a proxy or a client saw on the wire, in Kafka's vocabulary.

``Recorder`` works on frames: given a request frame's bytes and its response
frame's bytes (size prefix excluded; what ``rebalance serve``, ``rebalance proxy``
and ``rebalance member`` all have) it parses them with kio (impl/wire.py) and
writes ``request`` and ``response`` records for the group APIs only, their bodies
normalised across versions and the consumer protocol decoded
(impl/consumer_protocol.py), KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe
included (their partitions named by topic id and, once ``name_topics`` has told the
recorder the id's name, by topic). Besides: the ``header``, ``open`` and ``close`` per
connection (``c1``, ``c2``, ... in order) and ``restart``.

One JSON object per line, line-buffered, so a killed recorder loses at most the
line being written. Recording must never break what it records: any error in
the recorder is logged once and recording stops. Without a file it records
nothing and costs a test of ``enabled``.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import sys
import time

from kio.schema.errors import ErrorCode

from .consumer_protocol import assignment_json, subscription_json
from .wire import KAFKA_NAMES, Api, ms, read_request, read_response, response_correlation

log = logging.getLogger("rebalance.trace")

FORMAT, VERSION = "rebalance-trace", 2
KAFKA_DEFAULT_INITIAL_DELAY_MS = 3000  # group.initial.rebalance.delay.ms (GroupCoordinatorConfig)
API_NAMES = {api: KAFKA_NAMES[api] for api in (Api.JOIN_GROUP, Api.SYNC_GROUP, Api.HEARTBEAT, Api.LEAVE_GROUP,
                                                Api.OFFSET_COMMIT, Api.OFFSET_FETCH, Api.DESCRIBE_GROUPS,
                                                Api.DELETE_GROUPS, Api.CONSUMER_GROUP_HEARTBEAT,
                                                Api.CONSUMER_GROUP_DESCRIBE)}
GROUP_APIS = frozenset(API_NAMES)


def settings(topics, initial_delay_ms: int = KAFKA_DEFAULT_INITIAL_DELAY_MS, mutations=(), **extra) -> dict:
    """A header's ``settings``: ``topics`` as ((name, partitions), ...), the
    broker's group.initial.rebalance.delay.ms, model mutations, and extra fields
    (``upstream``)."""
    return {"topics": [{"name": n, "partitions": c} for n, c in topics],
            "group_initial_rebalance_delay_ms": initial_delay_ms, "mutations": sorted(mutations), **extra}


class Recorder:
    """Writes one trace. ``path``: the file (None: record nothing); ``recorder``:
    "serve", "proxy" or "member"; ``append``: keep what the file holds (serve,
    restarted on its trace: ``begin`` then writes a ``restart``, and connection
    names and ``t_ms`` go on from the file's); otherwise the file is replaced.

    Call ``begin(settings, groups)`` once before any other record. ``t_ms`` is the
    wall clock read at start plus the monotonic clock since (never backwards)."""

    def __init__(self, path, recorder: str, append: bool = False):
        self.recorder, self.file = recorder, None
        self.failure: str | None = None  # why recording stopped (``_fail``), None while it records
        self.connections = 0
        self.pending: dict = {}  # {(connection, correlation id): (api key, version, request body)}
        self.protocol_types: dict = {}  # {group id: protocol_type of its last JoinGroup}
        self.topic_names: dict = {}  # {topic id (uuid.UUID): name}, for KIP-848's partitions named by id
        last_ms, self.resumed = 0.0, False
        if path:
            if append and os.path.exists(path) and os.path.getsize(path) > 0:
                last_ms = self._resume(path)
                self.resumed = True
            self.file = open(path, "a" if append else "w", buffering=1, encoding="utf-8")
        self.wall0 = max(time.time() * 1000, last_ms)
        self.mono0 = time.monotonic()

    @property
    def enabled(self) -> bool:
        return self.file is not None

    def _resume(self, path) -> float:
        """Cut a partial last line (a killed recorder's), count the connections
        and read the last ``t_ms`` of the trace being continued."""
        with open(path, "rb+") as f:
            data = f.read()
            whole = data.rfind(b"\n") + 1
            if whole < len(data):
                f.truncate(whole)
        last = 0.0
        for line in data[:whole].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.connections += rec.get("type") == "open"
            last = max(last, rec.get("t_ms", 0.0))
        return last

    def name_topics(self, pairs) -> None:
        """Learn topic names by id: ``pairs`` of (topic id, name) (a Metadata response's,
        or serve's own topics), so that KIP-848 records name the topics they give by id."""
        for tid, name in pairs:
            if tid is not None and name:
                self.topic_names[tid] = name

    def now_ms(self) -> float:
        return round(self.wall0 + (time.monotonic() - self.mono0) * 1000, 3)

    def _write(self, record: dict) -> None:
        try:
            self.file.write(json.dumps(record, separators=(",", ":")) + "\n")
        except Exception:
            self._fail()

    def _fail(self) -> None:
        log.exception("trace recording stopped after an error in the recorder")
        self.failure = str(sys.exc_info()[1])
        file, self.file = self.file, None
        try:
            file.close()
        except Exception:
            pass

    # --- records ---------------------------------------------------------------------
    def expire(self, groups) -> None:
        """An ``expire`` record: ``groups`` removed at a retention check (R43); their
        protocol types are no longer kept."""
        for gid in groups:
            self.protocol_types.pop(gid, None)
        if self.file is not None and groups:
            self._write({"type": "expire", "t_ms": self.now_ms(), "groups": sorted(groups)})

    def fault(self, fault: str, **fields) -> None:
        """A ``fault`` record: an injected fault (impl/faults.py), ``fault`` naming it
        ("expire", "rebalance", "error", "delay", "drop", "coordinator_away",
        "coordinator_back", "pause", "resume") with its fields (spec/TRACE.md)."""
        if self.file is not None:
            self._write({"type": "fault", "t_ms": self.now_ms(), "fault": fault, **fields})

    def topics(self, topics) -> None:
        """A ``topics`` record: the broker's topics ((name, partitions), ...) after a
        CreateTopics, DeleteTopics or auto-creation changed them."""
        if self.file is not None:
            self._write({"type": "topics", "t_ms": self.now_ms(),
                         "topics": [{"name": name, "partitions": count} for name, count in topics]})

    def begin(self, settings_: dict, groups=()) -> None:
        """The header on a new trace; a ``restart`` naming ``groups`` (the group
        ids loaded from the store, R37) on a trace being continued."""
        if self.file is None:
            return
        if self.resumed:
            self.restart(groups)
        else:
            recorded_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            self._write({"type": "header", "format": FORMAT, "version": VERSION, "recorder": self.recorder,
                         "recorded_at": recorded_at, "settings": settings_})

    def restart(self, groups) -> None:
        """A ``restart`` record: the broker restarted and loaded ``groups`` from its store
        (R37): serve on a continued trace, or the broker behind a proxy whose restarter
        knows it (``Proxy.restarted``)."""
        if self.file is not None:
            self._write({"type": "restart", "t_ms": self.now_ms(), "groups": sorted(groups)})

    def open(self, host: str) -> str | None:
        """An ``open`` record; the new connection's name (None when not recording)."""
        if self.file is None:
            return None
        self.connections += 1
        name = f"c{self.connections}"
        self._write({"type": "open", "t_ms": self.now_ms(), "connection": name, "host": host})
        return name

    def close(self, connection: str | None) -> None:
        if self.file is None or connection is None:
            return
        for key in [k for k in self.pending if k[0] == connection]:
            del self.pending[key]
        self._write({"type": "close", "t_ms": self.now_ms(), "connection": connection})

    def request(self, connection: str, frame: bytes) -> None:
        """A ``request`` record for a request frame of a group API; other APIs are
        not recorded."""
        if self.file is None or int.from_bytes(frame[:2], "big", signed=True) not in GROUP_APIS:
            return
        try:
            req = read_request(bytes(frame))
            body = request_body(req.api_key, req.version, req.body, self.topic_names)
            if req.api_key == Api.JOIN_GROUP:
                self.protocol_types[body["group_id"]] = body["protocol_type"]
            else:
                _decode_assignments(req.api_key, body, self.protocol_types)
            self.pending[(connection, req.correlation_id)] = (req.api_key, req.version, body)
            record = {"type": "request", "t_ms": self.now_ms(), "connection": connection,
                      "correlation_id": req.correlation_id, "client_id": req.client_id,
                      "api": API_NAMES[req.api_key], "version": req.version, "body": body}
        except Exception:
            self._fail()
            return
        self._write(record)

    def response(self, connection: str, frame: bytes) -> None:
        """A ``response`` record for the response frame to a recorded request."""
        if self.file is None:
            return
        try:
            key = (connection, response_correlation(frame))
            if key not in self.pending:
                return
            api_key, version, req = self.pending.pop(key)
            _, payload = read_response(bytes(frame), api_key, version)
            body = response_body(api_key, version, payload, req, self.protocol_types, self.topic_names)
            record = {"type": "response", "t_ms": self.now_ms(), "connection": connection,
                      "correlation_id": key[1], "api": API_NAMES[api_key], "version": version, "body": body}
        except Exception:
            self._fail()
            return
        self._write(record)

    def shut(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


# --- bodies, normalised across versions (spec/TRACE.md) ----------------------------------------
def error_name(code) -> str | int:
    """Kafka's Errors name of an error code ("NONE", "ILLEGAL_GENERATION"), or the
    integer code for one kio does not name."""
    try:
        return ErrorCode(int(code)).name.upper()
    except ValueError:
        return int(code)


def _instance(body):
    return getattr(body, "group_instance_id", None)


def request_body(api_key: int, version: int, b, topic_names=None) -> dict:
    """A group request's kio payload as a trace ``body``; assignments not yet decoded.
    ``topic_names``: {topic id: name} for KIP-848's partitions named by id."""
    if api_key == Api.CONSUMER_GROUP_HEARTBEAT:
        timeout = ms(b.rebalance_timeout)
        return {"group_id": b.group_id, "member_id": b.member_id, "member_epoch": b.member_epoch,
                "instance_id": b.instance_id, "rack_id": b.rack_id, "rebalance_timeout_ms": timeout,
                "subscribed_topic_names": None if b.subscribed_topic_names is None else list(b.subscribed_topic_names),
                "subscribed_topic_regex": getattr(b, "subscribed_topic_regex", None),
                "server_assignor": b.server_assignor,
                "topic_partitions": _by_id(b.topic_partitions, topic_names or {})}
    if api_key == Api.CONSUMER_GROUP_DESCRIBE:
        return {"groups": list(b.group_ids)}
    if api_key == Api.JOIN_GROUP:
        session = ms(b.session_timeout)
        return {"group_id": b.group_id, "member_id": b.member_id, "group_instance_id": _instance(b),
                "session_timeout_ms": session,
                "rebalance_timeout_ms": ms(b.rebalance_timeout) if hasattr(b, "rebalance_timeout") else session,
                "protocol_type": b.protocol_type,
                "protocols": [{"name": p.name, "metadata": subscription_json(b.protocol_type, p.metadata)}
                              for p in b.protocols],
                "reason": getattr(b, "reason", None)}
    if api_key == Api.SYNC_GROUP:
        return {"group_id": b.group_id, "generation_id": b.generation_id, "member_id": b.member_id,
                "group_instance_id": _instance(b), "protocol_type": getattr(b, "protocol_type", None),
                "protocol_name": getattr(b, "protocol_name", None),
                "assignments": [{"member_id": a.member_id, "assignment": bytes(a.assignment)} for a in b.assignments]}
    if api_key == Api.HEARTBEAT:
        return {"group_id": b.group_id, "generation_id": b.generation_id, "member_id": b.member_id,
                "group_instance_id": _instance(b)}
    if api_key == Api.LEAVE_GROUP:
        if version < 3:
            members = [{"member_id": b.member_id, "group_instance_id": None, "reason": None}]
        else:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "reason": getattr(m, "reason", None)} for m in b.members]
        return {"group_id": b.group_id, "members": members}
    if api_key == Api.OFFSET_COMMIT:
        return {"group_id": b.group_id, "generation_id": b.generation_id_or_member_epoch, "member_id": b.member_id,
                "group_instance_id": _instance(b),
                "topics": [{"name": t.name, "partitions": [
                    {"partition": p.partition_index, "offset": p.committed_offset, "metadata": p.committed_metadata}
                    for p in t.partitions]} for t in b.topics]}
    if api_key == Api.OFFSET_FETCH:
        if hasattr(b, "groups"):  # v8+
            return {"groups": [{"group_id": g.group_id, "topics": _fetch_topics(g.topics)} for g in b.groups]}
        return {"groups": [{"group_id": b.group_id, "topics": _fetch_topics(b.topics)}]}
    if api_key == Api.DELETE_GROUPS:
        return {"groups": list(b.groups_names)}
    return {"groups": list(b.groups)}  # DescribeGroups


def _by_id(tps, topic_names: dict):
    """KIP-848's [{topic_id, partitions}] as [{topic_id, topic, partitions}] (``topic``: the
    name, None for an id the recorder has not seen named), or None."""
    if tps is None:
        return None
    return [{"topic_id": str(tp.topic_id), "topic": getattr(tp, "topic_name", None) or topic_names.get(tp.topic_id),
             "partitions": sorted(tp.partitions)} for tp in tps]


def _fetch_topics(topics):
    if topics is None:
        return None
    return [{"name": t.name, "partitions": list(t.partition_indexes)} for t in topics]


def _decode_assignments(api_key: int, body: dict, protocol_types: dict) -> None:
    """SyncGroup assignments decoded under the request's protocol_type (v5+) or that
    of the group's last JoinGroup."""
    if api_key == Api.SYNC_GROUP:
        ptype = body["protocol_type"] or protocol_types.get(body["group_id"])
        for a in body["assignments"]:
            a["assignment"] = assignment_json(ptype, a["assignment"])


def response_body(api_key: int, version: int, r, req: dict, protocol_types: dict, topic_names=None) -> dict:
    """A group response's kio payload as a trace ``body``; ``req``: its request's body;
    ``topic_names``: {topic id: name} for KIP-848's partitions named by id."""
    if api_key == Api.CONSUMER_GROUP_HEARTBEAT:
        return {"error": error_name(r.error_code), "error_message": r.error_message, "member_id": r.member_id,
                "member_epoch": r.member_epoch, "heartbeat_interval_ms": ms(r.heartbeat_interval),
                "assignment": None if r.assignment is None else _by_id(r.assignment.topic_partitions,
                                                                        topic_names or {})}
    if api_key == Api.CONSUMER_GROUP_DESCRIBE:
        names = topic_names or {}
        return {"groups": [{"group_id": g.group_id, "error": error_name(g.error_code), "state": g.group_state,
                            "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                            "assignor_name": g.assignor_name, "members": [
                                {"member_id": m.member_id, "instance_id": m.instance_id,
                                 "member_epoch": m.member_epoch, "client_id": m.client_id,
                                 "client_host": m.client_host,
                                 "subscribed_topic_names": list(m.subscribed_topic_names),
                                 "subscribed_topic_regex": m.subscribed_topic_regex,
                                 "assignment": _by_id(m.assignment.topic_partitions, names),
                                 "target_assignment": _by_id(m.target_assignment.topic_partitions, names)}
                                for m in g.members]} for g in r.groups]}
    if api_key == Api.JOIN_GROUP:
        ptype = getattr(r, "protocol_type", None) or req["protocol_type"]
        return {"error": error_name(r.error_code), "generation_id": r.generation_id,
                "protocol_type": getattr(r, "protocol_type", None), "protocol_name": r.protocol_name,
                "leader": r.leader, "skip_assignment": getattr(r, "skip_assignment", False),
                "member_id": r.member_id,
                "members": [{"member_id": m.member_id, "group_instance_id": _instance(m),
                             "metadata": subscription_json(ptype, m.metadata)} for m in r.members]}
    if api_key == Api.SYNC_GROUP:
        ptype = getattr(r, "protocol_type", None) or req["protocol_type"] or protocol_types.get(req["group_id"])
        return {"error": error_name(r.error_code), "protocol_type": getattr(r, "protocol_type", None),
                "protocol_name": getattr(r, "protocol_name", None), "assignment": assignment_json(ptype, r.assignment)}
    if api_key == Api.HEARTBEAT:
        return {"error": error_name(r.error_code)}
    if api_key == Api.LEAVE_GROUP:
        error = error_name(r.error_code)
        if version < 3:  # one member, answered by the top-level error
            return {"error": error, "members": [{"member_id": req["members"][0]["member_id"],
                                                 "group_instance_id": None, "error": error}]}
        return {"error": error, "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                             "error": error_name(m.error_code)} for m in r.members]}
    if api_key == Api.OFFSET_COMMIT:
        return {"topics": [{"name": t.name, "partitions": [
            {"partition": p.partition_index, "error": error_name(p.error_code)} for p in t.partitions]}
            for t in r.topics]}
    if api_key == Api.OFFSET_FETCH:
        if hasattr(r, "groups"):  # v8+
            return {"error": "NONE", "groups": [{"group_id": g.group_id, "error": error_name(g.error_code),
                                                 "topics": _fetched(g.topics)} for g in r.groups]}
        error = error_name(getattr(r, "error_code", 0))  # v1 has no top-level error
        return {"error": error, "groups": [{"group_id": req["groups"][0]["group_id"], "error": error,
                                            "topics": _fetched(r.topics)}]}
    if api_key == Api.DELETE_GROUPS:
        return {"results": [{"group_id": g.group_id, "error": error_name(g.error_code)} for g in r.results]}
    groups = []  # DescribeGroups
    for g in r.groups:
        groups.append({"group_id": g.group_id, "error": error_name(g.error_code), "state": g.group_state,
                       "protocol_type": g.protocol_type, "protocol_name": g.protocol_data, "members": [
                           {"member_id": m.member_id, "group_instance_id": _instance(m), "client_id": m.client_id,
                            "client_host": m.client_host,
                            "metadata": subscription_json(g.protocol_type, m.member_metadata)
                            if m.member_metadata else None,
                            "assignment": assignment_json(g.protocol_type, m.member_assignment)}
                           for m in g.members]})
    return {"groups": groups}


def _fetched(topics) -> list:
    return [{"name": t.name, "partitions": [
        {"partition": p.partition_index, "offset": p.committed_offset, "metadata": p.metadata,
         "error": error_name(p.error_code)} for p in t.partitions]} for t in topics]
