"""v2 traces (spec/TRACE.md) written from seeded timed runs of the model, for tests
and benchmarks of ``rebalance conform``: checker/simulation.py's run of the
model's coordinator and member handlers, observed as a broker would record it.

What the observer writes is what ``rebalance serve --trace`` writes for the same
run: Kafka's member.id strings (``<client.id>-<uuid4>``, the UUIDs from a seeded
RNG, forgotten when their member leaves the coordinator, as impl/ forgets them),
group.instance.id strings, the consumer protocol decoded (Subscription v2 with
owned partitions and their generation, Assignment v1), the assignor's name as the
protocol. JoinGroup is written as v3 (no KIP-394 MEMBER_ID_REQUIRED round: the
model's members do not ask for one) and, for static members, v5. Eager and
cooperative protocols only (the deferred protocol's fields are not Kafka's).

``emit(path, cfg, members, static, script, timing, seed, until_ms)`` writes one
trace and returns the number of records.
"""
from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

from rebalance.impl.consumer_protocol import topic_partitions
from rebalance.impl.trace import FORMAT, VERSION, settings
from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.protocol import NO_MEMBER_ID, Error, Heartbeat, JoinGroup, LeaveGroup, SyncGroup, slot_of

from ..files import atomic_write
from ..render import lane
from ..simulation import Simulation, Timing

EPOCH_MS = 1_795_946_400_000.0  # 2026-11-24T10:00:00Z: where emitted clocks start
GROUP_ID = "g"


class Recorder:
    """The observer of a Simulation that writes v2 records (dicts) into ``records``."""

    def __init__(self, cfg: GroupConfig, static: bool, timing: Timing, rng: random.Random):
        if cfg.protocol not in ("eager", "cooperative"):
            raise ConfigError(f"emit writes eager and cooperative traces only, not {cfg.protocol!r}")
        self.cfg, self.static, self.timing, self.rng = cfg, static, timing, rng
        delay = timing.initial_delay_ms
        self.records = [{"type": "header", "format": FORMAT, "version": VERSION, "recorder": "serve",
                         "recorded_at": "2026-11-24T10:00:00Z", "settings": settings(cfg.topics, delay, cfg.mutations)}]
        self.conns: dict = {}
        self.strings: dict = {}   # member id -> its member.id string (what a client remembers)
        self.live: set = set()    # member ids the coordinator knows (impl/ names only these)
        self.correlation: dict = {}

    # --- names -----------------------------------------------------------------
    def client_id(self, slot: int) -> str:
        return f"consumer-{lane(slot)}"

    def string(self, mid: int) -> str:
        if mid == NO_MEMBER_ID or mid < 0:
            return ""
        if mid not in self.strings:
            self.strings[mid] = f"{self.client_id(slot_of(mid))}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
        return self.strings[mid]

    def known(self, mid: int) -> str:
        """The string impl/ answers with: "" for a member id it does not know."""
        return self.string(mid) if mid in self.live else ""

    def instance(self, iid: int):
        return f"instance-{lane(iid - 1)}" if iid else None

    def subscription(self, sub) -> dict:
        return {"version": 2, "topics": [n for n, _ in self.cfg.topics],
                "owned_partitions": topic_partitions(self.cfg, sub.owned), "generation": sub.generation,
                "rack": None, "user_data": None}

    def assignment(self, a) -> dict:
        return {"version": 1, "assigned_partitions": topic_partitions(self.cfg, a.partitions), "user_data": None}

    # --- observer -----------------------------------------------------------------
    def _record(self, now: float, kind: str, conn: int, **fields) -> None:
        self.records.append({"type": kind, "t_ms": EPOCH_MS + now, "connection": self.conns[conn], **fields})

    def open(self, now: float, conn: int) -> None:
        self.conns[conn] = f"c{len(self.conns) + 1}"
        self._record(now, "open", conn, host="127.0.0.1")

    def close(self, now: float, conn: int) -> None:
        self._record(now, "close", conn)

    def request(self, now: float, conn: int, req) -> None:
        cid = self.correlation[conn] = self.correlation.get(conn, 0) + 1
        kind = type(req)
        iid = self.instance(getattr(req, "group_instance_id", 0))
        if kind is JoinGroup:
            api, version = "JoinGroup", 5 if self.static else 3
            body = {"group_id": GROUP_ID, "member_id": self.string(req.member_id), "group_instance_id": iid,
                    "session_timeout_ms": self.timing.session_ms, "rebalance_timeout_ms": self.timing.rebalance_ms,
                    "protocol_type": "consumer",
                    "protocols": [{"name": self.cfg.assignor, "metadata": self.subscription(req.subscription)}],
                    "reason": None}
        elif kind is SyncGroup:
            api, version = "SyncGroup", 5
            body = {"group_id": GROUP_ID, "generation_id": req.generation, "member_id": self.string(req.member_id),
                    "group_instance_id": iid, "protocol_type": "consumer", "protocol_name": self.cfg.assignor,
                    "assignments": [{"member_id": self.string(m), "assignment": self.assignment(a)}
                                    for m, a in req.assignments]}
        elif kind is Heartbeat:
            api, version = "Heartbeat", 4
            body = {"group_id": GROUP_ID, "generation_id": req.generation, "member_id": self.string(req.member_id),
                    "group_instance_id": iid}
        elif kind is LeaveGroup:
            api, version = "LeaveGroup", 4
            body = {"group_id": GROUP_ID, "members": [
                {"member_id": self.string(m), "group_instance_id": self.instance(i), "reason": None}
                for m, i in req.members]}
        else:
            api, version = "OffsetCommit", 8
            body = {"group_id": GROUP_ID, "generation_id": req.generation, "member_id": self.string(req.member_id),
                    "group_instance_id": iid, "topics": [
                        {"name": tp["topic"], "partitions": [{"partition": p, "offset": 0, "metadata": None}
                                                             for p in tp["partitions"]]}
                        for tp in topic_partitions(self.cfg, req.partitions)]}
        self._record(now, "request", conn, correlation_id=cid, client_id=self.client_id(slot_of(conn)), api=api,
                     version=version, body=body)

    def response(self, now: float, conn: int, resp, before, after) -> None:
        names_before = set(self.live)
        self.live = {m.member_id for m in after.members}.union(after.pending)
        kind = type(resp).__name__.removesuffix("Response")
        error = resp.error.name
        if kind == "JoinGroup":
            ok = resp.error == Error.NONE
            body = {"error": error, "generation_id": resp.generation,
                    "protocol_type": "consumer" if ok else None, "protocol_name": self.cfg.assignor if ok else None,
                    "leader": self.known(resp.leader), "skip_assignment": resp.skip_assignment,
                    "member_id": self.known(resp.member_id),
                    "members": [{"member_id": self.known(m), "group_instance_id": self.instance(i),
                                 "metadata": self.subscription(sub)} for m, i, sub in resp.members]}
        elif kind == "SyncGroup":
            ok = resp.error == Error.NONE
            body = {"error": error, "protocol_type": "consumer", "protocol_name": self.cfg.assignor if ok else None,
                    "assignment": self.assignment(resp.assignment) if ok and resp.assignment is not None else None}
        elif kind == "Heartbeat":
            body = {"error": error}
        elif kind == "LeaveGroup":
            body = {"error": error, "members": [
                {"member_id": self.string(m) if m in names_before else "", "group_instance_id": self.instance(i),
                 "error": e.name} for m, i, e in resp.members]}
        else:
            body = {"topics": self._commit_topics(conn, error)}
        cid = self.correlation[conn]
        version = {"JoinGroup": 5 if self.static else 3, "SyncGroup": 5, "Heartbeat": 4, "LeaveGroup": 4,
                   "OffsetCommit": 8}[kind]
        self._record(now, "response", conn, correlation_id=cid, api=kind, version=version, body=body)

    def _commit_topics(self, conn: int, error: str) -> list:
        for record in reversed(self.records):
            if record["type"] == "request" and record["connection"] == self.conns[conn]:
                return [{"name": t["name"], "partitions": [{"partition": p["partition"], "error": error}
                                                           for p in t["partitions"]]}
                        for t in record["body"]["topics"]]
        return []

    def text(self) -> str:
        return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in self.records)


def emit(path, cfg: GroupConfig, members: int, static: bool = False, script=(), timing: Timing = Timing(),
         seed: int = 1, until_ms: int = 120_000) -> int:
    """Run the model for ``until_ms`` simulated ms (``script``: checker/simulation.py's
    ``((time_ms, action, slot), ...)`` from time 0; ``members`` start within the
    first heartbeat interval) and write its trace to ``path`` atomically. Returns
    the number of records (header included). Raises ConfigError for a protocol
    other than eager or cooperative."""
    rng = random.Random(seed)
    recorder = Recorder(cfg, static, timing, random.Random(f"{seed}:names"))
    sim = Simulation(cfg, members, static, timing, rng, observer=recorder)
    for time, action, slot in script:
        sim.act_at(time, action, slot)
    sim.run_until(until_ms)
    atomic_write(Path(path), recorder.text())
    return len(recorder.records)
