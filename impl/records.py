"""The records side of ``rebalance serve``: a log per partition held in memory,
record batches (magic v2) validated as Kafka's broker validates them, offsets,
high watermarks, ListOffsets and idempotent producers' sequence checks.

A partition's log is a list of record batches kept as the producer sent them
(compressed or not), each with its base offset written in: Kafka's broker
assigns offsets in place for a v2 batch whose codec it keeps
(LogValidator.validateMessagesAndAssignOffsets; the base offset and the
partition leader epoch lie outside the CRC), and a Fetch returns whole batches
from the one holding the fetch offset (KafkaApis.handleFetchRequest,
UnifiedLog.read; the client skips the records below its offset). One replica,
so the high watermark is the log end offset once a batch is appended, whatever
``acks`` asked (ReplicaManager.appendRecords).

Errors are Kafka's error codes in the responses, never an exception reaching
the server: a batch that does not parse, fails its CRC32C, or whose records
disagree with its header is CORRUPT_MESSAGE and nothing of it is stored
(DefaultRecordBatch.ensureValid, LogValidator); a codec that does not decode
likewise. Compression: gzip (zlib), snappy (xerial framing or raw), lz4 (frame)
and zstd through cramjam (CompressionType ids 1-4).
"""
from __future__ import annotations

import asyncio
import bisect
import gzip
import struct
from typing import NamedTuple

import cramjam
from crc32c import crc32c
from kio.serial.readers import read_signed_varint, read_signed_varlong

from .broker import UNSUPPORTED_VERSION

NONE = 0
CORRUPT_MESSAGE = 2
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


class CorruptBatch(ValueError):
    """A record batch that Kafka's broker would refuse with ``error`` (a Kafka error code)."""

    def __init__(self, message: str, error: int = CORRUPT_MESSAGE):
        super().__init__(message)
        self.error = error


class Batch(NamedTuple):
    """A validated v2 record batch: its header fields, the (offset delta,
    timestamp ms) of each record, and its bytes (``data``, base offset 0 until
    appended)."""

    attributes: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple  # ((offset delta, timestamp ms), ...)
    data: bytes


def _snappy(data: bytes) -> bytes:
    """Kafka's snappy: xerial's framed stream (the Java producer's SnappyOutputStream) or
    one raw block (librdkafka), as xerial's SnappyInputStream reads both."""
    if not data.startswith(XERIAL):
        return bytes(cramjam.snappy.decompress_raw(data))
    out, at = [], 16  # magic, version, compatible version
    while at < len(data):
        (size,) = struct.unpack_from(">i", data, at)
        out.append(bytes(cramjam.snappy.decompress_raw(data[at + 4:at + 4 + size])))
        at += 4 + size
    return b"".join(out)


CODECS = {  # CompressionType id -> decompress (org.apache.kafka.common.record.CompressionType)
    0: bytes,
    1: gzip.decompress,
    2: _snappy,
    3: lambda data: bytes(cramjam.lz4.decompress(data)),
    4: lambda data: bytes(cramjam.zstd.decompress(data)),
}


def _records(body, count: int, base_timestamp: int) -> tuple:
    """((offset delta, timestamp ms), ...) of ``count`` v2 records (DefaultRecord.readFrom),
    each checked to fill its stated length exactly. Raises CorruptBatch."""
    out, at = [], 0
    for _ in range(count):
        length, n = read_signed_varint(body, at)
        start = at + n
        if length < 0 or start + length > len(body):
            raise CorruptBatch(f"record length {length} beyond the batch")
        at = start + 1  # attributes
        delta_ts, n = read_signed_varlong(body, at)
        at += n
        delta_offset, n = read_signed_varint(body, at)
        at += n
        for _ in range(2):  # key, value
            size, n = read_signed_varint(body, at)
            at += n + max(size, 0)
        headers, n = read_signed_varint(body, at)
        at += n
        for _ in range(headers):
            for _ in range(2):
                size, n = read_signed_varint(body, at)
                at += n + max(size, 0)
        if at != start + length:
            raise CorruptBatch(f"record of stated length {length} has {at - start} bytes")
        out.append((delta_offset, base_timestamp + delta_ts))
    if at != len(body):
        raise CorruptBatch(f"{len(body) - at} bytes after the last record")
    return tuple(out)


def parse_batch(data) -> Batch:
    """Validate one v2 record batch, as the broker does before appending it
    (DefaultRecordBatch.ensureValid: size, magic, CRC32C; LogValidator: record
    count and offset deltas 0..n-1, no control batch from a client). ``data``: the
    Produce request's records bytes for one partition (v3+: exactly one batch,
    ProduceRequest.validateRecords). Raises CorruptBatch (CORRUPT_MESSAGE,
    INVALID_RECORD or UNSUPPORTED_COMPRESSION_TYPE)."""
    data = bytes(data or b"")
    if len(data) < HEADER.size:
        raise CorruptBatch(f"a record batch needs {HEADER.size} bytes, got {len(data)}")
    (_, length, _, magic, crc, attributes, last_delta, base_ts, max_ts, pid, epoch, base_seq,
     count) = HEADER.unpack_from(data)
    if magic != 2:
        raise CorruptBatch(f"record batch magic {magic}, not 2", INVALID_RECORD)
    if length + 12 != len(data):
        raise CorruptBatch(f"batch length {length} + 12 is not the {len(data)} bytes sent (one batch, v3+)",
                           CORRUPT_MESSAGE if length + 12 > len(data) else INVALID_RECORD)
    if crc32c(data[CRC_FROM:]) != crc:
        raise CorruptBatch(f"record batch CRC {crc:#010x} does not match its bytes")
    if attributes & CONTROL:
        raise CorruptBatch("a client sent a control batch", INVALID_RECORD)
    codec = CODECS.get(attributes & 7)
    if codec is None:
        raise CorruptBatch(f"compression type {attributes & 7}", UNSUPPORTED_COMPRESSION_TYPE)
    try:
        body = codec(data[HEADER.size:])
        records = _records(body, count, base_ts)
    except CorruptBatch:
        raise
    except Exception as e:  # a codec's or varint reader's error on bad bytes
        raise CorruptBatch(f"records do not decode: {type(e).__name__}: {e}") from None
    if count == 0 or [d for d, _ in records] != list(range(count)) or last_delta != count - 1:
        raise CorruptBatch(f"offset deltas of {count} records are not 0..{count - 1} ending at {last_delta}",
                           INVALID_RECORD)
    return Batch(attributes, last_delta, max_ts, pid, epoch, base_seq, records, data)


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
    """One partition's log: batches with their base offsets written in, the first
    offset of each (``bases``), every record's (offset, timestamp ms), the log end
    offset (= high watermark: one replica) and the idempotent producers' states."""

    def __init__(self):
        self.batches: list = []
        self.bases: list = []
        self.offsets: list = []  # record offsets, ascending
        self.timestamps: list = []  # record timestamps (ms), by offset
        self.end = 0
        self.producers: dict = {}

    def append(self, batch: Batch) -> tuple:
        """``(error, base offset)``: the batch appended at the log end, or a duplicate's
        first offset, or an idempotence error with -1 (nothing appended)."""
        if batch.producer_id >= 0:
            state = self.producers.get(batch.producer_id)
            error, duplicate = check_sequence(state, batch)
            if error or duplicate is not None:
                return error, -1 if error else duplicate
        base = self.end
        data = struct.pack(">q", base) + batch.data[8:12] + b"\0\0\0\0" + batch.data[16:]  # leader epoch 0
        self.batches.append(data)
        self.bases.append(base)
        for delta, ts in batch.records:
            self.offsets.append(base + delta)
            self.timestamps.append(ts)
        self.end = base + batch.last_offset_delta + 1
        if batch.producer_id >= 0:
            last = (batch.base_sequence + batch.last_offset_delta) % (1 << 31)
            kept = () if state is None or batch.producer_epoch > state.epoch else state.batches
            self.producers[batch.producer_id] = Producer(
                batch.producer_epoch, (kept + ((batch.base_sequence, last, base),))[-SEQUENCES_KEPT:])
        return NONE, base

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset`` while they fit ``max_bytes``, the
        first one whatever its size (KIP-74); b"" at the log end."""
        if offset >= self.end:
            return b""
        i = bisect.bisect_right(self.bases, offset) - 1
        out, size = [], 0
        for data in self.batches[max(i, 0):]:
            if out and size + len(data) > max_bytes:
                break
            out.append(data)
            size += len(data)
        return b"".join(out)

    def offset_for(self, timestamp: int) -> tuple:
        """``(offset, timestamp)`` ListOffsets answers (UnifiedLog.fetchOffsetByTimestamp):
        earliest and latest are the log start and end; MAX_TIMESTAMP the record with the
        largest timestamp (the first such); otherwise the first record whose timestamp is
        at least ``timestamp``, (-1, -1) if none."""
        if timestamp == EARLIEST:
            return 0, -1
        if timestamp == LATEST:
            return self.end, -1
        if timestamp == MAX_TIMESTAMP:
            if not self.timestamps:
                return -1, -1
            top = max(self.timestamps)
            return self.offsets[self.timestamps.index(top)], top
        for offset, ts in zip(self.offsets, self.timestamps):
            if ts >= timestamp:
                return offset, ts
        return -1, -1


class Records:
    """Every partition's log, made on first use; ``appended``: set whenever a batch is
    appended, so a Fetch waiting for data returns at once (DelayedFetch);
    ``on_append(topic, partition, base offset, batch bytes)``: called for each
    batch appended (the store's write), or None."""

    def __init__(self, on_append=None):
        self.logs: dict = {}
        self.next_producer_id = 1000
        self.appended = asyncio.Event()
        self.on_append = on_append

    def load(self, batches) -> int:
        """Append stored batches ((topic, partition, bytes), ... in offset order), as
        appended before a restart: the same offsets and producer states. Returns how
        many; raises CorruptBatch for one that no longer validates."""
        n = 0
        for topic, partition, data in batches:
            error, _ = self.log(topic, partition).append(parse_batch(data))
            if error:
                raise CorruptBatch(f"stored batch of {topic}-{partition} refused on load: error {error}")
            n += 1
        if n:  # no producer id handed out before the restart is handed out again
            pids = [pid for log in self.logs.values() for pid in log.producers]
            self.next_producer_id = max([self.next_producer_id, *pids])
        return n

    def log(self, topic: str, partition: int) -> PartitionLog:
        key = (topic, partition)
        if key not in self.logs:
            self.logs[key] = PartitionLog()
        return self.logs[key]

    def drop(self, topic: str) -> None:
        """Forget a deleted topic's logs."""
        for key in [k for k in self.logs if k[0] == topic]:
            del self.logs[key]

    def produce(self, topic: str, partition: int, data) -> tuple:
        """``(error, base offset, message)`` of appending one partition's records
        (ReplicaManager.appendRecords); a batch that fails validation stores nothing."""
        try:
            batch = parse_batch(data)
        except CorruptBatch as e:
            return e.error, -1, str(e)
        if batch.attributes & TRANSACTIONAL:
            return UNSUPPORTED_VERSION, -1, "transactions are not supported by rebalance serve"
        log = self.log(topic, partition)
        before = log.end
        error, base = log.append(batch)
        if not error and log.end > before:
            if self.on_append is not None:
                self.on_append(topic, partition, base, log.batches[-1])
            self.appended.set()
            self.appended = asyncio.Event()
        return error, base, None

    def init_producer_id(self, transactional_id, producer_id: int = -1, epoch: int = -1) -> dict:
        """InitProducerId for an idempotent producer: a new producer id at epoch 0, or
        the same id at the next epoch when the producer gives its own (KIP-360);
        a transactional id is answered UNSUPPORTED_VERSION (no transaction
        coordinator; TransactionCoordinator.handleInitProducerId)."""
        if transactional_id:
            return {"throttle_time": 0, "error_code": UNSUPPORTED_VERSION, "producer_id": -1, "producer_epoch": -1}
        if producer_id >= 0:
            return {"throttle_time": 0, "error_code": NONE, "producer_id": producer_id,
                    "producer_epoch": epoch + 1}
        self.next_producer_id += 1
        return {"throttle_time": 0, "error_code": NONE, "producer_id": self.next_producer_id, "producer_epoch": 0}
