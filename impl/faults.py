"""Fault injection for ``rebalance serve`` (issue 19 item 3): what a test steers.

A ``Faults`` layer sits in the coordinator's request path (impl/coordinator.py
``Coordinator._serve``): a request passes ``before`` on its way to dispatch and its
response passes ``after`` on its way out. Operations:

* ``expire(group, member_id)``: the member's session timeout fires now, as the
  model's ``SessionTimeout`` input (R11: a member held at a barrier stays);
* ``rebalance(group)``: the model's ``ForceRebalance`` input (R56);
* ``inject(api, error=..., delay_ms=..., drop=..., member=..., count=..., for_ms=...)``:
  a rule for the next ``count`` requests of ``api`` (or for ``for_ms`` ms; both
  None: until cleared) from one member (its member.id or client.id) or all:
  answer with ``error`` (a Kafka error name or code) instead of the coordinator,
  delay the response ``delay_ms`` ms, or drop it (the client sees its request time
  out, request.timeout.ms);
* ``coordinator_away(error)`` / ``coordinator_back()``: every group request is
  answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE and FindCoordinator
  COORDINATOR_NOT_AVAILABLE (the group's coordinator is moving to another broker:
  GroupCoordinator.onResignation; KafkaApis.handleFindCoordinatorRequest while the
  new one loads it), until brought back;
* ``pause()`` / ``resume()``: requests are read but held before dispatch (a broker
  whose request handler threads stall); the coordinator's timers keep running, so
  members whose heartbeats are held past session.timeout.ms are expired, as Kafka
  would (its heartbeat purgatory counts heartbeats handled, not received).

Expiry and forced rebalances are coordinator inputs stepped through the model's
handler (``GroupRuntime.step``), never re-implemented here. Every injected fault
is a ``fault`` record in the trace (spec/TRACE.md), which ``rebalance conform``
understands (checker/conform/coordinator.py). Errors raised: ``FaultError`` (bad
input: an unknown group, member, API or error name).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from rebalance.model.protocol import GROUP_STATE_NAMES, ForceRebalance, SessionTimeout

from . import broker
from .consumer_protocol import assignment_json
from .wire import KAFKA_NAMES, Api

NOT_COORDINATOR = ErrorCode.not_coordinator.value  # 16
COORDINATOR_NOT_AVAILABLE = ErrorCode.coordinator_not_available.value  # 15
# Kafka's API names (ApiKeys) of the APIs serve answers
API_NAMES = {KAFKA_NAMES[api]: api for api in (
    Api.FETCH, Api.LIST_OFFSETS, Api.METADATA, Api.OFFSET_COMMIT, Api.OFFSET_FETCH, Api.FIND_COORDINATOR,
    Api.JOIN_GROUP, Api.HEARTBEAT, Api.LEAVE_GROUP, Api.SYNC_GROUP, Api.DESCRIBE_GROUPS, Api.API_VERSIONS)}
NAME_OF = {key: name for name, key in API_NAMES.items()}
# the APIs a group's coordinator answers (away: NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE)
COORDINATOR_APIS = frozenset((Api.OFFSET_COMMIT, Api.OFFSET_FETCH, Api.JOIN_GROUP, Api.HEARTBEAT,
                              Api.LEAVE_GROUP, Api.SYNC_GROUP, Api.DESCRIBE_GROUPS))


# the largest values an operation takes (the control endpoint's input is bounded): an hour's delay, a day's
# rule, a million requests; rules at once; a member.id or client.id's length
BOUNDS = {"delay_ms": 3_600_000, "for_ms": 86_400_000, "count": 1_000_000}
MAX_RULES, MAX_NAME = 1000, 1024


class FaultError(ValueError):
    """Bad fault input: the message names the problem."""


def api_key(name: str) -> int:
    """The ApiKeys value of a Kafka API name ("Heartbeat"). Raises FaultError."""
    if name not in API_NAMES:
        raise FaultError(f"unknown API {name!r} (one of {', '.join(sorted(API_NAMES))})")
    return API_NAMES[name]


def error_code(error) -> int:
    """A Kafka error code from its name ("NOT_COORDINATOR", any case) or number. Raises FaultError."""
    if isinstance(error, int) or (isinstance(error, str) and error.lstrip("-").isdigit()):
        code = int(error)
        try:
            ErrorCode(code)
        except ValueError:
            raise FaultError(f"unknown error code {code}") from None
        return code
    try:
        return ErrorCode[str(error).lower()].value
    except KeyError:
        raise FaultError(f"unknown error {error!r} (a Kafka error name such as NOT_COORDINATOR)") from None


def error_response(cluster: broker.Cluster, api: int, version: int, b, code: int) -> dict:
    """The response to request body ``b`` of ``api`` at ``version`` that carries error
    ``code`` wherever that API reports one (per partition for OffsetCommit and
    OffsetFetch, per group for DescribeGroups, per key for FindCoordinator v4)."""
    if api == Api.JOIN_GROUP:
        return {"throttle_time": 0, "error_code": code, "generation_id": -1, "protocol_type": None,
                "protocol_name": None if version >= 7 else "", "leader": "", "skip_assignment": False,
                "member_id": b.member_id, "members": []}
    if api == Api.SYNC_GROUP:
        return {"throttle_time": 0, "error_code": code, "protocol_type": None, "protocol_name": None,
                "assignment": b""}
    if api == Api.HEARTBEAT:
        return {"throttle_time": 0, "error_code": code}
    if api == Api.LEAVE_GROUP:
        return {"throttle_time": 0, "error_code": code, "members": []}
    if api == Api.OFFSET_COMMIT:
        return {"throttle_time": 0, "topics": [{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]} for t in b.topics]}
    if api == Api.OFFSET_FETCH:
        return {"throttle_time": 0, "error_code": code, "topics": [{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": code} for p in t.partition_indexes]} for t in b.topics or ()]}
    if api == Api.DESCRIBE_GROUPS:
        return {"throttle_time": 0, "groups": [{"error_code": code, "group_id": g, "group_state": "",
                                                "protocol_type": "", "protocol_data": "", "members": []}
                                               for g in b.groups]}
    if api == Api.FIND_COORDINATOR:
        found = broker.find_coordinator(cluster, b)
        return {**found, "error_code": code, "coordinators": [{**k, "error_code": code} for k in found["coordinators"]]}
    raise FaultError(f"cannot inject an error into {NAME_OF.get(api, api)} "
                     f"(group APIs and FindCoordinator only)")


ERROR_APIS = frozenset(COORDINATOR_APIS | {Api.FIND_COORDINATOR})


@dataclass
class Rule:
    """One injection: ``api`` (ApiKeys), ``member`` (a member.id or client.id; None:
    every member), what to do (``error`` code, ``delay_ms``, or ``drop``), to the
    request on its way in (``request``: the proxy only) or the response on its way out,
    how many more requests (``count``; None: any) and until when (``until``,
    time.monotonic() s; None: no end)."""

    api: int
    member: str | None
    error: int | None = None
    delay_ms: int = 0
    drop: bool = False
    count: int | None = None
    until: float | None = None
    request: bool = False

    def live(self, now: float) -> bool:
        return (self.count is None or self.count > 0) and (self.until is None or now < self.until)

    def describe(self) -> dict:
        return {"api": NAME_OF.get(self.api, self.api), "member": self.member,
                "error": None if self.error is None else ErrorCode(self.error).name.upper(),
                "delay_ms": self.delay_ms, "drop": self.drop, "request": self.request, "count": self.count,
                "for_ms": None if self.until is None else max(0, round((self.until - time.monotonic()) * 1000))}


def member_of(req) -> str:
    """The member.id a request names ("" for none; LeaveGroup v3+: its first member)."""
    b = req.body
    if hasattr(b, "member_id"):
        return b.member_id
    members = getattr(b, "members", None)
    return members[0].member_id if members else ""


class Injections:
    """The rules of ``inject``: serve's fault layer (``Faults``: errors, and delays and
    drops of responses) and ``rebalance proxy`` (impl/proxy.py: delays and drops, of
    responses or of requests on their way to the broker: ``errors=False, requests=True``)
    each keep one."""

    def __init__(self, errors: bool = True, requests: bool = False):
        self.rules: list[Rule] = []
        self.errors, self.requests = errors, requests

    def match(self, api_key: int, member, client_id: str, want) -> Rule | None:
        """The first live rule for a request of ``api_key`` from ``member`` (its member.id,
        or a callable giving it, called only when a rule names a member) or ``client_id``
        for which ``want(rule)``; counted down. None if none."""
        now = time.monotonic()
        self.rules = [r for r in self.rules if r.live(now)]
        for rule in self.rules:
            if rule.api != api_key or not want(rule):
                continue
            if rule.member is not None:
                member = member() if callable(member) else member
                if rule.member not in (member, client_id):
                    continue
            if rule.count is not None:
                rule.count -= 1
            return rule
        return None

    def inject(self, api: str, error=None, delay_ms: int | None = None, drop: bool = False,
               member: str | None = None, count: int | None = None, for_ms: int | None = None,
               request: bool = False) -> dict:
        """Add a rule (see the module docstring): exactly one of ``error``,
        ``delay_ms`` (ms, 1..BOUNDS) and ``drop``; ``count`` and ``for_ms`` (ms)
        within 1..BOUNDS when given; ``request``: to the request, not the response (the
        proxy's); at most MAX_RULES rules. Returns the rule. Raises FaultError."""
        key = api_key(api)
        if sum((error is not None, delay_ms is not None, bool(drop))) != 1:
            raise FaultError("give exactly one of error, delay_ms and drop")
        if request and not self.requests:
            raise FaultError("serve delays or drops responses; delay or drop a request with rebalance proxy")
        if error is not None:
            if not self.errors:
                raise FaultError("the proxy delays or drops responses; an error is the broker's to give "
                                 "(rebalance serve's inject)")
            code = error_code(error)
            if key not in ERROR_APIS:
                raise FaultError(f"cannot inject an error into {api} (group APIs and FindCoordinator only)")
        else:
            code = None
        for value, what in ((delay_ms, "delay_ms"), (count, "count"), (for_ms, "for_ms")):
            if value is not None and (type(value) is not int or not 0 < value <= BOUNDS[what]):
                raise FaultError(f"{what} must be an integer from 1 to {BOUNDS[what]}, not {value!r}")
        if member is not None and (not isinstance(member, str) or len(member) > MAX_NAME):
            raise FaultError(f"member must be a member.id or client.id of at most {MAX_NAME} characters")
        if len(self.rules) >= MAX_RULES:
            raise FaultError(f"at most {MAX_RULES} rules at once (clear some)")
        rule = Rule(key, member or None, code, delay_ms or 0, bool(drop), count,
                    None if for_ms is None else time.monotonic() + for_ms / 1000, bool(request))
        self.rules.append(rule)
        return rule.describe()

    def clear(self) -> dict:
        """Remove every rule; the number removed."""
        n, self.rules = len(self.rules), []
        return {"cleared": n}

    def live(self) -> list:
        now = time.monotonic()
        return [r.describe() for r in self.rules if r.live(now)]


class Faults:
    """The fault layer of one Coordinator (``server``). All methods run on its loop."""

    def __init__(self, server):
        self.server = server
        self.injections = Injections()
        self.away: int | None = None  # the error group requests get while the coordinator is away
        self.running = asyncio.Event()
        self.running.set()
        self.held = 0  # requests held by a pause

    # --- the request path ------------------------------------------------------------
    def _record(self, fault: str, **fields) -> None:
        self.server.trace.fault(fault, **fields)

    def _match(self, c, req, want) -> Rule | None:
        return self.injections.match(req.api_key, lambda: member_of(req), c.client_id, want)

    async def before(self, c, name, req) -> dict | None:
        """Before dispatch: wait while paused; the injected response body if the
        request is answered by a fault (recorded as a ``fault`` record ``error``
        before the request's own record), else None. With the store offline, group
        requests are answered NOT_COORDINATOR and FindCoordinator
        COORDINATOR_NOT_AVAILABLE, as Kafka answers them once the log directory
        holding the group's __consumer_offsets partition is offline
        (CoordinatorOperationExceptionHelper.handleOperationException maps
        KAFKA_STORAGE_ERROR to NOT_COORDINATOR)."""
        if not self.running.is_set():
            self.held += 1
            try:
                await self.running.wait()
            finally:
                self.held -= 1
        key, code, how = req.api_key, None, None
        if self.away is not None and key in ERROR_APIS:
            code, how = (COORDINATOR_NOT_AVAILABLE if key == Api.FIND_COORDINATOR else self.away), "coordinator_away"
        elif self.server.store.offline is not None and key in ERROR_APIS:  # the group's log is offline
            code, how = (COORDINATOR_NOT_AVAILABLE if key == Api.FIND_COORDINATOR else NOT_COORDINATOR), "store_offline"
        elif self.injections.rules:
            rule = self._match(c, req, lambda r: r.error is not None)
            if rule is not None:
                code, how = rule.error, "inject"
        if code is None:
            return None
        self._record("error", connection=name, correlation_id=req.correlation_id, api=NAME_OF[key],
                     error=ErrorCode(code).name.upper(), cause=how)
        return error_response(self.server.cluster, key, req.version, req.body, code)

    async def after(self, c, name, req) -> bool:
        """After dispatch, before the response is written: sleep a delay rule's
        ``delay_ms``; False if a drop rule drops the response. Both recorded."""
        if not self.injections.rules:
            return True
        rule = self._match(c, req, lambda r: r.error is None)
        if rule is None:
            return True
        api = NAME_OF.get(req.api_key, req.api_key)
        if rule.drop:
            self._record("drop", connection=name, correlation_id=req.correlation_id, api=api)
            return False
        self._record("delay", connection=name, correlation_id=req.correlation_id, api=api, delay_ms=rule.delay_ms)
        await asyncio.sleep(rule.delay_ms / 1000)
        return True

    # --- operations --------------------------------------------------------------------
    def _runtime(self, group: str):
        rt = self.server.groups.get(group)
        if rt is None:
            raise FaultError(f"no group {group!r} (groups: {', '.join(sorted(self.server.groups)) or 'none'})")
        return rt

    def expire(self, group: str, member_id: str) -> dict:
        """The member's session timeout fires now (R11, the model's SessionTimeout).
        Returns {"expired": whether it left the group}. Raises FaultError."""
        rt = self._runtime(group)
        if member_id not in rt.ids:
            raise FaultError(f"no member {member_id!r} in group {group!r} "
                             f"(members: {', '.join(sorted(rt.ids)) or 'none'})")
        self._record("expire", group=group, member_id=member_id)
        rt.step(SessionTimeout(rt.ids[member_id]))
        return {"expired": member_id not in rt.ids}

    def rebalance(self, group: str) -> dict:
        """The model's ForceRebalance input (R56). Returns {"state": the group's state after}."""
        rt = self._runtime(group)
        self._record("rebalance", group=group)
        rt.step(ForceRebalance())
        return {"state": GROUP_STATE_NAMES[rt.group.phase]}

    def inject(self, api: str, error=None, delay_ms: int | None = None, drop: bool = False,
               member: str | None = None, count: int | None = None, for_ms: int | None = None) -> dict:
        """Add a rule (``Injections.inject``). Raises FaultError."""
        return self.injections.inject(api, error, delay_ms, drop, member, count, for_ms)

    def clear(self) -> dict:
        """Remove every rule; the number removed."""
        return self.injections.clear()

    def coordinator_away(self, error="NOT_COORDINATOR") -> dict:
        code = error_code(error)
        if code not in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
            raise FaultError("the coordinator goes away with NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE")
        self.away = code
        self._record("coordinator_away", error=ErrorCode(code).name.upper())
        return {"away": ErrorCode(code).name.upper()}

    def coordinator_back(self) -> dict:
        self.away = None
        self._record("coordinator_back")
        return {"away": None}

    def pause(self) -> dict:
        self.running.clear()
        self._record("pause")
        return {"paused": True}

    def resume(self) -> dict:
        self.running.set()
        self._record("resume")
        return {"paused": False, "released": self.held}

    def records(self, topic: str) -> dict:
        """The records of ``topic`` in its partitions' logs (impl/records.py), by
        partition then offset: {"records": [{"partition", "offset", "timestamp_ms"}]}
        (keys and values stay in their batches, possibly compressed). Raises
        FaultError for a topic serve does not host."""
        partitions = self.server.cluster.partitions(topic)
        if partitions == 0:
            raise FaultError(f"no topic {topic!r}")
        return {"records": self.server.records.listing(topic, partitions)}

    def status(self) -> dict:
        """The layer's state and every group's: {"paused", "away", "rules", "groups":
        {group: {"state", "generation", "members": [{member_id, client_id, assignment}]}}}."""
        return {"paused": not self.running.is_set(),
                "away": None if self.away is None else ErrorCode(self.away).name.upper(),
                "rules": self.injections.live(),
                "groups": {gid: self.describe(gid) for gid in sorted(self.server.groups)}}

    def describe(self, group: str) -> dict:
        """A group as DescribeGroups gives it (``Coordinator._describe``), each member's
        assignment decoded (spec/TRACE.md's Assignment, or None):
        {"state", "generation", "protocol", "members": [{member_id, client_id, assignment}]}."""
        d, rt = self.server._describe(group), self.server.groups.get(group)
        return {"state": d["group_state"], "generation": rt.group.generation if rt else -1,
                "protocol": d["protocol_data"] or None,
                "members": [{"member_id": m["member_id"], "client_id": m["client_id"],
                             "assignment": assignment_json(d["protocol_type"], m["member_assignment"])}
                            for m in d["members"]]}
