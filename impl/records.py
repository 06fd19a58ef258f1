"""The records side of ``rebalance serve``: each partition's log on disk
(impl/store.py), record batches (magic v2) validated as Kafka's broker validates
them, offsets, high watermarks, retention, ListOffsets and idempotent producers'
sequence checks.

A partition's log is its record batches kept as the producer sent them
(compressed or not), each with its base offset written in: Kafka's broker
assigns offsets in place for a v2 batch whose codec it keeps
(LogValidator.validateMessagesAndAssignOffsets; the base offset and the
partition leader epoch lie outside the CRC), and a Fetch returns whole batches
from the one holding the fetch offset (KafkaApis.handleFetchRequest,
UnifiedLog.read; the client skips the records below its offset). Memory holds
only each log's offsets and producers (``PartitionLog``); batches are read back
from the store.

Offsets: the log end offset advances when a batch is given its offsets; the high
watermark (what Fetch and ListOffsets see) only once the store has it on disk, and
only then is the Produce acknowledged, whatever ``acks`` asked (one replica:
ReplicaManager.appendRecords). A write that fails takes the store offline: that
Produce and every later one is answered KAFKA_STORAGE_ERROR, no later batch is
stored, and a restart resumes from the stored log end, so an offset once
acknowledged is never given again (Kafka's LogDirFailureChannel).

Validation (DefaultRecordBatch.ensureValid, LogValidator): a batch above
``message.max.bytes`` is MESSAGE_TOO_LARGE (Kafka's RecordTooLargeException,
UnifiedLog.analyzeAndValidateRecords, UnifiedLog.java:1508, Kafka 4.4.0); one
that does not parse, fails its CRC32C, or whose records disagree with its header
is CORRUPT_MESSAGE, and nothing of it is stored. Compressed records are
decompressed as a stream (gzip by zlib, zstd by backports.zstd, lz4 frames by
lz4, snappy by cramjam: xerial's framing chunk by chunk, a raw block once its
declared length is checked), never more than ``Limits.batch_max_decompressed_bytes``
in all and never more than ``Limits.batch_max_records`` records (serve's bounds:
Kafka has none but the request size; past them, MESSAGE_TOO_LARGE). Validation
runs in slices (``SLICE_WORK`` records or chunks) between which the event loop
serves the other connections, so no batch holds the loop for long.
"""
from __future__ import annotations

import asyncio
import struct
import zlib
from typing import NamedTuple

import cramjam
import lz4.frame
from crc32c import crc32c
from kio.serial.readers import read_signed_varint, read_signed_varlong

try:  # Python 3.14's compression.zstd, or its backport before
    from compression.zstd import ZstdDecompressor
except ImportError:  # pragma: no cover - the Python this runs on decides
    from backports.zstd import ZstdDecompressor

from .broker import KAFKA_STORAGE_ERROR, OFFSET_OUT_OF_RANGE, UNSUPPORTED_VERSION
from .limits import Limits
from .store import LogState, StoreOffline

NONE = 0
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10  # Kafka's RecordTooLargeException
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3  # ListOffsets' special timestamps (ListOffsetsRequest)
HEADER = struct.Struct(">qiibIhiqqqhii")  # a v2 batch's 61 header bytes (DefaultRecordBatch)
CRC_FROM = 21  # the CRC32C covers the batch from its attributes on
TRANSACTIONAL, CONTROL = 0x10, 0x20  # batch attribute bits
SEQUENCES_KEPT = 5  # batches per producer and partition remembered for duplicates (ProducerStateEntry)
XERIAL = b"\x82SNAPPY\x00"
CHUNK = 64 << 10  # decompressed bytes read at a time
SLICE_WORK = 2048  # records (or chunks) validated between two turns of the event loop


class CorruptBatch(ValueError):
    """A record batch that Kafka's broker would refuse with ``error`` (a Kafka error code)."""

    def __init__(self, message: str, error: int = CORRUPT_MESSAGE):
        super().__init__(message)
        self.error = error


class Batch(NamedTuple):
    """A validated v2 record batch: its header fields, its record count, the largest
    timestamp of its records (ms) and its bytes (``data``, base offset 0 until appended)."""

    attributes: int
    last_offset_delta: int
    count: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    data: bytes


# --- streamed decompression ---------------------------------------------------------
class _Plain:
    def __init__(self, data):
        self.data, self.at = data, 0

    def read(self, n: int) -> bytes:
        out = bytes(self.data[self.at:self.at + n])
        self.at += len(out)
        return out


class _Gzip:
    """gzip members one after another (Java's GZIPInputStream reads concatenated members)."""

    def __init__(self, data):
        self.d, self.tail = zlib.decompressobj(47), bytes(data)

    def read(self, n: int) -> bytes:
        while True:
            if self.d.eof:
                if not self.d.unused_data:
                    return b""
                self.d, self.tail = zlib.decompressobj(47), self.d.unused_data
            out = self.d.decompress(self.tail, n)
            self.tail = self.d.unconsumed_tail
            if out:
                return out
            if not self.tail and not self.d.eof:
                raise CorruptBatch("gzip stream cut short")


class _Frames:
    """zstd or lz4 frames one after another, each decompressor told the most it may return."""

    def __init__(self, data, factory):
        self.factory, self.d, self.feed = factory, factory(), bytes(data)

    def read(self, n: int) -> bytes:
        while True:
            if self.d.eof:
                if not self.d.unused_data:
                    return b""
                self.d, self.feed = self.factory(), self.d.unused_data
            out = self.d.decompress(self.feed, n)
            self.feed = b""
            if out:
                return out
            if self.d.needs_input and not self.d.eof:
                raise CorruptBatch("compressed stream cut short")


class _Snappy:
    """Kafka's snappy: xerial's framed stream (the Java producer's SnappyOutputStream),
    chunk by chunk, or one raw block (librdkafka), as xerial's SnappyInputStream reads
    both; each block's declared length is checked against ``bound`` before it is
    decompressed."""

    def __init__(self, data, bound: int):
        self.data, self.bound = bytes(data), bound
        self.at = 16 if self.data.startswith(XERIAL) else None  # after magic, version, compatible version
        self.block, self.used, self.given = b"", 0, 0

    def _next_block(self) -> bool:
        if self.at is None:  # the one raw block
            raw, self.data = self.data, b""
        else:
            if self.at >= len(self.data):
                return False
            (size,) = struct.unpack_from(">i", self.data, self.at)
            raw = self.data[self.at + 4:self.at + 4 + size]
            self.at += 4 + size
        if not raw:
            return False
        size = cramjam.snappy.decompress_raw_len(raw)
        if self.given + size > self.bound:
            raise CorruptBatch(f"snappy block of {size} bytes passes the bound of {self.bound} decompressed bytes",
                               MESSAGE_TOO_LARGE)
        self.block, self.used = bytes(cramjam.snappy.decompress_raw(raw)), 0
        self.given += len(self.block)
        return True

    def read(self, n: int) -> bytes:
        while self.used >= len(self.block):
            if not self._next_block():
                return b""
        out = self.block[self.used:self.used + n]
        self.used += len(out)
        return out


def _stream(codec: int, data, bound: int):
    if codec == 0:
        return _Plain(data)
    if codec == 1:
        return _Gzip(data)
    if codec == 2:
        return _Snappy(data, bound)
    if codec == 3:
        return _Frames(data, lz4.frame.LZ4FrameDecompressor)
    return _Frames(data, ZstdDecompressor)


CODECS = (0, 1, 2, 3, 4)  # CompressionType ids: none, gzip, snappy, lz4, zstd


class _Reader:
    """The decompressed records section, parsed as it is read: ``buf[at:]`` holds
    what was read and not yet parsed (a chunk at most), ``consumed`` counts the bytes
    parsed. Raises CorruptBatch (MESSAGE_TOO_LARGE) past ``bound`` bytes in all."""

    def __init__(self, stream, bound: int):
        self.stream, self.bound, self.total, self.consumed = stream, bound, 0, 0
        self.buf, self.at = b"", 0

    def _fill(self, n: int) -> bool:
        """Whether at least ``n`` bytes are there from ``at`` (a chunk read if not)."""
        if len(self.buf) - self.at >= n:
            return True
        more = self.stream.read(min(CHUNK, self.bound - self.total + 1))
        if not more:
            return len(self.buf) > self.at
        self.total += len(more)
        if self.total > self.bound:
            raise CorruptBatch(f"records decompress past {self.bound} bytes (serve's bound per batch)",
                               MESSAGE_TOO_LARGE)
        self.buf, self.at = self.buf[self.at:] + more, 0
        return True

    def at_end(self) -> bool:
        return not self._fill(1)

    def varint(self, reader=read_signed_varint) -> int:
        if not self._fill(10):
            raise CorruptBatch("the batch ends inside a record")
        value, n = reader(self.buf, self.at)
        self.at += n
        self.consumed += n
        return value

    def skip(self, n: int):
        """Pass ``n`` bytes (a key, a value) without keeping them: a generator yielding
        None after each chunk read."""
        while n > 0:
            if len(self.buf) == self.at:
                if not self._fill(1):
                    raise CorruptBatch("the batch ends inside a record")
                yield
            take = min(len(self.buf) - self.at, n)
            self.at += take
            self.consumed += take
            n -= take


def walk(data, limits: Limits):
    """The records of a batch (its bytes, header included): a generator of
    ``(offset delta, timestamp ms)`` per record (DefaultRecord.readFrom, each checked
    to fill its stated length exactly), and of None between slices of work (every
    SLICE_WORK records or headers, and every chunk of a key or value, which is
    passed over, never held). Raises CorruptBatch."""
    (_, _, _, _, _, attributes, _, base_ts, _, _, _, _, count) = HEADER.unpack_from(data)
    bound = limits.batch_max_decompressed_bytes
    body = _Reader(_stream(attributes & 7, memoryview(data)[HEADER.size:], bound), bound)
    work = 0
    try:
        for _ in range(count):
            if not body._fill(10) and body.at_end():
                raise CorruptBatch(f"the batch ends before its {count} records")
            buf, at = body.buf, body.at
            length, n = read_signed_varint(buf, at)
            if length < 0:
                raise CorruptBatch(f"record length {length}")
            end = at + n + length
            if end <= len(buf):  # the whole record is in the chunk read: parsed in place
                at += n + 1  # after the attributes
                delta_ts, n = read_signed_varlong(buf, at)
                at += n
                delta_offset, n = read_signed_varint(buf, at)
                at += n
                for _ in range(2):  # key, value
                    size, n = read_signed_varint(buf, at)
                    at += n + max(size, 0)
                headers, n = read_signed_varint(buf, at)
                at += n
                if headers < 0 or headers > length:
                    raise CorruptBatch(f"a record of {length} bytes with {headers} headers")
                for _ in range(headers):
                    for _ in range(2):
                        size, n = read_signed_varint(buf, at)
                        at += n + max(size, 0)
                if at != end:
                    raise CorruptBatch(f"record of stated length {length} has {at - end + length} bytes")
                body.consumed += end - body.at
                body.at = end
                work += 1 + headers
                yield delta_offset, base_ts + delta_ts
                if work >= SLICE_WORK:
                    work = 0
                    yield None
                continue
            body.at += n  # a record past the chunk: its fields read as they come, keys and values passed over
            body.consumed += n
            start = body.consumed
            yield from body.skip(1)  # attributes
            delta_ts = body.varint(read_signed_varlong)
            delta_offset = body.varint()
            for _ in range(2):  # key, value
                size = body.varint()
                if size > start + length - body.consumed:
                    raise CorruptBatch(f"a record of {length} bytes holds a field of {size}")
                yield from body.skip(max(size, 0))
            headers = body.varint()
            if headers < 0 or headers > length:
                raise CorruptBatch(f"a record of {length} bytes with {headers} headers")
            for _ in range(headers):
                for _ in range(2):
                    size = body.varint()
                    if size > start + length - body.consumed:
                        raise CorruptBatch(f"a record of {length} bytes holds a header of {size}")
                    yield from body.skip(max(size, 0))
                work += 1
            if body.consumed - start != length:
                raise CorruptBatch(f"record of stated length {length} has {body.consumed - start} bytes")
            yield delta_offset, base_ts + delta_ts
            work += 1
            if work >= SLICE_WORK:
                work = 0
                yield None
        if not body.at_end():
            raise CorruptBatch("bytes after the last record")
    except CorruptBatch:
        raise
    except Exception as e:  # a codec's or varint reader's error on bad bytes
        raise CorruptBatch(f"records do not decode: {type(e).__name__}: {e}") from None


def validation(data, limits: Limits):
    """Validate one v2 record batch as the broker does before appending it
    (DefaultRecordBatch.ensureValid: size, magic, CRC32C; LogValidator: record
    count and offset deltas 0..n-1, no control batch from a client;
    UnifiedLog.analyzeAndValidateRecords: message.max.bytes). ``data``: the
    Produce request's records for one partition (v3+: exactly one batch,
    ProduceRequest.validateRecords). A generator that yields None between slices
    and returns the Batch; raises CorruptBatch (CORRUPT_MESSAGE, INVALID_RECORD,
    MESSAGE_TOO_LARGE or UNSUPPORTED_COMPRESSION_TYPE)."""
    data = bytes(data or b"")
    if len(data) > limits.message_max_bytes:
        raise CorruptBatch(f"a batch of {len(data)} bytes is above message.max.bytes ({limits.message_max_bytes})",
                           MESSAGE_TOO_LARGE)
    if len(data) < HEADER.size:
        raise CorruptBatch(f"a record batch needs {HEADER.size} bytes, got {len(data)}")
    (_, length, _, magic, crc, attributes, last_delta, _, _, pid, epoch, base_seq, count) = HEADER.unpack_from(data)
    if magic != 2:
        raise CorruptBatch(f"record batch magic {magic}, not 2", INVALID_RECORD)
    if length + 12 != len(data):
        raise CorruptBatch(f"batch length {length} + 12 is not the {len(data)} bytes sent (one batch, v3+)",
                           CORRUPT_MESSAGE if length + 12 > len(data) else INVALID_RECORD)
    if crc32c(data[CRC_FROM:]) != crc:
        raise CorruptBatch(f"record batch CRC {crc:#010x} does not match its bytes")
    if attributes & CONTROL:
        raise CorruptBatch("a client sent a control batch", INVALID_RECORD)
    if attributes & 7 not in CODECS:
        raise CorruptBatch(f"compression type {attributes & 7}", UNSUPPORTED_COMPRESSION_TYPE)
    if count > limits.batch_max_records:
        raise CorruptBatch(f"a batch of {count} records is above serve's bound of {limits.batch_max_records}",
                           MESSAGE_TOO_LARGE)
    n, top = 0, -1
    for record in walk(data, limits):
        if record is None:
            yield
            continue
        if record[0] != n:
            break
        n, top = n + 1, max(top, record[1])
    if count == 0 or n != count or last_delta != count - 1:
        raise CorruptBatch(f"offset deltas of {count} records are not 0..{count - 1} ending at {last_delta}",
                           INVALID_RECORD)
    return Batch(attributes, last_delta, count, top, pid, epoch, base_seq, data)


def finish(steps):
    """The value a generator of slices (``validation``) returns, run at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


async def in_slices(steps):
    """The value a generator of slices returns, the event loop serving others between slices."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(0)


def parse_batch(data, limits: Limits = Limits()) -> Batch:
    """``validation`` run at once (tests, tools)."""
    return finish(validation(data, limits))


class Producer(NamedTuple):
    """An idempotent producer's state on one partition (ProducerStateEntry): its
    epoch and the (first sequence, last sequence, base offset) of the batches it
    appended last, newest last."""

    epoch: int
    batches: tuple


def check_sequence(state: Producer | None, batch: Batch):
    """``(error, base offset of a duplicate or None)`` for a batch of an idempotent
    producer against its state on the partition (ProducerAppendInfo.checkSequence,
    ProducerStateEntry.findDuplicateBatch): an older epoch is INVALID_PRODUCER_EPOCH;
    a new producer or epoch must start at sequence 0; a batch equal to one of the
    last five is a duplicate (answered with its first offset, not appended); any
    other must follow the last sequence (wrapping at 2^31-1), else
    OUT_OF_ORDER_SEQUENCE_NUMBER."""
    first, last = batch.base_sequence, (batch.base_sequence + batch.last_offset_delta) % (1 << 31)
    if state is None or batch.producer_epoch > state.epoch:
        return (NONE if first == 0 else OUT_OF_ORDER_SEQUENCE_NUMBER), None
    if batch.producer_epoch < state.epoch:
        return INVALID_PRODUCER_EPOCH, None
    for f, la, offset in state.batches:
        if (f, la) == (first, last):
            return NONE, offset
    expected = (state.batches[-1][1] + 1) % (1 << 31) if state.batches else 0
    return (NONE if first == expected else OUT_OF_ORDER_SEQUENCE_NUMBER), None


class PartitionLog:
    """One partition's log as memory keeps it: its store id, log start offset, log
    end offset (the next offset given), high watermark (the end of what is on
    disk), bytes appended (``position``), largest timestamp (ms, -1 for none) and
    the idempotent producers' states {producer id: Producer}."""

    def __init__(self, log_id: int, state: LogState | None = None):
        self.log_id = log_id
        self.start, self.end, self.position, self.max_timestamp = (0, 0, 0, -1) if state is None else state[1:5]
        self.high_watermark = self.end
        self.producers = {} if state is None else {pid: Producer(e, b) for pid, (e, b) in state.producers.items()}

    def state(self) -> LogState:
        return LogState(self.log_id, self.start, self.end, self.position, self.max_timestamp, {})

    def assign(self, batch: Batch):
        """``(error, base offset, data with its offsets written in or None)``: the batch
        given offsets at the log end (its producer's state advanced), or a duplicate's
        first offset (data None), or an idempotence error with -1."""
        state = None
        if batch.producer_id >= 0:
            state = self.producers.get(batch.producer_id)
            error, duplicate = check_sequence(state, batch)
            if error or duplicate is not None:
                return error, -1 if error else duplicate, None
        base = self.end
        data = struct.pack(">q", base) + batch.data[8:12] + b"\0\0\0\0" + batch.data[16:]  # leader epoch 0
        self.end = base + batch.last_offset_delta + 1
        self.position += len(data)
        self.max_timestamp = max(self.max_timestamp, batch.max_timestamp)
        if batch.producer_id >= 0:
            last = (batch.base_sequence + batch.last_offset_delta) % (1 << 31)
            kept = () if state is None or batch.producer_epoch > state.epoch else state.batches
            self.producers[batch.producer_id] = Producer(
                batch.producer_epoch, (kept + ((batch.base_sequence, last, base),))[-SEQUENCES_KEPT:])
        return NONE, base, data


class Records:
    """Every partition's log, made on first use. ``store``: where the batches live
    (impl/store.py); ``write(fn, *args)``: runs a store write on the one writer
    thread, in order, returning an asyncio future; ``read(fn, *args)``: runs a
    store read off the event loop, likewise; ``limits``: message.max.bytes and the
    decompression bounds (impl/limits.py). ``appended``: set whenever the high
    watermark of a log moves (or the store goes offline), so a Fetch waiting for
    data returns at once (DelayedFetch)."""

    def __init__(self, store, write, read, limits: Limits = Limits()):
        self.store, self.write, self.read, self.limits = store, write, read, limits
        self.logs: dict = {}
        self.next_log_id = 1
        self.next_producer_id = 1000
        self.appended = asyncio.Event()

    def load(self) -> int:
        """The logs as stored (their checkpoint: offsets and producers, no batch is
        read); how many. No producer id handed out before the restart is handed out
        again."""
        for key, state in self.store.logs().items():
            self.logs[key] = PartitionLog(state.log_id, state)
        self.next_log_id = max((log.log_id for log in self.logs.values()), default=0) + 1
        pids = [pid for log in self.logs.values() for pid in log.producers]
        self.next_producer_id = max([self.next_producer_id, self.store.next_producer_id(), *pids])
        return len(self.logs)

    def log(self, topic: str, partition: int) -> PartitionLog:
        key = (topic, partition)
        if key not in self.logs:
            self.logs[key] = PartitionLog(self.next_log_id)
            self.next_log_id += 1
        return self.logs[key]

    def drop(self, topic: str) -> None:
        """Forget a deleted topic's logs."""
        for key in [k for k in self.logs if k[0] == topic]:
            del self.logs[key]

    def wake(self) -> None:
        """Wake the Fetches and duplicates waiting for the high watermark (it moved, or the store went offline)."""
        self.appended.set()
        self.appended = asyncio.Event()

    async def _committed(self, log: PartitionLog, upto: int) -> int:
        """NONE once the high watermark reaches ``upto``, KAFKA_STORAGE_ERROR if the store goes offline first."""
        while log.high_watermark < upto:
            if self.store.offline is not None:
                return KAFKA_STORAGE_ERROR
            await self.appended.wait()
        return NONE

    async def produce(self, topic: str, partition: int, data) -> tuple:
        """``(error, base offset, message)`` of appending one partition's records
        (ReplicaManager.appendRecords), answered once the batch is on disk: a batch
        that fails validation stores nothing; a store offline gives
        KAFKA_STORAGE_ERROR. A duplicate of an idempotent producer's batch is
        answered with its first offset once that is on disk."""
        if self.store.offline is not None:
            return KAFKA_STORAGE_ERROR, -1, f"the store is offline: {self.store.offline}"
        try:
            batch = await in_slices(validation(data, self.limits))
        except CorruptBatch as e:
            return e.error, -1, str(e)
        if batch.attributes & TRANSACTIONAL:
            return UNSUPPORTED_VERSION, -1, "transactions are not supported by rebalance serve"
        if self.store.offline is not None:
            return KAFKA_STORAGE_ERROR, -1, f"the store is offline: {self.store.offline}"
        log = self.log(topic, partition)
        error, base, stamped = log.assign(batch)
        if error:
            return error, base, None
        if stamped is None:  # a duplicate: acknowledged once its first append is
            error = await self._committed(log, base + batch.last_offset_delta + 1)
            return (error, base if not error else -1, None if not error else self.store.offline)
        producer = None
        if batch.producer_id >= 0:
            p = log.producers[batch.producer_id]
            producer = (batch.producer_id, p.epoch, p.batches)
        end = log.end
        try:
            await self.write(self.store.append, topic, partition, log.state(), base, end - 1, batch.max_timestamp,
                             stamped, producer)
        except StoreOffline as e:
            self.wake()  # duplicates waiting for this batch learn the store is offline
            return KAFKA_STORAGE_ERROR, -1, f"the store is offline: {e}"
        log.high_watermark = max(log.high_watermark, end)
        self.wake()
        return NONE, base, None

    async def fetch(self, reads, max_bytes: int) -> list:
        """The bytes of each read ``(log, offset, partition max bytes)``, read off the
        loop in one go: whole batches up to each partition's max bytes and
        ``max_bytes`` over all, the first batch whatever its size (KIP-74); none once
        ``max_bytes`` is spent."""
        def go():
            left, out = max_bytes, []
            for log, offset, partition_max in reads:
                first = not any(out)
                data = b"" if left <= 0 and not first else b"".join(
                    self.store.read(log.log_id, offset, log.high_watermark, min(partition_max, left), first))
                left -= len(data)
                out.append(data)
            return out
        return await self.read(go)

    async def offset_for(self, log: PartitionLog, timestamp: int) -> tuple:
        """``(offset, timestamp)`` ListOffsets answers (UnifiedLog.fetchOffsetByTimestamp):
        earliest and latest are the log start and high watermark; MAX_TIMESTAMP the
        record with the largest timestamp (the first such); otherwise the first record
        whose timestamp is at least ``timestamp``, (-1, -1) if none."""
        if timestamp == EARLIEST:
            return log.start, -1
        if timestamp == LATEST:
            return log.high_watermark, -1
        target = log.max_timestamp if timestamp == MAX_TIMESTAMP else timestamp
        if target < 0 and timestamp == MAX_TIMESTAMP:
            return -1, -1
        hw, limits = log.high_watermark, self.limits

        def find():
            data = self.store.batch_reaching(log.log_id, target, hw)
            if data is None:
                return -1, -1
            base = struct.unpack_from(">q", data)[0]
            for record in walk(data, limits):
                if record is not None and record[1] >= target:
                    return base + record[0], record[1]
            return -1, -1
        return await self.read(find)

    def listing(self, topic: str, partitions: int) -> list:
        """Every record of ``topic`` on disk: [{"partition", "offset", "timestamp_ms"}],
        by partition then offset (read on the caller's thread: for tests' small logs)."""
        out = []
        for p in range(partitions):
            log = self.logs.get((topic, p))
            if log is None:
                continue
            for data in self.store.batches(log.log_id):
                base = struct.unpack_from(">q", data)[0]
                out.extend({"partition": p, "offset": base + r[0], "timestamp_ms": r[1]}
                           for r in walk(data, self.limits) if r is not None)
        return out

    async def retain(self, configs, now_ms: int) -> int:
        """Apply each topic's retention.ms and retention.bytes (``configs(topic)``: a
        dict with both, -1 for none) to its logs at ``now_ms``: batches past them are
        deleted and the log start moves (UnifiedLog.deleteOldSegments). How many logs moved."""
        moved = 0
        for (topic, _), log in list(self.logs.items()):
            c = configs(topic)
            ms, size = c["retention.ms"], c["retention.bytes"]
            if (ms < 0 and size < 0) or log.start >= log.high_watermark:
                continue
            start = await self.read(self.store.retention_start, log.log_id, log.high_watermark, log.position,
                                    now_ms - ms if ms >= 0 else None, size if size >= 0 else None)
            if start is not None and start > log.start:
                await self.write(self.store.truncate_head, log.log_id, start)
                log.start = start
                moved += 1
        return moved

    async def delete_records(self, topic: str, partition: int, offset: int) -> tuple:
        """``(error, low watermark)`` of DeleteRecords on one partition: ``offset`` -1
        is the high watermark; below 0 or above the high watermark is
        OFFSET_OUT_OF_RANGE; the log start moves up to it, never down
        (Partition.deleteRecordsOnLeader, Partition.scala:1526-1535, Kafka 4.4.0:
        maybeIncrementLogStartOffset); a store offline is KAFKA_STORAGE_ERROR."""
        if self.store.offline is not None:
            return KAFKA_STORAGE_ERROR, -1
        log = self.log(topic, partition)
        target = log.high_watermark if offset == -1 else offset
        if target < 0 or target > log.high_watermark:
            return OFFSET_OUT_OF_RANGE, -1
        if target > log.start:
            try:
                await self.write(self.store.delete_records, log.log_id, target, log.end)
            except StoreOffline:
                self.wake()
                return KAFKA_STORAGE_ERROR, -1
            log.start = target
        return NONE, log.start

    def init_producer_id(self, transactional_id, producer_id: int = -1, epoch: int = -1) -> dict:
        """InitProducerId for an idempotent producer: a new producer id at epoch 0, or
        the same id at the next epoch when the producer gives its own (KIP-360);
        a transactional id is answered UNSUPPORTED_VERSION (no transaction
        coordinator; TransactionCoordinator.handleInitProducerId). The next id is
        written to the store, so a restart never hands it out again."""
        if transactional_id:
            return {"throttle_time": 0, "error_code": UNSUPPORTED_VERSION, "producer_id": -1, "producer_epoch": -1}
        if producer_id >= 0:
            return {"throttle_time": 0, "error_code": NONE, "producer_id": producer_id,
                    "producer_epoch": epoch + 1}
        self.next_producer_id += 1
        self.write(self.store.save_producer_id, self.next_producer_id).add_done_callback(
            lambda f: f.cancelled() or f.exception())  # an offline store is answered at the next Produce
        return {"throttle_time": 0, "error_code": NONE, "producer_id": self.next_producer_id, "producer_epoch": 0}
