"""Records in ``rebalance serve`` (impl/records.py): batches built by kio's record
writer, validated, appended with offsets, fetched and listed; idempotent
producers' sequences; and, on real sockets, a corrupt batch refused with
CORRUPT_MESSAGE and nothing stored, and every request version serve advertises
answered with null and with empty arrays."""
import asyncio
import datetime
import gzip
import io
import socket
import sqlite3
import struct

import cramjam
import pytest
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from interop.harness import REBALANCE, Server, wait_for
from rebalance.impl import records as R
from rebalance.impl.limits import Limits
from rebalance.impl.wire import SUPPORTED, Api, read_response
from test_serve import Client, closed, server, zero_request  # noqa: F401 (the server fixture)

T0 = 1_700_000_000_000  # ms


def batch(values, ts=T0, pid=-1, epoch=-1, seq=-1, codec=0) -> bytes:
    """A v2 record batch of ``values`` (timestamps ts, ts+1000, ... ms) written by kio,
    its records section compressed with ``codec`` (CompressionType id)."""
    recs = tuple(Record(attributes=i8(0), timestamp=TZAwareMicros.parse(
        datetime.datetime.fromtimestamp((ts + 1000 * i) / 1000, datetime.UTC)), offset=i64(i), key=None,
        value=v, headers=()) for i, v in enumerate(values))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=i64(pid), producer_epoch=i16(epoch), base_sequence=i32(seq),
                                        records=recs, attributes=i16(0)))
    data = buf.getvalue()
    if codec:
        body = {1: gzip.compress, 3: lambda b: bytes(cramjam.lz4.compress(b)),
                4: lambda b: bytes(cramjam.zstd.compress(b)),
                2: lambda b: bytes(cramjam.snappy.compress_raw(b))}[codec](data[R.HEADER.size:])
        head = bytearray(data[:R.HEADER.size])
        head[21:23] = struct.pack(">h", codec)
        data = bytes(head) + body
        data = data[:8] + struct.pack(">i", len(data) - 12) + data[12:17] + \
            struct.pack(">I", R.crc32c(data[R.CRC_FROM:])) + data[21:]
    return data


def values_of(data: bytes) -> list:
    """The values of every record in fetched bytes (uncompressed batches), via kio's reader."""
    from kio.records.readers import read_batch
    out, at = [], 0
    while at < len(data):
        b, size = read_batch(data, at)
        out += [r.value for r in b.records]
        at += size
    return out


CODEC_IDS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=CODEC_IDS)
def test_a_batch_of_every_codec_is_validated_and_its_records_walked(codec):
    data = batch([b"a", b"b", b"c"], codec=codec)
    b = R.parse_batch(data)
    assert (b.last_offset_delta, b.count, b.max_timestamp) == (2, 3, T0 + 2000)
    assert [r for r in R.walk(data, Limits()) if r] == [(0, T0), (1, T0 + 1000), (2, T0 + 2000)]


@pytest.mark.parametrize("codec", [0, 1, 4], ids=["none", "gzip", "zstd"])
def test_records_larger_than_a_chunk_are_walked_as_they_come(codec):
    values = [bytes(3 * R.CHUNK), b"small", bytes(R.CHUNK + 7)]
    data = batch(values, codec=codec)
    assert [r for r in R.walk(data, Limits()) if r] == [(0, T0), (1, T0 + 1000), (2, T0 + 2000)]
    if codec == 0:  # the first record's length grown by one: its value no longer fills it exactly
        at = R.HEADER.size
        length, n = R.read_signed_varint(data, at)
        from kio.serial.writers import write_signed_varint
        head = io.BytesIO()
        write_signed_varint(head, length + 1)
        assert len(head.getvalue()) == n
        bad = data[:at] + head.getvalue() + data[at + n:]
        bad = bad[:17] + struct.pack(">I", R.crc32c(bad[R.CRC_FROM:])) + bad[21:]
        with pytest.raises(R.CorruptBatch):
            R.parse_batch(bad)


def run_records(tmp_path, scenario, limits=Limits()):
    """``scenario(records)`` (a coroutine function) on a Records over a Store in
    ``tmp_path``, its writes and reads on threads as serve runs them; its result."""
    import concurrent.futures

    from rebalance.impl.store import Store

    async def main():
        store = Store(tmp_path)
        writer = concurrent.futures.ThreadPoolExecutor(1)
        loop = asyncio.get_running_loop()
        records = R.Records(store, lambda fn, *a: loop.run_in_executor(writer, fn, *a),
                            lambda fn, *a: loop.run_in_executor(None, fn, *a), limits)
        records.load()
        try:
            return await scenario(records)
        finally:
            writer.shutdown()
            store.close()
    return asyncio.run(main())


def test_offsets_high_watermark_fetch_and_list_offsets(tmp_path):
    async def scenario(records):
        assert await records.produce("t", 0, batch([b"a", b"b"])) == (0, 0, None)
        assert await records.produce("t", 0, batch([b"c"], ts=T0 + 5000)) == (0, 2, None)
        log = records.log("t", 0)
        assert (log.end, log.high_watermark) == (3, 3)

        async def read(offset, max_bytes):
            return values_of((await records.fetch([(log, offset, max_bytes)], 1 << 30))[0])
        assert await read(0, 1 << 20) == [b"a", b"b", b"c"]
        assert await read(2, 1 << 20) == [b"c"]
        assert await read(1, 1) == [b"a", b"b"]  # the batch holding offset 1, whatever max bytes says
        offsets = [await records.offset_for(log, ts) for ts in (R.EARLIEST, R.LATEST, T0 + 500, T0 + 4000,
                                                                 T0 + 9000, R.MAX_TIMESTAMP)]
        assert offsets == [(0, -1), (3, -1), (1, T0 + 1000), (2, T0 + 5000), (-1, -1), (2, T0 + 5000)]
    run_records(tmp_path, scenario)


def corruptions():
    good = batch([b"x", b"y"])
    flipped = bytearray(good)
    flipped[-1] ^= 1
    return {
        "crc": bytes(flipped),
        "truncated": good[:-3],
        "short": good[:20],
        "magic 1": good[:16] + b"\x01" + good[17:],
        "lying count": good[:57] + struct.pack(">i", 3) + good[61:],
        "garbage codec": batch([b"x"], codec=1)[:R.HEADER.size] + b"not gzip at all",
    }


@pytest.mark.parametrize("name", list(corruptions()))
def test_a_malformed_batch_is_refused_and_nothing_is_stored(tmp_path, name):
    async def scenario(records):
        error, base, message = await records.produce("t", 0, corruptions()[name])
        assert error in (R.CORRUPT_MESSAGE, R.INVALID_RECORD) and base == -1 and message
        assert records.log("t", 0).end == 0 and records.listing("t", 1) == []
    run_records(tmp_path, scenario)


def bomb(codec: int, size: int) -> bytes:
    """A batch of one record whose value is ``size`` zero bytes, compressed with ``codec``."""
    return batch([bytes(size)], codec=codec)


@pytest.mark.parametrize("codec", [1, 3, 4], ids=["gzip", "lz4", "zstd"])
def test_a_decompression_bomb_is_refused_as_message_too_large_with_bounded_memory(codec):
    """Issue 42 item 2: a batch's records are decompressed as a stream, never past
    32 times message.max.bytes; a batch of a few KB that would decompress to more is
    MESSAGE_TOO_LARGE, and its one record's value is passed over a chunk at a time.
    (snappy cannot compress past about 21:1, under the bound: its blocks' declared
    lengths are checked below.)"""
    import tracemalloc
    limits = Limits(message_max_bytes=64 << 10)
    data = bomb(codec, 4 * limits.batch_max_decompressed_bytes)
    assert len(data) < limits.message_max_bytes
    tracemalloc.start()
    with pytest.raises(R.CorruptBatch) as e:
        R.parse_batch(data, limits)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert e.value.error == R.MESSAGE_TOO_LARGE, e.value
    assert peak < 1 << 20, peak  # chunks, never the 2 MiB bound, nor the 8 MiB the bomb holds


@pytest.mark.parametrize("framing", ["raw", "xerial"])
def test_a_snappy_block_is_checked_against_the_bound_before_it_is_decompressed(framing):
    block = bytes(cramjam.snappy.compress_raw(bytes(1 << 20)))
    data = block if framing == "raw" else R.XERIAL + bytes(8) + struct.pack(">i", len(block)) + block
    assert len(R._Snappy(data, 1 << 20).read(1 << 21)) == 1 << 20
    with pytest.raises(R.CorruptBatch) as e:
        R._Snappy(data, (1 << 20) - 1).read(10)
    assert e.value.error == R.MESSAGE_TOO_LARGE


def test_message_max_bytes_and_the_record_count_bound():
    limits = Limits(message_max_bytes=4096, batch_max_records=10)
    with pytest.raises(R.CorruptBatch) as e:
        R.parse_batch(batch([bytes(5000)]), limits)
    assert e.value.error == R.MESSAGE_TOO_LARGE and "message.max.bytes" in str(e.value)
    with pytest.raises(R.CorruptBatch) as e:
        R.parse_batch(batch([b"x"] * 11, codec=4), limits)
    assert e.value.error == R.MESSAGE_TOO_LARGE and "11 records" in str(e.value)
    assert R.parse_batch(batch([b"x"] * 10, codec=4), limits).count == 10


def test_validation_yields_the_loop_between_slices():
    """A batch of many records is validated in slices of SLICE_WORK records."""
    n = 5 * R.SLICE_WORK
    steps = R.validation(batch([b""] * n, codec=4), Limits())
    slices = 0
    while True:
        try:
            next(steps)
            slices += 1
        except StopIteration as done:
            assert done.value.count == n
            break
    assert slices == n // R.SLICE_WORK


def test_idempotent_sequences_duplicates_gaps_and_fencing():
    log = R.PartitionLog(1)

    def append(data):
        error, base, _ = log.assign(R.parse_batch(data))
        return error, base
    assert append(batch([b"a", b"b"], pid=7, epoch=0, seq=0)) == (0, 0)
    assert append(batch([b"a", b"b"], pid=7, epoch=0, seq=0)) == (0, 0)  # a retry: same offset
    assert log.end == 2
    assert append(batch([b"c"], pid=7, epoch=0, seq=5))[0] == R.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(batch([b"c"], pid=7, epoch=0, seq=2)) == (0, 2)
    assert append(batch([b"d"], pid=7, epoch=1, seq=0)) == (0, 3)  # a new epoch restarts at 0
    assert append(batch([b"e"], pid=7, epoch=0, seq=3))[0] == R.INVALID_PRODUCER_EPOCH
    assert append(batch([b"e"], pid=8, epoch=0, seq=4))[0] == R.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.end == 4


def test_a_full_store_goes_offline_and_a_restart_never_gives_an_acknowledged_offset_again(tmp_path):
    """Issue 42 item 1: a write that fails (here SQLite's own "database or disk is
    full", its page count capped) is answered KAFKA_STORAGE_ERROR and takes the
    store offline: the next Produce is refused without a write, and a restart
    resumes at the stored end, every acknowledged record at its offset."""
    import sqlite3
    acked = {}

    async def fill(records):
        records.store.db.execute("PRAGMA max_page_count=%d" % (
            records.store.db.execute("PRAGMA page_count").fetchone()[0] + 40))
        for i in range(200):
            error, base, message = await records.produce("t", 0, batch([b"v%d" % i + bytes(3000)]))
            if error:
                assert error == R.KAFKA_STORAGE_ERROR and "full" in message, message
                break
            acked[base] = b"v%d" % i
        else:
            raise AssertionError("the store never filled")
        error, _, message = await records.produce("t", 0, batch([b"later"]))
        assert error == R.KAFKA_STORAGE_ERROR and "offline" in message
        assert records.log("t", 0).high_watermark == len(acked)

    async def restarted(records):
        log = records.log("t", 0)
        assert (log.end, log.high_watermark) == (len(acked), len(acked))
        data = (await records.fetch([(log, 0, 1 << 30)], 1 << 30))[0]
        assert [v[:len(b"v%d" % i)] for i, v in enumerate(values_of(data))] == [acked[o] for o in sorted(acked)]
        assert await records.produce("t", 0, batch([b"next"])) == (0, len(acked), None)
    run_records(tmp_path, fill)
    assert 5 < len(acked) < 200
    run_records(tmp_path, restarted)
    with sqlite3.connect(tmp_path / "store.db") as db:
        assert db.execute("SELECT count(*) FROM batches").fetchone() == (len(acked) + 1,)


def test_retention_ms_and_bytes_move_the_log_start(tmp_path):
    async def scenario(records):
        for i in range(10):
            assert (await records.produce("t", 0, batch([bytes(100)], ts=T0 + 1000 * i)))[0] == 0
        log = records.log("t", 0)
        size = log.position // 10
        moved = await records.retain(lambda topic: {"retention.ms": 5500, "retention.bytes": -1}, T0 + 10_000)
        assert moved == 1 and log.start == 5  # the batches whose timestamps all precede now - 5.5 s
        await records.retain(lambda topic: {"retention.ms": -1, "retention.bytes": 3 * size}, T0)
        assert log.start == 7  # three batches' bytes kept
        assert await records.offset_for(log, R.EARLIEST) == (7, -1)
        assert [r["offset"] for r in records.listing("t", 1)] == [7, 8, 9]
        await records.retain(lambda topic: {"retention.ms": 0, "retention.bytes": -1}, T0 + 60_000)
        assert (log.start, log.high_watermark) == (10, 10)  # all of it: the log is empty at its end offset
    run_records(tmp_path, scenario)


def test_delete_records_moves_the_log_start_within_a_batch(tmp_path):
    """DeleteRecords (Partition.deleteRecordsOnLeader): the log start moves to the offset
    asked (-1: the high watermark), never back, never past the high watermark; the batch
    holding the new start stays and is fetched whole, the batches below it go."""
    async def scenario(records):
        for values in ([b"a", b"b"], [b"c", b"d"], [b"e"]):
            await records.produce("t", 0, batch(values))
        log = records.log("t", 0)
        assert await records.delete_records("t", 0, 3) == (R.NONE, 3)
        assert await records.offset_for(log, R.EARLIEST) == (3, -1)
        assert values_of((await records.fetch([(log, 3, 1 << 20)], 1 << 30))[0]) == [b"c", b"d", b"e"]
        assert await records.delete_records("t", 0, 1) == (R.NONE, 3)  # never back
        assert await records.delete_records("t", 0, 6) == (R.OFFSET_OUT_OF_RANGE, -1)
        assert await records.delete_records("t", 0, -2) == (R.OFFSET_OUT_OF_RANGE, -1)
        assert await records.delete_records("t", 0, -1) == (R.NONE, 5)  # the high watermark: empty
        assert await records.offset_for(log, R.LATEST) == (5, -1)
    run_records(tmp_path, scenario)
    with sqlite3.connect(tmp_path / "store.db") as db:
        assert db.execute("SELECT count(*) FROM batches").fetchone() == (0,)


def test_delete_records_on_the_wire_refuses_compacted_topics(server):
    """Kafka Streams purges its repartition topics with DeleteRecords; a topic whose
    cleanup.policy is compact only is POLICY_VIOLATION, an unknown one
    UNKNOWN_TOPIC_OR_PARTITION."""
    c = Client(server.port, "admin")
    assert c.call(Api.CREATE_TOPICS, 7, topics=[{"name": "changelog", "num_partitions": 1, "replication_factor": 1,
                                                 "assignments": [], "configs": [
                                                     {"name": "cleanup.policy", "value": "compact"}]}],
                  timeout=1000, validate_only=False).topics[0].error_code == 0
    produce(c, batch([b"a", b"b", b"c"]))
    r = c.call(Api.DELETE_RECORDS, 2, timeout=1000, topics=[
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 2}, {"partition_index": 9, "offset": 0}]},
        {"name": "changelog", "partitions": [{"partition_index": 0, "offset": 0}]}])
    assert [[(p.low_watermark, p.error_code) for p in t.partitions] for t in r.topics] == [
        [(2, 0), (-1, 3)], [(-1, 44)]]
    assert fetch_all(c, offset=2) == (0, [b"a", b"b", b"c"])  # the batch holding offset 2 is fetched whole
    assert fetch_all(c) == (1, [])  # OFFSET_OUT_OF_RANGE: below the log start


def produce(client, data, acks=-1, topic="t", partition=0):
    r = client.call(Api.PRODUCE, 9, transactional_id=None, acks=acks, timeout=1000, topic_data=[
        {"name": topic, "partition_data": [{"index": partition, "records": data}]}])
    return r.responses[0].partition_responses[0]


def latest(client, partition=0) -> int:
    r = client.call(Api.LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
        {"name": "t", "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}])
    return r.topics[0].partitions[0].offset


def earliest(client, topic) -> int:
    r = client.call(Api.LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": R.EARLIEST}]}])
    return r.topics[0].partitions[0].offset


def test_retention_deletes_nothing_from_a_compact_only_topic(tmp_path):
    """Kafka deletes by retention only the logs whose cleanup.policy has delete
    (LogManager.cleanupLogs): a compacted topic (Kafka Connect's internal ones)
    keeps its old records, the default topic loses them."""
    server = Server(tmp_path, "t:1", args=("--log-retention-ms", 1000, "--log-retention-check-interval-ms", 100))
    try:
        c = Client(server.port, "p")
        for name, policy in (("compacted", "compact"), ("both", "compact,delete")):
            r = c.call(Api.CREATE_TOPICS, 7, topics=[{"name": name, "num_partitions": 1, "replication_factor": -1,
                                                      "assignments": [], "configs": [
                                                          {"name": "cleanup.policy", "value": policy}]}],
                       timeout=1000, validate_only=False)
            assert r.topics[0].error_code == 0
        for topic in ("t", "compacted", "both"):
            assert produce(c, batch([b"old"]), topic=topic).error_code == 0  # T0: long past retention
        wait_for(lambda: earliest(c, "t") == 1 and earliest(c, "both") == 1, 30, "retention to delete the old batches")
        assert earliest(c, "compacted") == 0
    finally:
        server.stop()


def test_on_the_wire_a_corrupt_batch_gets_corrupt_message_and_the_log_is_untouched(server):
    c = Client(server.port, "producer")
    assert (p := produce(c, batch([b"a", b"b"]))).error_code == 0 and p.base_offset == 0
    for name, data in corruptions().items():
        p = produce(c, data)
        assert p.error_code in (R.CORRUPT_MESSAGE, R.INVALID_RECORD) and p.base_offset == -1, name
    assert latest(c) == 2
    assert (p := produce(c, batch([b"c"]))).error_code == 0 and p.base_offset == 2  # the connection lives on
    f = c.call(Api.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
               session_id=0, session_epoch=-1, topics=[{"topic": "t", "partitions": [
                   {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 1, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}], forgotten_topics_data=[], rack_id="")
    part = f.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 3 and values_of(part.records) == [b"a", b"b", b"c"]
    assert not any("Traceback" in line for line in server.log)


def test_acks_zero_gets_no_response_and_bad_acks_are_refused(server):
    c = Client(server.port, "producer")
    c.sock.sendall(__import__("rebalance.impl.wire", fromlist=["request_frame"]).request_frame(
        Api.PRODUCE, 9, 99, "producer", {"transactional_id": None, "acks": 0, "timeout": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 1, "records": batch([b"z"])}]}]}))
    assert latest(c, 1) == 1  # answered next: the acks=0 request got no response, and was appended
    assert produce(c, batch([b"q"]), acks=2).error_code == 21  # INVALID_REQUIRED_ACKS
    assert produce(c, batch([b"q"]), partition=9).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_a_transactional_producer_gets_unsupported_version(server):
    c = Client(server.port, "txn")
    r = c.call(Api.INIT_PRODUCER_ID, 4, transactional_id="tx-1", transaction_timeout=60000, producer_id=-1,
               producer_epoch=-1)
    assert r.error_code == 35
    r = c.call(Api.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1,
               producer_epoch=-1)
    assert r.error_code == 0 and r.producer_id > 0 and r.producer_epoch == 0


# the fields a zero request needs set for serve to answer it at once rather than hold it (a Fetch waits
# max.wait.ms) or send nothing (a Produce with acks=0)
ANSWERABLE = {Api.PRODUCE: {"acks": 1}}


@pytest.mark.parametrize("nulls", [True, False], ids=["null arrays", "empty arrays"])
def test_every_advertised_request_version_is_answered(server, nulls):
    """Every (API, version) in the ApiVersions answer, sent with every nullable
    field null (or, second pass, every array empty and every string ""): answered
    with a response that parses, never a closed connection. Covers the Metadata v12
    null topic list librdkafka sends for all topics (issue 19)."""
    for api, (low, high) in sorted(SUPPORTED.items()):
        for version in range(low, high + 1):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(zero_request(api, version, nulls=nulls, **ANSWERABLE.get(api, {})))
                head = s.recv(4, socket.MSG_WAITALL)
                assert len(head) == 4, (api, version, server.log[-3:])
                body = s.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                assert read_response(body, api, version)[0] == 1
    assert not any("closing connection" in line for line in server.log), server.log[-5:]


def test_metadata_for_all_topics_as_librdkafka_sends_it(server):
    """librdkafka 2.x's Metadata v12 for all topics ends with 3 bytes after its
    payload; Kafka reads the payload and ignores them (RequestContext.parseRequest)."""
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        _, body = read_response(s.recv(size, socket.MSG_WAITALL), Api.METADATA, 12)
    assert [(t.name, len(t.partitions)) for t in body.topics] == [("t", 4)]


def fetch_all(c, topic="t", partition=0, offset=0):
    f = c.call(Api.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
               session_id=0, session_epoch=-1, topics=[{"topic": topic, "partitions": [
                   {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}], forgotten_topics_data=[], rack_id="")
    part = f.responses[0].partitions[0]
    return part.error_code, values_of(part.records)


def test_a_file_store_keeps_records_topics_and_producer_state_across_kill_9(server):
    c = Client(server.port, "producer")
    assert c.call(Api.CREATE_TOPICS, 7, topics=[{"name": "made", "num_partitions": 1, "replication_factor": 1,
                                                 "assignments": [], "configs": []}], timeout=1000,
                  validate_only=False).topics[0].error_code == 0
    assert produce(c, batch([b"a", b"b"], pid=5000, epoch=0, seq=0)).base_offset == 0
    assert produce(c, batch([b"c"]), topic="made").base_offset == 0
    server.kill9()  # nothing closes the store: what was answered is on disk
    mark = len(server.log)
    server.start()
    wait_for(lambda: any("listening on" in line for line in server.log[mark:]), 30, "the restarted server")
    c = Client(server.port, "producer")
    assert fetch_all(c) == (0, [b"a", b"b"]) and fetch_all(c, "made") == (0, [b"c"])
    assert produce(c, batch([b"a", b"b"], pid=5000, epoch=0, seq=0)).base_offset == 0  # still a duplicate
    assert produce(c, batch([b"d"], pid=5000, epoch=0, seq=2)).base_offset == 2
    r = c.call(Api.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1,
               producer_epoch=-1)
    assert r.producer_id > 5000  # never one whose state the log holds


def test_every_version_of_produce_fetch_and_list_offsets_carries_records(server):
    """Produce, Fetch and ListOffsets at every version serve advertises, naming a
    partition (the empty-array pass above encodes no partition): the records each
    Produce appended come back from every Fetch version, and ListOffsets finds them."""
    c = Client(server.port, "versions")
    low, high = SUPPORTED[Api.PRODUCE]
    for n, version in enumerate(range(low, high + 1)):
        r = c.call(Api.PRODUCE, version, transactional_id=None, acks=-1, timeout=1000, topic_data=[
            {"name": "t", "partition_data": [{"index": 3, "records": batch([b"v%d" % version], ts=T0 + n)}]}])
        assert (r.responses[0].partition_responses[0].error_code, r.responses[0].partition_responses[0].base_offset) \
            == (0, n), version
    want = [b"v%d" % v for v in range(low, high + 1)]
    low, high = SUPPORTED[Api.FETCH]
    for version in range(low, high + 1):
        f = c.call(Api.FETCH, version, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                   session_id=0, session_epoch=-1, topics=[{"topic": "t", "partitions": [
                       {"partition": 3, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                   forgotten_topics_data=[], rack_id="")
        part = f.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, values_of(part.records)) == (0, len(want), want), version
    low, high = SUPPORTED[Api.LIST_OFFSETS]
    for version in range(low, high + 1):
        r = c.call(Api.LIST_OFFSETS, version, replica_id=-1, isolation_level=0, topics=[
            {"name": "t", "partitions": [{"partition_index": 3, "current_leader_epoch": -1, "timestamp": T0 + 2}]}])
        assert r.topics[0].partitions[0].offset == 2, version


def test_a_store_that_cannot_be_used_is_a_clear_exit_2(tmp_path):
    """A read-only store folder (a read-only tmpfs: root writes anywhere else), or a
    file where the folder should be, is refused at start with the reason and exit 2,
    never a traceback."""
    import subprocess
    run = [str(REBALANCE), "serve", "--port", "0", "--topic", "t:1", "--store"]
    a_file = tmp_path / "file.db"
    a_file.write_text("not a folder")
    r = subprocess.run([*run, str(a_file)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr, r.stderr
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(readonly)],
                      capture_output=True).returncode:
        pytest.skip("mount is not permitted here (a read-only store needs a read-only file system: root writes "
                    "anywhere else)")
    try:
        r = subprocess.run([*run, str(readonly)], capture_output=True, text=True, timeout=60)
    finally:
        subprocess.run(["umount", str(readonly)], check=True)
    assert r.returncode == 2 and "not writable" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
