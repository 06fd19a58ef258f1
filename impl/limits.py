"""The broker's resource limits for ``rebalance serve``, by their Kafka names
(KafkaConfig), and the memory pool that enforces queued.max.request.bytes.

* ``socket.request.max.bytes`` (100 MiB, ``wire.MAX_FRAME``): the largest frame
  of any request. Kafka has no smaller limit per API; serve also bounds the
  requests only a group member sends (``GROUP_REQUEST_MAX_BYTES``, 1 MiB: a
  JoinGroup, SyncGroup or OffsetCommit of MBs is not a client's) and closes the
  connection of a larger one as Kafka does for a frame above
  socket.request.max.bytes (SocketServer.Processor, NetworkReceive's
  InvalidReceiveException). Produce, Metadata, ListOffsets and Fetch keep Kafka's bound.
* ``queued.max.request.bytes`` (Kafka: -1, no pool; serve: 100 MiB): the bytes
  of large request frames (above ``POOLED_FRAME_BYTES``, 1 MiB: only Produce,
  Metadata, ListOffsets and Fetch send them) read and not yet decoded, over all
  connections. A frame takes its size from the pool once its first bytes past
  the header arrive (a declared size alone reserves nothing), and its buffer's
  pages only as its bytes arrive; a connection whose frame does not fit waits,
  reading nothing, until enough is released (Kafka's SocketServer MemoryPool: a
  channel that cannot allocate is muted). Group requests never wait on the pool,
  so frames held half-sent stall no heartbeat.
* ``max.connections`` (Kafka: 2^31-1; serve: 10,000): connections beyond it are
  closed as soon as they are accepted (Kafka's ConnectionQuotas blocks the
  acceptor instead, and closes beyond max.connections.per.ip).
* ``connections.max.idle.ms`` (10 minutes, Kafka's default): a connection waiting
  for a request whose bytes last moved that long ago is closed (Kafka's Selector
  counts from a channel's last read or write).
* ``message.max.bytes`` (1,048,588), ``fetch.max.bytes`` (55 MiB), and serve's
  bounds on a batch's records (``batch_max_records``, 1,000,000;
  ``batch_max_decompressed_bytes``, 32 times message.max.bytes): impl/records.py.
* ``log.retention.ms`` (7 days), ``log.retention.bytes`` (-1) and
  ``log.retention.check.interval.ms`` (5 minutes): each topic's retention.ms and
  retention.bytes default to them (impl/records.py ``Records.retain``).
* ``offsets.retention.minutes`` (Kafka: 7 days; serve: 1 hour,
  ``offsets_retention_ms``) and ``offsets.retention.check.interval.ms`` (10
  minutes, Kafka's): every check interval, an Empty group with no pending member
  ids is removed, with its committed offsets once it has been Empty for the
  retention, at once if it has none (GroupMetadataManager.cleanupGroupMetadata,
  GroupMetadata.removeExpiredOffsets: offsets of an Empty group expire counted
  from when it became Empty, a group with no offsets left becomes Dead). serve is
  a test double whose groups live for a test session: an hour keeps a consumer's
  offsets through any restart within one, where Kafka's week would keep the
  fresh group of every test a long-running serve ever saw. A client.id's slot
  with no connection and no member is freed at the same check.
"""
from __future__ import annotations

import asyncio
from typing import NamedTuple

from .wire import MAX_FRAME, Api

GROUP_REQUEST_MAX_BYTES = 1 << 20
POOLED_FRAME_BYTES = GROUP_REQUEST_MAX_BYTES  # frames above it take their bytes from queued.max.request.bytes
MESSAGE_MAX_BYTES = 1_048_588  # message.max.bytes, Kafka's default (1 MiB + a batch's 12 bytes of offset and size)
FETCH_MAX_BYTES = 57_671_680  # fetch.max.bytes, Kafka's default (55 MiB)
BATCH_MAX_RECORDS = 1_000_000  # records in one batch (librdkafka's largest batch.num.messages)
DECOMPRESSION_RATIO = 32  # a batch's records decompressed: at most this many times message.max.bytes
# the APIs a client sends outside the group protocol whose frames may be as large as Kafka allows
BROKER_APIS = frozenset((Api.PRODUCE, Api.METADATA, Api.LIST_OFFSETS, Api.FETCH))


def request_max_bytes(api_key: int) -> int:
    """The largest request frame (bytes, without the size prefix) serve reads for
    an API key: MAX_FRAME for Produce, Metadata, ListOffsets and Fetch, 1 MiB for the rest."""
    return MAX_FRAME if api_key in BROKER_APIS else GROUP_REQUEST_MAX_BYTES


class Limits(NamedTuple):
    """serve's limits (see the module docstring): bytes, counts and ms."""

    queued_max_request_bytes: int = MAX_FRAME
    max_connections: int = 10_000
    connections_max_idle_ms: int = 600_000
    offsets_retention_ms: int = 3_600_000
    offsets_retention_check_interval_ms: int = 600_000
    message_max_bytes: int = MESSAGE_MAX_BYTES
    fetch_max_bytes: int = FETCH_MAX_BYTES
    batch_max_records: int = BATCH_MAX_RECORDS
    log_retention_ms: int = 604_800_000
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300_000

    @property
    def batch_max_decompressed_bytes(self) -> int:
        """The most a batch's records may take decompressed: DECOMPRESSION_RATIO times
        message.max.bytes."""
        return DECOMPRESSION_RATIO * self.message_max_bytes


class MemoryPool:
    """queued.max.request.bytes: ``acquire(n)`` waits until ``n`` more bytes fit in
    ``capacity`` (a frame always fits when nothing is held, so one frame larger
    than the pool is read alone); ``release(n)`` gives them back. Waiters are
    served in order of arrival."""

    def __init__(self, capacity: int):
        self.capacity, self.used = capacity, 0
        self.waiters: list = []

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` bytes now if they fit and nobody waits; whether it did."""
        if self.waiters or (self.used and self.used + n > self.capacity):
            return False
        self.used += n
        return True

    async def acquire(self, n: int) -> None:
        if self.waiters or (self.used and self.used + n > self.capacity):
            fut = asyncio.get_running_loop().create_future()
            self.waiters.append((n, fut))
            try:
                await fut  # granted by release, which has counted n already
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self.release(n)
                raise
            return
        self.used += n

    def release(self, n: int) -> None:
        self.used -= n
        while self.waiters and not (self.used and self.used + self.waiters[0][0] > self.capacity):
            size, fut = self.waiters.pop(0)
            if not fut.done():
                self.used += size
                fut.set_result(None)
