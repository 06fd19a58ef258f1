"""What a recorded trace (spec/TRACE.md, v2, as ``rebalance proxy`` writes it) says
happened to one group, in Kafka's terms: the facts a scenario's situation is checked
against and the outcome the side-by-side table shows.

``Facts(path, group)`` reads the trace once. Members are named by their client.id (the
agents' names), so facts from Kafka and from serve compare although member.ids differ.
Times are the trace's ``t_ms`` (wall-clock ms).
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


class Facts:
    def __init__(self, path: Path, group: str):
        records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        self.header, self.group = records[0], group
        self.client_of: dict = {}  # connection -> client.id
        requests: dict = {}  # (connection, correlation id) -> request record
        self.exchanges: list = []  # (request, response), in response order, of this group
        self.requests: list = []  # every request of this group, answered or not, in order
        self.other: list = [r for r in records[1:] if r["type"] not in ("request", "response")]
        for r in records[1:]:
            if r["type"] == "request":
                self.client_of[r["connection"]] = r.get("client_id")
                requests[(r["connection"], r["correlation_id"])] = r
                if self._ours(r):
                    self.requests.append(r)
            elif r["type"] == "response":
                q = requests.pop((r["connection"], r["correlation_id"]), None)
                if q and self._ours(q):
                    self.exchanges.append((q, r))

    def _ours(self, request: dict) -> bool:
        body = request["body"]
        if "group_id" in body:
            return body["group_id"] == self.group
        return any((g if isinstance(g, str) else g.get("group_id")) == self.group for g in body.get("groups", ()))

    def client_requests(self, api: str, client: str) -> list:
        """``client``'s requests of ``api``, answered or not."""
        return [q for q in self.requests if q["api"] == api and self.client(q) == client]

    def client(self, record: dict) -> str:
        return self.client_of.get(record["connection"]) or "?"

    def of(self, api: str, error: str | None = None, after: float = 0) -> list:
        """(request, response) pairs of ``api``, answered at or after ``after``, with
        ``error`` (a Kafka error name) when given."""
        return [(q, r) for q, r in self.exchanges if q["api"] == api and r["t_ms"] >= after
                and (error is None or r["body"].get("error") == error)]

    def joins(self, after: float = 0) -> list:
        """Successful JoinGroup answers: (t_ms, client, generation, members if leader)."""
        return [(r["t_ms"], self.client(q), r["body"]["generation_id"],
                 sorted(m["member_id"] for m in r["body"]["members"]) or None)
                for q, r in self.of("JoinGroup", "NONE", after)]

    def generations(self, after: float = 0) -> list:
        """The distinct generations answered to JoinGroups, in order."""
        seen: list = []
        for _, _, g, _ in self.joins(after):
            if g not in seen:
                seen.append(g)
        return seen

    def members_of(self, generation: int) -> list:
        """Client ids answered NONE to a JoinGroup of ``generation``."""
        return sorted({c for _, c, g, _ in self.joins() if g == generation})

    def assignments(self, generation: int | None = None) -> dict:
        """{client: sorted partitions} from the SyncGroup answers of ``generation``
        (default: the last generation that has any)."""
        syncs = [(q, r) for q, r in self.of("SyncGroup", "NONE")]
        if generation is None:
            generation = max((q["body"]["generation_id"] for q, _ in syncs), default=None)
        out = {}
        for q, r in syncs:
            if q["body"]["generation_id"] == generation:
                a = r["body"].get("assignment") or {}
                out[self.client(q)] = sorted(p for t in a.get("assigned_partitions", ()) for p in t["partitions"])
        return out

    def errors(self) -> Counter:
        """{"API ERROR": count} of every answer with an error other than NONE."""
        return Counter(f"{q['api']} {r['body']['error']}" for q, r in self.exchanges
                       if r["body"].get("error") not in (None, "NONE"))

    def first(self, api: str, error: str | None = None, after: float = 0, client: str | None = None):
        """The first (request, response) as ``of`` selects, of ``client`` if given, or None."""
        for q, r in self.of(api, error, after):
            if client is None or self.client(q) == client:
                return q, r
        return None

    def settled_ms(self, after: float) -> float | None:
        """ms from ``after`` to the last SyncGroup answer NONE of the last generation
        begun after it (a rebalance's latency as clients see it), or None; KIP-848: to the
        last heartbeat answer NONE that carried an assignment."""
        if self.of("ConsumerGroupHeartbeat"):
            given = [t for t, _, _, e, _, a in self.heartbeats(after) if e == "NONE" and a is not None]
            return max(given) - after if given else None
        gens = self.generations(after)
        if not gens:
            return None
        last = [r["t_ms"] for q, r in self.of("SyncGroup", "NONE", after) if q["body"]["generation_id"] == gens[-1]]
        return max(last) - after if last else None

    # -- KIP-848 (ConsumerGroupHeartbeat) --------------------------------------------------
    def heartbeats(self, after: float = 0, client: str | None = None) -> list:
        """Answered ConsumerGroupHeartbeats, of ``client`` if given: (t_ms, client, the epoch
        sent, the error, the epoch answered, the assignment answered: sorted partitions, or
        None when not sent)."""
        out = []
        for q, r in self.of("ConsumerGroupHeartbeat", None, after):
            a = r["body"].get("assignment")
            if client is None or self.client(q) == client:
                given = None if a is None else sorted(p for t in a for p in t["partitions"])
                out.append((r["t_ms"], self.client(q), q["body"]["member_epoch"], r["body"]["error"],
                            r["body"]["member_epoch"], given))
        return out

    def joined(self, client: str, after: float = 0):
        """The first heartbeat of ``client`` at epoch 0 (a join) answered NONE, or None."""
        return next((h for h in self.heartbeats(after, client) if h[2] == 0 and h[3] == "NONE"), None)

    def given(self, after: float = 0, before: float = float("inf")) -> dict:
        """{client: the last assignment answered to it NONE} between ``after`` and ``before``."""
        return {c: a for t, c, _, e, _, a in self.heartbeats(after) if e == "NONE" and a is not None and t < before}

    def epochs(self, after: float = 0) -> list:
        """The distinct member epochs answered NONE (above 0), in order."""
        seen: list = []
        for *_, e, epoch, _ in self.heartbeats(after):
            if e == "NONE" and epoch > 0 and epoch not in seen:
                seen.append(epoch)
        return seen

    def final_assignment(self) -> dict:
        """{client: the last assignment it was given} of the group's last members: the clients
        answered NONE at the highest member epoch (one that left or was fenced never reaches
        the epoch its departure bumped the group to)."""
        last = max(self.epochs(), default=None)
        members = {c for _, c, _, e, epoch, _ in self.heartbeats() if e == "NONE" and epoch == last}
        return {c: a for c, a in self.given().items() if c in members}

    def outcome(self) -> dict:
        """The observable outcome for the side-by-side table (KIP-848: the member epochs
        answered and the final members' assignments, instead of generations)."""
        if self.of("ConsumerGroupHeartbeat"):
            epochs = self.epochs()
            return {"epochs": len(epochs), "last_epoch": max(epochs, default=None),
                    "assignment": self.final_assignment(), "errors": dict(sorted(self.errors().items()))}
        gens = self.generations()
        return {"generations": len(gens), "last_generation": gens[-1] if gens else None,
                "assignment": self.assignments(), "errors": dict(sorted(self.errors().items()))}
