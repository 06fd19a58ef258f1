"""The group coordinator on real sockets (``rebalance serve``).

An asyncio TCP server speaking Kafka's wire protocol (``wire``) for a one-broker
cluster (``broker``). Each group request becomes an input to the model's
coordinator handler, ``model.coordinator.handle``; its outputs are carried out:
``Reply`` outputs answer the connection they name, the model's armed timers
(``armed_timers``, timed by model/timing.py) become asyncio timers, and the group the model says to store
(``stored``, R37) is written to SQLite (``store``) before any reply goes out.
impl/ decides no protocol question: it translates names (Kafka's member.id and
group.instance.id strings to the model's ints), durations (ms from the requests)
and bytes.

Beside the groups: Produce, Fetch and ListOffsets on the partitions' logs
(``records``, impl/records.py), InitProducerId, the topic admin APIs
(``admin``: CreateTopics, DeleteTopics, DescribeConfigs, auto-creation) and the
group admin APIs answered here, ListGroups, OffsetDelete and DeleteGroups (the
last through the model's ``DeleteGroup`` input, R44); ``HANDLERS`` maps their API
keys to the methods that answer them.

Like Kafka's SocketServer, a connection's requests are handled one at a time,
in order: a JoinGroup held at the barrier holds its connection's next request
too. A frame that cannot be parsed closes its connection, and only it.

No request can starve another connection (Kafka handles requests on a pool of
threads, KafkaRequestHandlerPool, and expires a member only when its heartbeat
truly did not arrive):

* frames are bounded per API (``limits.request_max_bytes``);
* a frame above ``INLINE_BYTES`` is not decoded on the event loop: Metadata is
  decoded, answered and encoded in a worker process (``broker.answer``; kio's
  decoder holds the GIL, so a thread would not do), any other request (a
  Produce, Fetch or ListOffsets, whose answer needs the records log, or a group
  request) is decoded and its response encoded on a thread, while the model's
  steps and the log's appends stay on the loop, in order;
* a timer that comes due runs its step only once the connections that have
  bytes delivered have read and stepped them (``Coordinator.settle``): after a
  stall, the heartbeats already received restart their session timers before
  any session timer fires;
* the store is written on one writer thread, in order; the replies of a step
  that stored its group wait for the write, and later steps' replies wait
  behind them (R37: on disk before any reply goes out).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import mmap
import multiprocessing
import os
import time
import uuid
from collections import OrderedDict
from multiprocessing import shared_memory

from rebalance.model.config import KIP848, GroupConfig
from rebalance.model.consumer_group.timing import ConsumerTimeouts
from rebalance.model.coordinator import EMPTY_GROUP, Group, handle, session_refreshed, stored
from rebalance.model.protocol import (
    EMPTY_ASSIGNMENT, GROUP_STATE_NAMES, MAX_SERIAL, MAX_SLOTS, NO_INSTANCE_ID, NO_MEMBER_ID, RESPONSE_OF, DeleteGroup,
    Heartbeat, JoinGroup, LeaveGroup, OffsetCommit, Phase, Protocols, Receive, Reply, SyncGroup, connection, slot_of,
)
from rebalance.model.timing import (
    DEFAULT_TIMEOUTS, SessionBounds, Timeouts, duration_ms, joined_timeouts, rearm, session_timeout_error,
)

from . import admin, broker
from .consumer_group import ConsumerGroupRuntime
from .consumer_protocol import subscription_json
from .faults import NOT_COORDINATOR, Faults
from .limits import POOLED_FRAME_BYTES, Limits, MemoryPool, request_max_bytes
from .records import Records
from .store import GroupRecord, Store, StoreOffline
from .timers import SettledTimers
from .trace import Recorder, settings
from .wire import (
    Api, FrameError, UnsupportedVersion, ms, read_request, read_request_frame, request_key, response_frame,
)

log = logging.getLogger("rebalance.serve")

UNKNOWN_ID = -1  # a member.id string the coordinator never handed out
FETCH_WAIT_CAP_MS = 500  # the longest an empty Fetch is held, whatever max.wait.ms asks
INLINE_BYTES = 64 << 10  # frames up to this size are decoded and encoded on the event loop
WRITE_SLICE = 1 << 20  # a larger response is written a slice at a time
GONE_NAMES = 1024  # member.id strings of members gone kept for responses rendered after their step
SETTLE_ROUNDS = 16  # loop iterations a due timer waits, at most, for delivered requests to be stepped
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 68, 69, 86


class Connection:
    """One client connection: its peer host, streams, model connection id and
    client.id (from its first request; None and "" before), the group request it
    waits on (the response type and a future), if any, whether it is waiting
    for its next frame (``reading``) and when bytes last moved (``last_active``)."""

    def __init__(self, host: str, reader, writer):
        self.host, self.reader, self.writer = host, reader, writer
        self.conn, self.client_id = None, ""
        self.waiting = None
        self.reading = False
        self.shared = None  # the shared memory block of a large frame being read (Coordinator._alloc)
        self.last_active = asyncio.get_running_loop().time()  # bytes last read or written (loop time, s)

    def touch(self) -> None:
        self.last_active = asyncio.get_running_loop().time()

    def delivered(self) -> bool:
        """Bytes of a next request are delivered but not yet read and stepped."""
        return self.reading and bool(self.reader._buffer)  # StreamReader's buffer: what the socket delivered


class GroupRuntime(SettledTimers):
    """One group: the model's ``Group`` and what impl/ keeps beside it — the
    strings behind the model's member and instance ids (only those its members
    and pending member ids hold), each member's timeouts (ms), the asyncio timers,
    the last stored record (``in_store``: the store has a row for it) and since
    when it is Empty (``empty_since``, time.monotonic() s; None if not Empty; a
    loaded group counts from its load, Kafka from its stored state timestamp)."""

    def __init__(self, server: "Coordinator", group_id: str, record: GroupRecord | None = None):
        self.server, self.group_id, self.in_store = server, group_id, record is not None
        record = record or GroupRecord(EMPTY_GROUP, {}, {}, {})
        self.group, self.names, self.instances, self.timeouts = record
        self.ids = {name: mid for mid, name in self.names.items()}
        self.gone: OrderedDict = OrderedDict()  # model member id -> member.id string, of members gone, oldest first
        self.instance_names = {iid: name for name, iid in self.instances.items()}
        self.timers: dict = {}
        self.last_stored = record.group
        self.empty_since = time.monotonic() if self.group.phase == Phase.EMPTY else None
        self._sync_timers(None, NO_MEMBER_ID)

    def expired(self, now: float, retention_s: float, has_offsets: bool) -> bool:
        """Whether the group is removed at a retention check at ``now``: Empty, no
        pending member id, no timer armed, and no committed offsets or Empty for
        ``retention_s`` (GroupMetadataManager.cleanupGroupMetadata)."""
        return (self.empty_since is not None and not self.group.pending and not self.timers
                and (not has_offsets or now - self.empty_since >= retention_s))

    # --- names ------------------------------------------------------------------
    def member_id(self, name: str) -> int:
        return NO_MEMBER_ID if not name else self.ids.get(name, UNKNOWN_ID)

    def name(self, mid: int) -> str:
        """The member.id string of model member id ``mid``: a member's, a pending one's,
        or one of the last ``GONE_NAMES`` gone, so a response rendered after the step
        that removed its member still names it (a static member replaced while its
        JoinGroup is held is answered FENCED_INSTANCE_ID under its old member.id:
        GroupMetadata.replaceStaticMember, JoinGroupResult(oldMemberId, ...)); "" for none."""
        return self.names.get(mid) or self.gone.get(mid, "")

    def instance_id(self, name) -> int:
        """The model's instance id for a group.instance.id string: one no member holds
        for a string new to the group (freed after the step unless a member takes it)."""
        if not name:
            return NO_INSTANCE_ID
        if name not in self.instances:
            iid = self.instances[name] = max(self.instance_names, default=0) + 1
            self.instance_names[iid] = name
        return self.instances[name]

    def _forget_instances(self) -> None:
        """Keep the instance map to the group.instance.ids members hold (the model's
        static map is its members' instance ids), so unknown strings cost nothing."""
        if len(self.instances) > len(self.group.members):
            held = {m.instance_id for m in self.group.members}
            for name in [name for name, iid in self.instances.items() if iid not in held]:
                del self.instance_names[self.instances.pop(name)]

    def instance_name(self, iid: int):
        return self.instance_names.get(iid)

    def protocol_type(self):
        members = self.group.members
        return members[0].subscription.protocol_type if members else None

    # --- steps ------------------------------------------------------------------
    async def request(self, c: Connection, req, timeouts=None):
        """Hand ``req`` from connection ``c`` to the model; the model's response."""
        fut = asyncio.get_running_loop().create_future()
        c.waiting = (RESPONSE_OF[type(req)], fut)
        self.step(Receive(c.conn, req), c, timeouts)
        return await fut

    def step(self, event, c: Connection | None = None, timeouts=None) -> None:
        """One model step and its outputs carried out (R37: stored before replies)."""
        before, write = self.group, None
        group, outputs = handle(self.server.cfg, before, event)
        self.group = group
        self._forget_instances()
        if group is not before:
            self._name_members(c, timeouts)
            record = stored(group)
            if record is not None and record != self.last_stored:
                write = self.server.write(self.server.store.save_group, self.group_id, GroupRecord(
                    record, dict(self.names), dict(self.instances), dict(self.timeouts)))
                self.last_stored, self.in_store = record, True
            if group.generation != before.generation or group.phase != before.phase:
                if group.phase != before.phase:
                    self.empty_since = time.monotonic() if group.phase == Phase.EMPTY else None
                self._log_phase()
        self._sync_timers(before, session_refreshed(self.server.cfg, event.request) if type(event) is Receive
                         else NO_MEMBER_ID)
        self.server.send(write, outputs)

    def _name_members(self, c: Connection | None, timeouts) -> None:
        """Give new member ids their member.id strings (client.id + "-" + UUID, as
        GroupCoordinator does) and the timeouts of the JoinGroup that made them;
        forget those of members gone."""
        conn = c.conn if c else 0
        live = {m.member_id: m.conn for m in self.group.members}
        live.update((mid, conn) for mid in self.group.pending)
        for mid, at in live.items():
            if mid not in self.names:
                client = self.server.connections.get(at)
                name = f"{client.client_id if client else 'member'}-{uuid.uuid4()}"
                self.names[mid], self.ids[name] = name, mid
        for mid in [mid for mid in self.names if mid not in live]:
            name = self.gone[mid] = self.names.pop(mid)
            del self.ids[name]
        while len(self.gone) > GONE_NAMES:
            self.gone.popitem(last=False)
        self.timeouts = joined_timeouts(self.group, conn, timeouts if c is not None else None, self.timeouts)

    def _log_phase(self) -> None:
        g = self.group
        members = ", ".join(self.name(m.member_id) + ("*" if m.member_id == g.leader else "") for m in g.members)
        log.info("group %s: generation %d %s%s%s", self.group_id, g.generation, GROUP_STATE_NAMES[g.phase],
                 f" ({g.protocol})" if g.protocol else "", f": {members}" if members else "")

    # --- timers (model/timing.py) ---------------------------------------------------
    def _sync_timers(self, before: Group, refreshed: int) -> None:
        """Cancel the timers the step disarmed and start those it armed or restarted."""
        cancel, start = rearm(before, self.group, self.timers, refreshed)
        for key in cancel:
            self.timers.pop(key).cancel()
        for key, timer in start:
            self._arm(key, timer)

    def _arm(self, key, timer) -> None:
        self._arm_after(key, timer, duration_ms(timer, self.group, self._timeouts_of, self.server.initial_delay_ms) / 1000)

    def _timeouts_of(self, member_id: int) -> Timeouts:
        return self.timeouts.get(member_id, DEFAULT_TIMEOUTS)


class Coordinator:
    """The server. ``cluster``: host, port and topics (broker.Cluster); ``store``:
    a Store; ``trace``: a trace Recorder (impl/trace.py: every connection and group
    request and response, spec/TRACE.md); ``initial_delay_ms``: group.initial.rebalance.delay.ms
    (KIP-134; 0 switches it off); ``mutations``: model mutations (model/mutations.py REGISTRY);
    ``session_bounds``: group.min/max.session.timeout.ms (R42); ``limits``: queued.max.request.bytes,
    max.connections, connections.max.idle.ms (impl/limits.py); ``auto_create_topics``:
    auto.create.topics.enable (a Metadata naming an unknown topic creates it, num.partitions 1).
    ``records``: the partitions' logs (impl/records.py). ``faults``: the fault layer every request passes before
    dispatch and every response after (impl/faults.py). ``consumer_timeouts``: group.consumer.session.timeout.ms and
    group.consumer.heartbeat.interval.ms of KIP-848's consumer groups (``consumer_groups``, impl/consumer_group.py),
    whose coordinator is model/consumer_group/coordinator.py with the server assignor ``uniform`` over
    ``consumer_cfg``'s topics (serve's topics when the group was created)."""

    def __init__(self, cluster: broker.Cluster, store: Store, trace: Recorder, initial_delay_ms: int = 3000,
                 mutations=(), session_bounds: SessionBounds = SessionBounds(), limits: Limits = Limits(),
                 auto_create_topics: bool = False, consumer_timeouts: ConsumerTimeouts = ConsumerTimeouts()):
        self.cluster, self.store, self.trace, self.limits = cluster, store, trace, limits
        self.consumer_timeouts = consumer_timeouts
        self.consumer_groups: dict = {}  # group id -> ConsumerGroupRuntime
        self.auto_create_topics = auto_create_topics
        self.reader = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="store-read")
        self.records = Records(store, self.write, self.read, limits)
        self.topic_configs: dict = {}  # topic -> its configs set at creation (impl/admin.py topic_configs)
        self.pool = MemoryPool(limits.queued_max_request_bytes)
        self.initial_delay_ms, self.session_bounds = initial_delay_ms, session_bounds
        # Kafka (0.11+) always delays the initial rebalance, group.initial.rebalance.delay.ms 0 included (R30)
        self.cfg = GroupConfig(topics=cluster.topics, mutations=frozenset(mutations))
        self._consumer_config()
        self.connections: dict = {}  # model connection id -> Connection
        self.open: set = set()  # every Connection, before its first request too
        self.slots: dict = {}  # client.id -> slot
        self.slot_users: dict = {}  # slot -> how many client.ids it serves (more than one once all are taken)
        self.next_slot = 0
        self.epochs: dict = {}  # slot -> (last epoch given, whether the slot's epochs have wrapped)
        self.groups: dict = {}
        self.with_offsets: set = set()  # group ids with committed offsets
        self.server = None
        self.outbox: list = []  # [(store write or None, outputs)], replies waiting for a write (R37)
        self.writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="store")
        self.workers = None  # the process pool for large Metadata frames
        self.offline_logged = False
        self.faults = Faults(self)  # fault injection (impl/faults.py), steered by ctl and rebalance.testing

    async def start(self) -> None:
        """Listen on the cluster's host and port (port 0: any free port, then
        ``cluster`` holds the real one). Raises OSError if the address is taken,
        StoreError if the store's records do not decode."""
        stored = tuple(t for t in self.store.topics() if not self.cluster.partitions(t[0]))
        self.cluster = self.cluster._replace(topics=self.cluster.topics + tuple((name, n) for name, n, _ in stored))
        self._consumer_config()
        self.topic_configs.update((name, configs) for name, _, configs in stored)
        loaded = self.records.load()
        if loaded:
            log.info("loaded the checkpoints of %d partition logs from %s", loaded, self.store.path)
        self.server = await asyncio.start_server(self._serve, self.cluster.host, self.cluster.port)
        port = self.server.sockets[0].getsockname()[1]
        self.cluster = self.cluster._replace(port=port)
        self.sweeper = asyncio.ensure_future(self._expire_idle())
        self.cleaner = asyncio.ensure_future(self._expire_groups())
        self.retainer = asyncio.ensure_future(self._retain_logs())
        self.with_offsets = self.store.with_offsets()
        loaded = self.store.groups()
        for gid in sorted(self.with_offsets.union(loaded)):  # loaded groups arm their session timers now (R37)
            self.groups[gid] = GroupRuntime(self, gid, loaded.get(gid))
        self.trace.begin(settings(self.cluster.topics, self.initial_delay_ms, self.cfg.mutations,
                                  group_min_session_timeout_ms=self.session_bounds.min_ms,
                                  group_max_session_timeout_ms=self.session_bounds.max_ms,
                                  group_consumer_session_timeout_ms=self.consumer_timeouts.session_ms), self.groups)
        self.trace.name_topics((broker.topic_id(name), name) for name, _ in self.cluster.topics)
        log.info("listening on %s:%d, topics %s", self.cluster.host, port,
                 ", ".join(f"{t}:{n}" for t, n in self.cluster.topics))

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.sweeper.cancel()
            self.cleaner.cancel()
            self.retainer.cancel()
        for c in list(self.open):
            c.writer.close()
        for rt in (*self.groups.values(), *self.consumer_groups.values()):
            rt.close()
        self.trace.shut()
        self.writer.shutdown(wait=True)
        self.reader.shutdown(wait=True)
        if self.workers is not None:
            self.workers.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    # --- off the event loop -------------------------------------------------------
    def write(self, fn, *args) -> asyncio.Future:
        """``fn(*args)`` on the store's writer thread, after every write asked before.
        The first write the store refuses (StoreOffline) is logged: the store is
        offline until serve restarts (Kafka's log directory offline)."""
        fut = asyncio.get_running_loop().run_in_executor(self.writer, fn, *args)
        fut.add_done_callback(self._written)
        return fut

    def _written(self, fut: asyncio.Future) -> None:
        if fut.cancelled() or not isinstance(fut.exception(), StoreOffline) or self.offline_logged:
            return
        self.offline_logged = True
        log.error("store offline: %s; Produce, Fetch and ListOffsets are answered KAFKA_STORAGE_ERROR and group "
                  "requests NOT_COORDINATOR until serve restarts (Kafka's log directory offline)", fut.exception())
        self.records.wake()

    def read(self, fn, *args) -> asyncio.Future:
        """``fn(*args)`` on a store reader thread (the records' batches, off the loop)."""
        return asyncio.get_running_loop().run_in_executor(self.reader, fn, *args)

    def send(self, write, outputs) -> None:
        """Carry out a step's replies once ``write`` (a store write, or None) is done
        and every earlier step's replies are out, so no reply overtakes a write (R37)."""
        if write is None and not self.outbox:
            for out in outputs:
                self.deliver(out)
            return
        self.outbox.append((write, outputs))
        if write is not None:
            write.add_done_callback(lambda _: self._flush())

    def _flush(self) -> None:
        while self.outbox and (self.outbox[0][0] is None or self.outbox[0][0].done()):
            write, outputs = self.outbox.pop(0)
            if write is not None and write.exception() is not None:
                continue  # the store is offline (logged by _written): the replies are withheld
            for out in outputs:
                self.deliver(out)

    async def settle(self) -> None:
        """Return once every connection that had bytes of a request delivered when
        called has read and stepped them (or after SETTLE_ROUNDS loop iterations, so a
        flood cannot hold timers back): a reader's wake-up is queued behind timers
        that came due in the same loop iteration, and Kafka expires a member only if
        its heartbeat truly did not arrive (GroupCoordinator.onExpireHeartbeat)."""
        waiting = [c for c in self.open if c.delivered()]
        for _ in range(SETTLE_ROUNDS):
            waiting = [c for c in waiting if c.delivered()]
            if not waiting:
                return
            await asyncio.sleep(0)

    @staticmethod
    def _alloc(c: Connection):
        """The buffers ``c``'s frames are read into: a large Metadata frame in a shared
        memory block (``c.shared``) the worker process reads in place."""
        def alloc(api_key: int, size: int):
            if size <= INLINE_BYTES or api_key != Api.METADATA:
                return memoryview(mmap.mmap(-1, size))  # pages taken as the bytes arrive
            c.shared = shared_memory.SharedMemory(create=True, size=size)
            return c.shared.buf[:size]
        return alloc

    async def _offload(self, c: Connection, frame) -> tuple:
        """``broker.answer`` of a large frame, read into ``c.shared``, in the worker process
        (started on first use, with spawn: the server's loop and sockets are not forked);
        the block is unlinked after."""
        shm, size = c.shared, len(frame)
        frame.release()
        try:
            return await self._in_worker(broker.answer_shared, self.cluster, shm.name, size)
        finally:
            c.shared = None
            shm.close()
            shm.unlink()

    async def _in_worker(self, fn, *args):
        if self.workers is None:
            self.workers = concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"), initializer=broker.worker_init,
                initargs=(os.getpid(),))
        try:
            return await asyncio.get_running_loop().run_in_executor(self.workers, fn, *args)
        except concurrent.futures.process.BrokenProcessPool:
            self.workers = None
            raise FrameError("the worker process answering a large frame died") from None

    def group(self, group_id: str, create: bool = True) -> GroupRuntime:
        """The runtime of a group. A group id not seen is kept only if ``create`` (a
        JoinGroup: GroupCoordinator.handleJoinGroup's getOrMaybeCreateGroup); any
        other request to it is answered by a new Empty group that is not kept (the
        model answers it without changing the group; Kafka answers it without
        creating one), so such requests cost no state."""
        rt = self.groups.get(group_id)
        if rt is None:
            rt = GroupRuntime(self, group_id)
            if create:
                self.groups[group_id] = rt
        return rt

    def deliver(self, out: Reply) -> None:
        """Answer the request a connection waits on, if the reply is for it; a reply
        to a closed connection or a request no longer waited on is dropped."""
        c = self.connections.get(out.conn)
        if c is not None and c.waiting is not None and type(out.response) is c.waiting[0]:
            _, fut = c.waiting
            c.waiting = None
            if not fut.done():
                fut.set_result(out.response)

    # --- retention ----------------------------------------------------------------
    async def _expire_groups(self) -> None:
        """Every offsets.retention.check.interval.ms: remove the groups ``expired``
        says (with their stored row and committed offsets, one write each, only if
        the store has any), then free the slots of client.ids with no open connection
        and no member in any group (GroupMetadataManager.cleanupGroupMetadata)."""
        limits = self.limits
        while True:
            await asyncio.sleep(limits.offsets_retention_check_interval_ms / 1000)
            now, removed = time.monotonic(), []
            for gid, rt in list(self.groups.items()):
                if rt.expired(now, limits.offsets_retention_ms / 1000, gid in self.with_offsets):
                    del self.groups[gid]
                    rt.close()
                    if rt.in_store or gid in self.with_offsets:
                        self.with_offsets.discard(gid)
                        self.send(self.write(self.store.delete_group, gid), ())
                    removed.append(gid)
            self.trace.expire(removed)  # R43: a JoinGroup of the same id starts a new group
            freed = self._free_slots()
            if removed or freed:
                log.info("retention check: %d groups removed, %d client.id slots freed", len(removed), freed)

    def _free_slots(self) -> int:
        """Forget the client.ids whose slot no open connection and no member holds;
        the number forgotten."""
        held = {slot_of(conn) for conn in self.connections}
        held.update(slot_of(m.conn) for rt in self.groups.values() for m in rt.group.members)
        gone = [(cid, slot) for cid, slot in self.slots.items() if slot not in held]
        for cid, slot in gone:
            del self.slots[cid]
            self.slot_users[slot] -= 1
            if not self.slot_users[slot]:
                del self.slot_users[slot]
                self.epochs.pop(slot, None)
        return len(gone)

    def _slot(self, client_id: str) -> int:
        """The slot of a client.id: its own while fewer than MAX_SLOTS are in use (the
        next free one, round the ring), else shared with others, in turn."""
        slot = self.slots.get(client_id)
        if slot is None:
            slot = self.next_slot
            while len(self.slot_users) < MAX_SLOTS and slot in self.slot_users:
                slot = (slot + 1) % MAX_SLOTS
            self.next_slot = (slot + 1) % MAX_SLOTS
            self.slots[client_id] = slot
            self.slot_users[slot] = self.slot_users.get(slot, 0) + 1
        return slot

    # --- connections --------------------------------------------------------------
    async def _expire_idle(self) -> None:
        """Close connections whose bytes last moved connections.max.idle.ms ago while
        waiting for a request (Kafka's Selector counts from a channel's last read or
        write; a request held at a barrier is not idleness). Checked every quarter
        of the limit."""
        idle_s = self.limits.connections_max_idle_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(idle_s / 4)
            now = loop.time()
            for c in list(self.open):
                if c.reading and now - c.last_active >= idle_s:
                    log.info("closing connection from %s (%s): idle for connections.max.idle.ms (%d)", c.host,
                             c.client_id, self.limits.connections_max_idle_ms)
                    c.writer.close()

    def _identify(self, c: Connection, client_id: str) -> None:
        """Give ``c`` its model connection id from its first request's client.id: the
        slot's next epoch (1..MAX_SERIAL, then round again) that no open connection
        and, once the slot's epochs have wrapped, no member of any group holds, so a
        new connection never takes over a live member's replies."""
        slot = self._slot(client_id)
        epoch, wrapped = self.epochs.get(slot, (0, False))
        held = None
        while True:
            wrapped = wrapped or epoch == MAX_SERIAL
            epoch = epoch % MAX_SERIAL + 1
            conn = connection(slot, epoch)
            if conn in self.connections:
                continue
            if wrapped:
                if held is None:
                    held = {m.conn for rt in self.groups.values() for m in rt.group.members}
                if conn in held:
                    continue
            break
        self.epochs[slot] = (epoch, wrapped)
        c.conn, c.client_id = conn, client_id
        self.connections[c.conn] = c

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host = (writer.get_extra_info("peername") or ("?",))[0]
        if len(self.open) >= self.limits.max_connections:
            log.warning("refusing a connection from %s: max.connections (%d) reached", host,
                        self.limits.max_connections)
            writer.close()
            return
        c, trace = Connection(host, reader, writer), self.trace
        self.open.add(c)
        alloc = self._alloc(c)
        name = trace.open(host) if trace.enabled else None
        try:
            while True:
                c.reading = True
                frame = await read_request_frame(reader, request_max_bytes, self.pool, alloc, c.touch,
                                                 POOLED_FRAME_BYTES)
                c.reading = False
                size = len(frame)
                large, req = size > INLINE_BYTES, None
                try:  # queued.max.request.bytes holds a frame until it is decoded (RequestChannel.Request)
                    if large and request_key(frame)[0] == Api.METADATA:
                        out = await self._offload(c, frame)
                    else:
                        req = await asyncio.to_thread(read_request, frame) if large else read_request(frame)
                except UnsupportedVersion as e:
                    out = response_frame(Api.API_VERSIONS, 0, e.correlation_id,
                                         broker.api_versions(broker.UNSUPPORTED_VERSION))
                finally:
                    if size > POOLED_FRAME_BYTES:
                        self.pool.release(size)
                if req is None:
                    del frame
                    await _write(writer, out)
                    c.touch()
                    continue
                if c.conn is None:
                    self._identify(c, req.client_id)
                injected = await self.faults.before(c, name, req)  # impl/faults.py: paused, an injected error
                if trace.enabled:
                    trace.request(name, frame)
                data = injected if injected is not None else await self._dispatch(c, req)
                if data is None:  # a Produce with acks=0: Kafka sends no response (KafkaApis.handleProduceRequest)
                    continue
                encode = (req.api_key, req.version, req.correlation_id, data)
                del data  # a Fetch's records are held once, by the frame, from here on
                heavy = large or req.api_key == Api.FETCH  # a Fetch's records: up to fetch.max.bytes to copy
                out = await asyncio.to_thread(response_frame, *encode) if heavy else response_frame(*encode)
                del encode
                if trace.enabled:
                    trace.response(name, memoryview(out)[4:])
                if await self.faults.after(c, name, req):  # a delayed or dropped response
                    await _write(writer, out)
                    c.touch()
                del out
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:  # shutdown: the task ends quietly (asyncio's stream callback would log a
            pass                        # cancelled connection task's CancelledError as unhandled)
        except FrameError as e:
            log.warning("closing connection from %s: %s", host, e)
        except StoreOffline as e:
            log.warning("closing connection from %s: the store is offline (%s)", host, e)
        except Exception:  # a bug must cost one connection, never the server
            log.exception("closing connection from %s after an internal error", host)
        finally:
            self.open.discard(c)
            if c.shared is not None:  # a large frame cut short
                c.shared.unlink()
            if c.conn is not None:
                self.connections.pop(c.conn, None)
            if c.waiting is not None and not c.waiting[1].done():
                c.waiting[1].cancel()
            writer.close()
            if trace.enabled:
                trace.close(name)

    async def _dispatch(self, c: Connection, req) -> dict:
        b, cluster = req.body, self.cluster
        key = req.api_key
        if key == Api.API_VERSIONS:
            return broker.api_versions()
        if key == Api.METADATA:
            if self.auto_create_topics and b.topics and getattr(b, "allow_auto_topic_creation", True):
                self._add_topics(tuple((t.name, admin.DEFAULT_PARTITIONS, {}) for t in b.topics if t.name
                                       and not cluster.partitions(t.name) and not admin.topic_name_error(t.name)))
            return broker.metadata(self.cluster, b)
        if key == Api.FIND_COORDINATOR:
            return broker.find_coordinator(cluster, b)
        if key in HANDLERS:
            return await HANDLERS[key](self, b)
        if key == Api.DESCRIBE_CONFIGS:
            return admin.describe_configs(cluster, b, self.retention, lambda t: self.topic_configs.get(t, {}))
        if key == Api.INIT_PRODUCER_ID:
            return self.records.init_producer_id(b.transactional_id, getattr(b, "producer_id", -1),
                                                 getattr(b, "producer_epoch", -1))
        if key == Api.DESCRIBE_GROUPS:
            return {"throttle_time": 0, "groups": [self._describe(gid) for gid in b.groups]}
        if key == Api.OFFSET_FETCH:
            return self._offset_fetch(b, await self.write(self.store.offsets, b.group_id))
        if key == Api.CONSUMER_GROUP_HEARTBEAT:
            return self._consumer_heartbeat(c, req)
        if key == Api.CONSUMER_GROUP_DESCRIBE:
            return {"throttle_time": 0, "groups": [self._consumer_describe(gid) for gid in b.group_ids]}
        if key == Api.OFFSET_COMMIT and b.group_id in self.consumer_groups:
            return await self._commit(c, self.consumer_groups[b.group_id], req)
        if key == Api.JOIN_GROUP:
            error = session_timeout_error(ms(b.session_timeout), self.session_bounds)
            if error:  # R42: answered before the group is looked at, so none is made for it
                return {"throttle_time": 0, "error_code": error, "generation_id": -1, "protocol_type": None,
                        "protocol_name": None if req.version >= 7 else "", "leader": "", "skip_assignment": False,
                        "member_id": b.member_id, "members": []}
        rt = self.consumer_groups.get(b.group_id) if key != Api.OFFSET_COMMIT else None
        if rt is not None and key == Api.JOIN_GROUP and rt.empty():
            # M2's offline migration (model/consumer_group/migration.py): a classic JoinGroup replaces an empty
            # consumer group by a new classic group
            del self.consumer_groups[b.group_id]
            rt.close()
            rt = None
        if rt is not None:  # a classic member in a consumer group (online migration, M3-M6)
            if key == Api.JOIN_GROUP:
                return await rt.join(c, req.version, b)
            if key == Api.SYNC_GROUP:
                return await rt.sync(c, b)
        else:
            rt = self.group(b.group_id, key == Api.JOIN_GROUP)
        if key == Api.JOIN_GROUP:
            return await self._join(c, rt, req)
        if key == Api.SYNC_GROUP:
            return await self._sync(c, rt, req)
        if key == Api.HEARTBEAT:
            r = await rt.request(c, Heartbeat(rt.member_id(b.member_id), b.generation_id,
                                              rt.instance_id(getattr(b, "group_instance_id", None))))
            return {"throttle_time": 0, "error_code": r.error}
        if key == Api.LEAVE_GROUP:
            return await self._leave(c, rt, req)
        return await self._commit(c, rt, req)

    # --- records and admin (impl/records.py, impl/admin.py) ----------------------------
    async def _produce(self, b):
        """Produce (broker.produce): each batch answered once it is on disk; no answer for acks=0."""
        data = await broker.produce(self.cluster, self.records, b)
        return None if b.acks == 0 else data

    async def _fetch(self, b) -> dict:
        """Fetch, held until min_bytes of records are there or max.wait.ms (at most
        FETCH_WAIT_CAP_MS) has passed (DelayedFetch); a high watermark moving wakes it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(ms(b.max_wait), FETCH_WAIT_CAP_MS) / 1000
        while True:
            appended = self.records.appended
            data, size = await broker.fetch(self.cluster, self.records, b, self.limits.fetch_max_bytes)
            left = deadline - loop.time()
            if size >= max(b.min_bytes, 1) or left <= 0 or self.store.offline is not None:
                return data
            try:
                await asyncio.wait_for(appended.wait(), left)
            except TimeoutError:
                pass

    async def _list_offsets(self, b) -> dict:
        return await broker.list_offsets(self.cluster, self.records, b)

    async def _delete_records(self, b) -> dict:
        """DeleteRecords: each partition's log start moved up to the offset asked
        (``Records.delete_records``); a partition not hosted is
        UNKNOWN_TOPIC_OR_PARTITION, one of a topic that is not cleanup.policy=delete
        POLICY_VIOLATION (Partition.deleteRecordsOnLeader, Partition.scala:1524, Kafka
        4.4.0). Kafka Streams purges its repartition topics so
        (TaskManager.maybePurgeCommittedRecords)."""
        topics = []
        for t in b.topics:
            parts = []
            for p in t.partitions:
                if not self.cluster.hosts(t.name, p.partition_index):
                    error, low = broker.UNKNOWN_TOPIC_OR_PARTITION, -1
                elif not self.deletes(t.name):
                    error, low = admin.POLICY_VIOLATION, -1
                else:
                    error, low = await self.records.delete_records(t.name, p.partition_index, p.offset)
                parts.append({"partition_index": p.partition_index, "low_watermark": low, "error_code": error})
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time": 0, "topics": topics}

    def retention(self, topic: str) -> dict:
        """The topic's retention.ms and retention.bytes: set at its creation, else the
        broker's log.retention.ms and log.retention.bytes."""
        return {"retention.ms": self.limits.log_retention_ms, "retention.bytes": self.limits.log_retention_bytes,
                **{k: v for k, v in self.topic_configs.get(topic, {}).items() if k in admin.RETENTION}}

    def deletes(self, topic: str) -> bool:
        """Whether the topic's cleanup.policy (set at its creation, else Kafka's default
        "delete") has "delete": a compact-only topic has no records deleted by retention
        or DeleteRecords."""
        return "delete" in self.topic_configs.get(topic, {}).get(admin.CLEANUP_POLICY, "delete").split(",")

    def applied_retention(self, topic: str) -> dict:
        """``retention(topic)``, or none (-1) for a topic whose cleanup.policy is compact
        only: Kafka deletes by retention only under "delete" (LogManager.cleanupLogs)."""
        if not self.deletes(topic):
            return {"retention.ms": -1, "retention.bytes": -1}
        return self.retention(topic)

    async def _retain_logs(self) -> None:
        """Every log.retention.check.interval.ms, each log's batches past its topic's
        retention are deleted (LogManager.cleanupLogs)."""
        while True:
            await asyncio.sleep(self.limits.log_retention_check_interval_ms / 1000)
            if self.store.offline is None:
                try:
                    moved = await self.records.retain(self.applied_retention, int(time.time() * 1000))
                except StoreOffline:
                    continue
                if moved:
                    log.info("retention: the log start of %d partitions moved", moved)

    def _consumer_config(self) -> None:
        """The configuration of consumer groups created from now on: serve's topics, the
        server assignor uniform (group.consumer.assignors' first, Kafka's default)."""
        topics = self.cluster.topics or (("", 1),)  # the model's configuration needs a partition
        self.consumer_cfg = GroupConfig(topics=topics, protocol=KIP848, assignor="uniform", mutations=self.cfg.mutations)

    def _add_topics(self, added: tuple) -> None:
        """``added``: ((name, partitions, retention configs), ...)."""
        if added:
            self.cluster = self.cluster._replace(topics=self.cluster.topics + tuple((t, n) for t, n, _ in added))
            self._consumer_config()
            for name, count, configs in added:
                self.topic_configs[name] = configs
                self.write(self.store.save_topic, name, count, configs)
            self.trace.topics(self.cluster.topics)
            self.trace.name_topics((broker.topic_id(name), name) for name, _, _ in added)
            log.info("created topics %s", ", ".join(f"{t}:{n}" for t, n, _ in added))

    async def _create_topics(self, b) -> dict:
        added, data = admin.create_topics(self.cluster, b)
        self._add_topics(added)
        return data

    async def _delete_topics(self, b) -> dict:
        gone, data = admin.delete_topics(self.cluster, b)
        if gone:
            self.cluster = self.cluster._replace(topics=tuple(t for t in self.cluster.topics if t[0] not in gone))
            for name in gone:
                self.records.drop(name)
                self.topic_configs.pop(name, None)
                self.write(self.store.delete_topic, name)
            self.trace.topics(self.cluster.topics)
            log.info("deleted topics %s", ", ".join(gone))
        return data

    async def _list_groups(self, b) -> dict:
        """ListGroups: every group this coordinator keeps, in the states asked for
        (v4+, case-insensitive) and of type classic (v5+) (GroupCoordinator.handleListGroups)."""
        states = {x.lower() for x in getattr(b, "states_filter", ())}
        types = {x.lower() for x in getattr(b, "types_filter", ())}
        groups = [] if types and "classic" not in types else [
            {"group_id": gid, "protocol_type": rt.protocol_type() or "", "group_state": GROUP_STATE_NAMES[rt.group.phase],
             "group_type": "classic"}
            for gid, rt in sorted(self.groups.items())
            if not states or GROUP_STATE_NAMES[rt.group.phase].lower() in states]
        if not types or "consumer" in types:  # KIP-848's groups (ConsumerGroup.asListedGroup)
            groups += [e for _, rt in sorted(self.consumer_groups.items()) for e in [rt.list_entry()]
                       if not states or e["group_state"].lower() in states]
        return {"throttle_time": 0, "error_code": 0, "groups": groups}

    async def _delete_groups(self, b) -> dict:
        """DeleteGroups (R44): the model's DeleteGroup input decides; a group it makes
        Dead is removed with its committed offsets, as at expiry (R43)."""
        results = []
        for gid in b.groups_names:
            rt = self.groups.get(gid)
            if rt is None:
                results.append({"group_id": gid, "error_code": GROUP_ID_NOT_FOUND})
                continue
            rt.step(DeleteGroup())
            if rt.group.phase != Phase.DEAD:
                results.append({"group_id": gid, "error_code": NON_EMPTY_GROUP})
                continue
            del self.groups[gid]
            rt.close()
            self.with_offsets.discard(gid)
            await self.write(self.store.delete_group, gid)
            results.append({"group_id": gid, "error_code": 0})
        return {"throttle_time": 0, "results": results}  # recorded as a DeleteGroups response (spec/TRACE.md)

    async def _offset_delete(self, b) -> dict:
        """OffsetDelete: a known group's committed offsets of the partitions named go,
        except those of topics its members subscribe to while it is not Empty
        (GROUP_SUBSCRIBED_TO_TOPIC; GroupCoordinator.handleDeleteOffsets)."""
        rt = self.groups.get(b.group_id)
        if rt is None:
            return {"error_code": GROUP_ID_NOT_FOUND, "throttle_time": 0, "topics": []}
        g, subscribed = rt.group, set()
        if g.phase != Phase.EMPTY and g.protocol:
            for m in g.members:
                subscribed.update(subscription_json(rt.protocol_type(), m.subscription.metadata(g.protocol))
                                  .get("topics", ()))
        gone, topics = [], []
        for t in b.topics:
            parts = []
            for p in t.partitions:
                error = GROUP_SUBSCRIBED_TO_TOPIC if t.name in subscribed else 0
                if not error:
                    gone.append((t.name, p.partition_index))
                parts.append({"partition_index": p.partition_index, "error_code": error})
            topics.append({"name": t.name, "partitions": parts})
        if gone:
            await self.write(self.store.delete_offsets, b.group_id, gone)
            if not await self.write(self.store.offsets, b.group_id):
                self.with_offsets.discard(b.group_id)
        return {"error_code": 0, "throttle_time": 0, "topics": topics}

    # --- group requests: wire <-> model ---------------------------------------------
    async def _join(self, c: Connection, rt: GroupRuntime, req) -> dict:
        b = req.body
        session = ms(b.session_timeout)
        rebalance = ms(b.rebalance_timeout) if hasattr(b, "rebalance_timeout") else session
        sub = Protocols(b.protocol_type, tuple((p.name, bytes(p.metadata)) for p in b.protocols))
        r = await rt.request(c, JoinGroup(rt.member_id(b.member_id), sub,
                                          rt.instance_id(getattr(b, "group_instance_id", None)),
                                          req.version >= 4, supports_skip_assignment=req.version >= 9),
                           Timeouts(session, rebalance))
        return {"throttle_time": 0, "error_code": r.error, "generation_id": r.generation,
                "protocol_type": rt.protocol_type() if r.protocol else None,
                "protocol_name": r.protocol or (None if req.version >= 7 else ""),
                "leader": rt.name(r.leader), "skip_assignment": r.skip_assignment,
                # the model echoes a member.id it never handed out as UNKNOWN_ID: echo the string asked with (R24)
                "member_id": b.member_id if r.member_id == UNKNOWN_ID else rt.name(r.member_id),
                "members": [{"member_id": rt.name(mid), "group_instance_id": rt.instance_name(iid),
                             "metadata": data} for mid, iid, data in r.members]}

    async def _sync(self, c: Connection, rt: GroupRuntime, req) -> dict:
        b = req.body
        given = tuple((rt.member_id(a.member_id), bytes(a.assignment)) for a in b.assignments)
        r = await rt.request(c, SyncGroup(rt.member_id(b.member_id), b.generation_id, given,
                                          rt.instance_id(getattr(b, "group_instance_id", None))))
        assignment = b"" if r.assignment is EMPTY_ASSIGNMENT else r.assignment
        return {"throttle_time": 0, "error_code": r.error, "protocol_type": rt.protocol_type(),
                "protocol_name": rt.group.protocol or None, "assignment": assignment}

    async def _leave(self, c: Connection, rt: GroupRuntime, req) -> dict:
        b = req.body
        if req.version < 3:
            members, instances = ((rt.member_id(b.member_id), NO_INSTANCE_ID),), [None]
        else:
            members = tuple((rt.member_id(m.member_id), rt.instance_id(m.group_instance_id)) for m in b.members)
            instances = [m.group_instance_id for m in b.members]
        names = dict(rt.names)  # before the step forgets the members who left
        r = await rt.request(c, LeaveGroup(members))
        results = [{"member_id": names.get(mid, ""), "group_instance_id": instance, "error_code": error}
                   for (mid, _, error), instance in zip(r.members, instances)]
        error = r.members[0][2] if req.version < 3 and r.members else r.error
        return {"throttle_time": 0, "error_code": error, "members": results}

    async def _commit(self, c: Connection, rt: GroupRuntime, req) -> dict:
        """OffsetCommit: partitions this broker does not host are answered
        UNKNOWN_TOPIC_OR_PARTITION and never stored; the rest go to the model (R9) only
        if there are any, as KafkaApis.handleOffsetCommitRequest filters them before
        the group coordinator sees the request."""
        b = req.body
        hosted = [(t.name, p) for t in b.topics for p in t.partitions if self.cluster.hosts(t.name, p.partition_index)]
        error = broker.UNKNOWN_TOPIC_OR_PARTITION
        if hosted and isinstance(rt, ConsumerGroupRuntime):
            error = rt.commit_error(c, req.version, b)
        elif hosted:
            generation = getattr(b, "generation_id", None)
            if generation is None:
                generation = b.generation_id_or_member_epoch
            r = await rt.request(c, OffsetCommit(rt.member_id(b.member_id), generation, 0,
                                                 rt.instance_id(getattr(b, "group_instance_id", None))))
            error = r.error
        if hosted:
            if error == 0:  # R37: on disk before the response
                try:
                    await self.write(self.store.commit_offsets, rt.group_id, [
                        (name, p.partition_index, p.committed_offset, p.committed_metadata) for name, p in hosted])
                except StoreOffline:  # KAFKA_STORAGE_ERROR is NOT_COORDINATOR to a group's client
                    error = NOT_COORDINATOR  # (CoordinatorOperationExceptionHelper.handleOperationException)
                else:
                    self.with_offsets.add(rt.group_id)
                    if not isinstance(rt, ConsumerGroupRuntime):  # a group with offsets is kept until they expire
                        self.groups.setdefault(rt.group_id, rt)
        known = {(name, p.partition_index) for name, p in hosted}
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": error if (t.name, p.partition_index) in known else broker.UNKNOWN_TOPIC_OR_PARTITION}
                for p in t.partitions]} for t in b.topics]}

    def _offset_fetch(self, b, committed: dict) -> dict:
        if b.topics is None:
            wanted = {}
            for topic, p in sorted(committed):
                wanted.setdefault(topic, []).append(p)
        else:
            wanted = {t.name: list(t.partition_indexes) for t in b.topics}
        topics = [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": committed.get((topic, p), (-1, ""))[0],
             "committed_leader_epoch": -1, "metadata": committed.get((topic, p), (-1, ""))[1] or "",
             "error_code": 0} for p in parts]} for topic, parts in wanted.items()]
        return {"throttle_time": 0, "topics": topics, "error_code": 0}

    def _consumer_heartbeat(self, c: Connection, req) -> dict:
        """ConsumerGroupHeartbeat (KIP-848) through the consumer group's runtime. To a group id
        held by a classic group, it is stepped on that group in the model's form
        (ConsumerGroupRuntime.from_classic), which the model converts (M1: a classic runtime
        gives the group id over, its committed offsets kept) or not (answered as the model
        says); a classic group of another protocol type is not converted, GROUP_ID_NOT_FOUND
        (GroupMetadataManager.validateOnlineUpgrade, GroupMetadataManager.java:1394, Kafka 4.4.0),
        nor one whose members' metadata is no ConsumerProtocolSubscription (serve's choice:
        Kafka's ConsumerGroup.fromClassicGroup fails on it).
        A group that does not exist is kept only if the heartbeat joins."""
        b = req.body
        classic = self.groups.get(b.group_id)
        if classic is not None:
            try:
                if classic.protocol_type() not in (None, "consumer"):
                    raise FrameError("not the consumer embedded protocol")
                rt = ConsumerGroupRuntime.from_classic(self, classic)
            except FrameError:
                return {"throttle_time": 0, "error_code": GROUP_ID_NOT_FOUND, "member_epoch": 0,
                        "heartbeat_interval": 0, "error_message": f"Group {b.group_id} is not a consumer group."}
            out = rt.heartbeat(c, req.version, b)
            if type(rt.group) is not Group:  # converted: the classic group's record goes, its offsets stay
                del self.groups[b.group_id]
                classic.close()
                self.consumer_groups[b.group_id] = rt
                if classic.in_store:
                    self.write(self.store.forget_group, b.group_id)
            return out
        rt = self.consumer_groups.get(b.group_id)
        if rt is None:
            rt = ConsumerGroupRuntime(self, b.group_id)
            if b.member_epoch == 0:
                self.consumer_groups[b.group_id] = rt
        return rt.heartbeat(c, req.version, b)

    def to_classic(self, consumer: ConsumerGroupRuntime, group: Group) -> None:
        """M2: the model made ``consumer``'s group classic again (``group``, in serve's form): a
        classic runtime takes the group id over with its members' names, instance ids and
        timeouts; its timers start (ClassicGroup.fromConsumerGroup, then a rebalance)."""
        live = {m.member_id for m in group.members}
        names = {mid: name for mid, name in consumer.names.items() if mid in live}
        timeouts = {mid: Timeouts(consumer.session_ms.get(mid, DEFAULT_TIMEOUTS.session_ms),
                                  consumer.rebalance_ms.get(mid, DEFAULT_TIMEOUTS.rebalance_ms)) for mid in live}
        rt = GroupRuntime(self, consumer.group_id, GroupRecord(group, names, dict(consumer.instances), timeouts))
        rt.in_store = False
        del self.consumer_groups[consumer.group_id]
        self.groups[consumer.group_id] = rt
        rt._log_phase()

    def _consumer_describe(self, group_id: str) -> dict:
        """ConsumerGroupDescribe of one group id: GROUP_ID_NOT_FOUND if no consumer group has it."""
        rt = self.consumer_groups.get(group_id)
        if rt is None:
            return {"error_code": GROUP_ID_NOT_FOUND, "error_message": f"Group {group_id} not found.",
                    "group_id": group_id, "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                    "assignor_name": "", "members": [], "authorized_operations": -2147483648}
        return rt.describe()

    def _describe(self, group_id: str) -> dict:
        """DescribeGroups of one classic group id, as Kafka 4.4.0 answers it
        (GroupMetadataManager.describeGroups, ClassicGroupMember.describeNoMetadata): the
        selected protocol and each member's metadata only in Stable, each member's stored
        assignment in every state (kept through a rebalance started from Stable, R3)."""
        rt = self.groups.get(group_id)
        if rt is None:
            return {"error_code": 0, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
                    "protocol_data": "", "members": []}
        g = rt.group
        protocol = g.protocol if g.phase == Phase.STABLE else ""
        members = []
        for m in g.members:
            c = self.connections.get(m.conn)
            meta = m.subscription.metadata(protocol) if protocol else b""
            members.append({"member_id": rt.name(m.member_id), "group_instance_id": rt.instance_name(m.instance_id),
                            "client_id": c.client_id if c else "", "client_host": c.host if c else "",
                            "member_metadata": meta,
                            "member_assignment": b"" if m.assignment is EMPTY_ASSIGNMENT else m.assignment})
        return {"error_code": 0, "group_id": group_id, "group_state": GROUP_STATE_NAMES[g.phase],
                "protocol_type": rt.protocol_type() or "", "protocol_data": protocol, "members": members}


async def _write(writer, out) -> None:
    """Write a response frame, a large one in slices of WRITE_SLICE bytes, each
    taken by the socket before the next (the transport would copy it whole into
    its buffer otherwise)."""
    if len(out) <= WRITE_SLICE:
        writer.write(out)
        await writer.drain()
        return
    view = memoryview(out)
    for at in range(0, len(view), WRITE_SLICE):
        writer.write(view[at:at + WRITE_SLICE])
        await writer.drain()


# the APIs answered by a Coordinator method of the request payload
HANDLERS = {
    Api.PRODUCE: Coordinator._produce,
    Api.FETCH: Coordinator._fetch,
    Api.LIST_OFFSETS: Coordinator._list_offsets,
    Api.DELETE_RECORDS: Coordinator._delete_records,
    Api.CREATE_TOPICS: Coordinator._create_topics,
    Api.DELETE_TOPICS: Coordinator._delete_topics,
    Api.LIST_GROUPS: Coordinator._list_groups,
    Api.DELETE_GROUPS: Coordinator._delete_groups,
    Api.OFFSET_DELETE: Coordinator._offset_delete,
}
