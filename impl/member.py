"""A group member on real sockets (``rebalance member`` and ``MemberRuntime``).

It runs the model's member handler, ``model.member.handle``, and its assignors:
the runtime feeds it ``Start``, ``HeartbeatDue`` every heartbeat interval,
``Leave`` on close and the coordinator's responses, and carries out its outputs
(``Send``: a request on the wire; ``Callback``: the listener's
on_partitions_revoked / assigned / lost), and ``CommitDue`` when the application
commits (``commit``), sending the model's OffsetCommit (R41) as OffsetCommit v8
with the application's positions. It speaks JoinGroup v9, SyncGroup v5,
Heartbeat v4, LeaveGroup v5 and OffsetCommit v8 to the coordinator found with FindCoordinator,
under the protocol name of the model's assignor (``cooperative-sticky`` for the
cooperative protocol) with Kafka's consumer-protocol bytes, so it can share a
group with librdkafka and Java consumers. The model sends one request at a
time, and so does the runtime.

Limits: the eager and cooperative protocols (the deferred protocol's echo has no
place in Kafka's subscription bytes yet); a lost coordinator connection ends
the member with ConnectionError (no reconnection).
"""
from __future__ import annotations

import asyncio

from rebalance.model.config import DEFAULT_ASSIGNOR, GroupConfig
from rebalance.model.member import NEW_CONSUMER, handle
from rebalance.model.protocol import (
    Error, Heartbeat, HeartbeatDue, HeartbeatResponse, JoinGroup,
    CommitDue, JoinGroupResponse, Leave, LeaveGroup, LeaveGroupResponse, OffsetCommit, OffsetCommitResponse, Send,
    Start, SyncGroup, SyncGroupResponse,
)

from .consumer_protocol import (
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, topic_partitions,
)
from .ids import Ids
from .observed import ObservedLog, now_ms
from .trace import Recorder, settings
from .wire import Api, FrameError, read_frame, read_response, request_frame


class Wire:
    """One client connection: ``await call(api, version, **fields)`` sends a request
    and returns the response payload (kio). Raises ConnectionError if the peer
    closes. ``trace``: a Recorder given the connection, its group requests and
    responses (as this client sent and read them) and its close."""

    def __init__(self, reader, writer, client_id: str, trace: Recorder | None = None):
        self.reader, self.writer, self.client_id = reader, writer, client_id
        self.correlation = 0
        self.trace = trace if trace is not None and trace.enabled else None
        self.name = self.trace.open(writer.get_extra_info("sockname")[0]) if self.trace else None

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, trace: Recorder | None = None) -> "Wire":
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, client_id, trace)

    async def call(self, api: int, version: int, **fields):
        self.correlation += 1
        frame = request_frame(api, version, self.correlation, self.client_id, fields)
        if self.trace:
            self.trace.request(self.name, memoryview(frame)[4:])
        self.writer.write(frame)
        await self.writer.drain()
        try:
            response = await read_frame(self.reader)
        except (asyncio.IncompleteReadError, FrameError) as e:
            self.close()
            raise ConnectionError(f"the broker closed the connection or sent a bad frame: {e}") from None
        if self.trace:
            self.trace.response(self.name, response)
        correlation, body = read_response(response, api, version)
        if correlation != self.correlation:
            raise ConnectionError(f"response {correlation} to request {self.correlation}")
        return body

    def close(self) -> None:
        self.writer.close()
        if self.trace:
            self.trace.close(self.name)
            self.trace = None


class MemberRuntime:
    """One consumer group member. ``bootstrap``: "host:port"; ``topics``: topic
    names (their partition counts come from Metadata); ``protocol``: "cooperative"
    or "eager" (with ``assignor``, default cooperative-sticky / range);
    ``instance_id``: group.instance.id for static membership (KIP-345); timeouts
    in ms; ``listener(kind, partitions)`` is called for every model Callback with
    kind "revoked" / "assigned" / "lost" and [(topic, partition), ...]; ``trace``: a
    Recorder ("member") for the connection to the coordinator, begun once the
    topics are known (spec/TRACE.md); ``observe``: an ObservedLog (spec/OBSERVED.md)
    given every callback (an assignment at its entry, a revocation or loss at its
    exit) and every commit; ``mutations``: known-bad member behaviours
    (model/mutations.py REGISTRY) the model's handler runs with, so that a trace of
    a wrong member can be recorded (ConfigError for an unknown one)."""

    def __init__(self, bootstrap: str, group: str, topics, protocol: str = "cooperative", assignor: str | None = None,
                 instance_id: str | None = None, client_id: str = "rebalance-member", session_ms: int = 10_000,
                 rebalance_ms: int = 30_000, heartbeat_ms: int = 1_000, listener=None, trace: Recorder | None = None,
                 observe: ObservedLog | None = None, mutations=()):
        host, _, port = bootstrap.rpartition(":")
        self.bootstrap = (host, int(port))
        self.group, self.topic_names, self.protocol = group, tuple(topics), protocol
        self.assignor = assignor or DEFAULT_ASSIGNOR[protocol]
        self.instance_id, self.client_id = instance_id, client_id
        self.session_ms, self.rebalance_ms, self.heartbeat_ms = session_ms, rebalance_ms, heartbeat_ms
        self.listener, self.trace, self.observe = listener, trace, observe
        self.positions: dict = {}  # (topic, partition) -> the application's next offset
        self.committed: str | None = None  # the outcome of the last commit sent
        self.mutations = frozenset(mutations)
        self.cfg = None
        self.state = NEW_CONSUMER
        self.ids = Ids()  # member.id and group.instance.id strings <-> the model's ints
        self.lock = asyncio.Lock()
        self.wire = None
        self._beat = None

    @property
    def owned(self) -> list:
        """[(topic, partition), ...] owned now."""
        return self._partitions(self.state.owned)

    async def start(self) -> None:
        """Find the coordinator, connect and join. Raises ConnectionError or
        ValueError (a topic the broker does not have)."""
        boot = await Wire.open(*self.bootstrap, self.client_id)
        try:
            self.cfg = await self._configure(boot)
            found = await boot.call(Api.FIND_COORDINATOR, 3, key=self.group, key_type=0)
        finally:
            boot.close()
        if self.trace is not None:
            self.trace.begin(settings(self.cfg.topics))
        if self.observe is not None:
            self.observe.begin(self.cfg.topics, self.group)
        self.wire = await Wire.open(found.host, found.port, self.client_id, self.trace)
        await self._step(Start(self.ids.instance(self.instance_id)))
        self._beat = asyncio.create_task(self._heartbeats())

    async def _configure(self, boot: Wire) -> GroupConfig:
        """The model's configuration: the topics' partition counts from Metadata.
        Raises ValueError for a topic the broker does not have."""
        meta = await boot.call(Api.METADATA, 9, topics=[{"name": t} for t in self.topic_names],
                               allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                               include_topic_authorized_operations=False)
        counts = {t.name: len(t.partitions) for t in meta.topics if t.error_code == 0}
        missing = [t for t in self.topic_names if t not in counts]
        if missing:
            raise ValueError(f"the broker has no topic {', '.join(missing)}")
        return GroupConfig(topics=tuple((t, counts[t]) for t in self.topic_names), protocol=self.protocol,
                           assignor=self.assignor, mutations=self.mutations)

    async def commit(self, positions: dict | None = None) -> str | None:
        """Commit: ``positions`` {(topic, partition): offset} update the application's
        positions, then the model decides (R41: only a Stable member owning
        partitions commits, all it owns; a partition never positioned commits 0).
        Returns "ok", the error's name, or None when the model sent nothing."""
        self.positions.update(positions or {})
        self.committed = None
        await self._step(CommitDue())
        return self.committed

    async def close(self) -> None:
        """Leave gracefully: revoke (listener) and LeaveGroup, unless static (KIP-345).
        The heartbeat task is cancelled between requests, never in the middle of one:
        a Heartbeat cancelled while it waits for its response would leave that
        response for the LeaveGroup to read (a correlation id mismatch)."""
        if self._beat is not None:
            async with self.lock:
                self._beat.cancel()
        if self.wire is not None:
            await self._step(Leave())
            self.wire.close()

    # --- the model --------------------------------------------------------------------
    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_ms / 1000)
            await self._step(HeartbeatDue())

    async def _step(self, event) -> None:
        async with self.lock:
            while event is not None:
                self.state, outputs = handle(self.cfg, self.state, event)
                self._stepped()
                event = None
                for out in outputs:
                    if type(out) is Send:
                        event = await self._send(out.request)  # at most one Send per step
                    else:
                        self._callback(out.kind, self._partitions(out.partitions))

    def _stepped(self) -> None:
        """After each step of the model, before its outputs are carried out: the
        Streams member shows its tasks here (impl/streams_member.py)."""

    def _callback(self, kind: str, partitions: list) -> None:
        if self.observe is not None and kind == "assigned":
            self.observe.callback(kind, partitions)
        if self.listener is not None:
            self.listener(kind, partitions)
        if self.observe is not None and kind != "assigned":
            self.observe.callback(kind, partitions)

    def _partitions(self, mask: int) -> list:
        return [(tp["topic"], p) for tp in topic_partitions(self.cfg, mask) for p in tp["partitions"]]

    # --- model requests <-> wire ---------------------------------------------------
    async def _send(self, req):
        kind, w, cfg = type(req), self.wire, self.cfg
        instance = self.instance_id
        if kind is JoinGroup:
            r = await w.call(Api.JOIN_GROUP, 9, group_id=self.group, session_timeout=self.session_ms,
                             rebalance_timeout=self.rebalance_ms, member_id=self.ids.member_names[req.member_id],
                             group_instance_id=instance, protocol_type="consumer", reason=None,
                             protocols=[{"name": self.assignor,
                                         "metadata": encode_subscription(cfg, req.subscription)}])
            members = tuple((self.ids.member(m.member_id), self.ids.instance(m.group_instance_id),
                             decode_subscription(cfg, m.metadata)) for m in r.members)
            return JoinGroupResponse(_error(r.error_code), self.ids.member(r.member_id), r.generation_id,
                                     self.ids.member(r.leader), members, r.skip_assignment, r.protocol_name or "")
        if kind is SyncGroup:
            r = await w.call(Api.SYNC_GROUP, 5, group_id=self.group, generation_id=req.generation,
                             member_id=self.ids.member_names[req.member_id], group_instance_id=instance,
                             protocol_type="consumer", protocol_name=self.assignor,
                             assignments=[{"member_id": self.ids.member_names[m], "assignment": encode_assignment(cfg, a)}
                                          for m, a in req.assignments])
            return SyncGroupResponse(_error(r.error_code), decode_assignment(cfg, r.assignment))
        if kind is Heartbeat:
            r = await w.call(Api.HEARTBEAT, 4, group_id=self.group, generation_id=req.generation,
                             member_id=self.ids.member_names[req.member_id], group_instance_id=instance)
            return HeartbeatResponse(_error(r.error_code))
        if kind is LeaveGroup:
            r = await w.call(Api.LEAVE_GROUP, 5, group_id=self.group, members=[
                {"member_id": self.ids.member_names[m], "group_instance_id": None, "reason": None} for m, _ in req.members])
            return LeaveGroupResponse(_error(r.error_code))
        if kind is OffsetCommit:
            return await self._commit(req)
        raise TypeError(f"the member runtime cannot send {req!r}")

    async def _commit(self, req: OffsetCommit) -> OffsetCommitResponse:
        offsets = [(t, p, self.positions.get((t, p), 0)) for t, p in self._partitions(req.partitions)]
        topics: dict = {}
        for t, p, o in offsets:
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                             "committed_leader_epoch": -1, "committed_metadata": ""})
        sent = now_ms()
        r = await self.wire.call(Api.OFFSET_COMMIT, 8, group_id=self.group, generation_id_or_member_epoch=req.generation,
                                 member_id=self.ids.member_names[req.member_id], group_instance_id=self.instance_id,
                                 topics=[{"name": t, "partitions": ps} for t, ps in topics.items()])
        error = _error(next((p.error_code for t in r.topics for p in t.partitions if p.error_code), 0))
        self.committed = "ok" if error == Error.NONE else error.name
        if self.observe is not None:
            self.observe.commit(offsets, "ok" if error == Error.NONE else "error", sent,
                                None if error == Error.NONE else error.name)
        return OffsetCommitResponse(error)


def _error(code) -> Error:
    """The model's error for a wire error code. Raises RuntimeError for an error
    the model does not know (the member cannot go on)."""
    try:
        return Error(int(code))
    except ValueError:
        raise RuntimeError(f"the coordinator answered error code {int(code)}, which the model does not know") from None
