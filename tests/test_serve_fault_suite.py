"""The fault suite of issue 42: ``rebalance serve``'s records path, limits and
control endpoint under faults, driven by real librdkafka (confluent-kafka)
producers and consumers. Every test that produces ends with every acknowledged
record read back at its acknowledged offset, and no offset acknowledged twice.

Slow, and sized by REBALANCE_FAULT_SCALE: "ci" (the default, the subset CI runs:
fewer kill -9s, frames held 10 s) or "full" (the issue's figures: 20 kill -9s,
frames held 60 s). Each test prints its figures:
``pytest -m slow tests/test_serve_fault_suite.py -s``.
Disk full needs a size-limited tmpfs (``mount -t tmpfs``, root): skipped with
the reason where mount is not permitted."""
import os
import random
import socket
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from interop.harness import REBALANCE, Server, wait_for
from rebalance.impl import records as R
from rebalance.impl.wire import Api
from test_records import batch
from test_serve import Client

kafka = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.slow
FULL = os.environ.get("REBALANCE_FAULT_SCALE", "ci") == "full"
KILLS = 20 if FULL else 3
HOLD_S = 60 if FULL else 10
BOMBING_S = 60 if FULL else 10
MIB = 1 << 20
TOPIC, PARTITIONS = "t", 4


# --- helpers ------------------------------------------------------------------------------
class Ledger:
    """A librdkafka producer whose acknowledged records are kept: ``acked`` {value:
    (partition, offset)} and ``errors`` {error name: count} from delivery reports."""

    def __init__(self, bootstrap: str, **conf):
        self.acked, self.errors, self.duplicates = {}, {}, 0
        self.producer = kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                        "enable.idempotence": True, "log_level": 0, **conf})

    def _report(self, err, msg):
        if err is not None:
            self.errors[err.name()] = self.errors.get(err.name(), 0) + 1
            return
        if msg.value() in self.acked:
            self.duplicates += 1
        self.acked[msg.value()] = (msg.partition(), msg.offset())

    def produce(self, n: int, prefix: str, size: int = 100, flush: bool = True) -> None:
        for i in range(n):
            value = f"{prefix}-{i}-".encode().ljust(size, b".")
            while True:
                try:
                    self.producer.produce(TOPIC, value=value, partition=i % PARTITIONS, on_delivery=self._report)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)
        if flush:
            self.producer.flush(60)


def verify(bootstrap: str, ledgers) -> int:
    """Every acknowledged record of ``ledgers`` read back at its acknowledged offset,
    and no offset acknowledged to two records; how many records the log holds."""
    acked = {}
    for ledger in ledgers:
        assert not set(acked) & set(ledger.acked)
        acked.update(ledger.acked)
    assert len(set(acked.values())) == len(acked), "an offset acknowledged to two records"
    c = kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{random.random()}",
                        "enable.auto.commit": False, "log_level": 0})
    found = {}
    try:
        for p in range(PARTITIONS):
            _, high = c.get_watermark_offsets(kafka.TopicPartition(TOPIC, p), timeout=10)
            c.assign([kafka.TopicPartition(TOPIC, p, 0)])
            while high and (p, high - 1) not in found:
                m = c.poll(5)
                assert m is not None, f"partition {p}: nothing more read before offset {high}"
                if m.error() is None:
                    found[(m.partition(), m.offset())] = m.value()
    finally:
        c.close()
    wrong = [(v, at) for v, at in acked.items() if found.get(at) != v]
    assert not wrong, f"{len(wrong)} acknowledged records not at their offsets, e.g. {wrong[:3]}"
    return len(found)


class Peak:
    """The peak resident set size (MB) of a process and its children, sampled every 20 ms."""

    def __init__(self, pid: int):
        self.pid, self.mb, self.stop = pid, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _tree(self) -> float:
        total, pids = 0.0, [self.pid]
        while pids:
            pid = pids.pop()
            try:
                with open(f"/proc/{pid}/status") as f:
                    total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as f:
                        pids += [int(x) for x in f.read().split()]
            except (OSError, StopIteration):
                pass
        return total

    def _run(self):
        while not self.stop.is_set():
            self.mb = max(self.mb, self._tree())
            time.sleep(0.02)

    def end(self) -> float:
        self.stop.set()
        self.thread.join(5)
        return self.mb


class Group:
    """``n`` librdkafka consumers in a group on TOPIC, polling in threads."""

    def __init__(self, bootstrap: str, group: str, n: int = 2):
        self.stop, self.threads = threading.Event(), []
        for i in range(n):
            c = kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000,
                                "heartbeat.interval.ms": 500, "client.id": f"{group}-{i}", "log_level": 0})
            c.subscribe([TOPIC])
            t = threading.Thread(target=self._poll, args=(c,), daemon=True)
            t.start()
            self.threads.append(t)

    def _poll(self, c):
        while not self.stop.is_set():
            c.poll(0.2)
        c.close()

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(20)


def stable(server, group: str, members: int, timeout: float = 60) -> None:
    from test_serve_faults import _state  # DescribeGroups through a raw client
    wait_for(lambda: _state(server.port, group) == "Stable" and _members(server.port, group) == members, timeout,
             f"group {group} Stable with {members} members")
    time.sleep(1)  # the log lines of the rounds before, read on another thread, are in


def _members(port: int, group: str) -> int:
    c = Client(port, "describe")
    try:
        return len(c.call(Api.DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=False)
                   .groups[0].members)
    finally:
        c.sock.close()


def _beat(port: int, conn) -> None:
    """In a process of its own: a lone member of group "g" heartbeating every 100 ms
    (``test_serve_limits.Beating``) until told to stop; sends (errors, slowest s)."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from test_serve_limits import Beating, member
    c, mid, generation = member(port, 6000)
    beat = Beating(c, mid, generation)
    conn.send("ready")
    conn.recv()
    conn.send((sorted(set(int(e) for e in beat.end())), len(beat.errors), beat.longest))


class BeatingProcess:
    """``Beating`` in a process of its own, so that what this test process does (its
    GIL, its librdkafka threads) is not counted in serve's answers."""

    def __init__(self, port: int):
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_beat, args=(port, theirs), daemon=True)
        self.proc.start()
        assert self.conn.poll(60) and self.conn.recv() == "ready"

    def end(self) -> tuple:
        """(distinct error codes, heartbeats, slowest answer s)."""
        self.conn.send("stop")
        out = self.conn.recv()
        self.proc.join(10)
        return out


def rebalances(server, group: str, mark: int) -> int:
    """Rebalances of ``group`` begun after log line ``mark``."""
    return sum(f"group {group}:" in line and "PreparingRebalance" in line for line in server.log[mark:])


def answered_within(port: int) -> float:
    """Seconds a new client waits for ApiVersions and Metadata answers."""
    t0 = time.monotonic()
    c = Client(port, "newcomer")
    c.call(Api.API_VERSIONS, 3, client_software_name="x", client_software_version="1")
    c.call(Api.METADATA, 12, topics=None, allow_auto_topic_creation=False,
           include_topic_authorized_operations=False)
    c.sock.close()
    return time.monotonic() - t0


@dataclass
class Beside:
    """What ``beside_a_stable_group`` yields: the serve, the sockets the test holds open
    (closed at the end), and the group's rebalances meanwhile (set when the block ends)."""
    server: Server
    held: list = field(default_factory=list)
    rebalances: int | None = None


@contextmanager
def beside_a_stable_group(tmp_path, group: str):
    """A serve with a Stable two-member librdkafka ``group``. The block abuses serve while
    its sockets stay open in ``held``; after it, with them still open, 500 records are
    produced and read back at their acknowledged offsets (``verify``) and the group's
    rebalances meanwhile are counted into ``rebalances``."""
    run = Beside(Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0))
    try:
        bootstrap = f"127.0.0.1:{run.server.port}"
        members = Group(bootstrap, group)
        stable(run.server, group, 2)
        mark = len(run.server.log)
        yield run
        ledger = Ledger(bootstrap)
        ledger.produce(500, group)
        verify(bootstrap, [ledger])
        run.rebalances = rebalances(run.server, group, mark)
        members.end()
    finally:
        for s in run.held:
            s.close()
        run.server.stop()


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                       text=True)
    if r.returncode:
        pytest.skip(f"mount is not permitted here ({r.stderr.strip()}): a size-limited tmpfs needs root")


def produce_raw(c: Client, data: bytes, partition: int = 0):
    r = c.call(Api.PRODUCE, 9, transactional_id=None, acks=-1, timeout=30_000, topic_data=[
        {"name": TOPIC, "partition_data": [{"index": partition, "records": data}]}])
    return r.responses[0].partition_responses[0]


# --- the suite ----------------------------------------------------------------------------
def test_kill_9_during_acks_all_produce_loses_and_renumbers_nothing(tmp_path):
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    try:
        ledger = Ledger(f"127.0.0.1:{server.port}", **{"message.timeout.ms": 120_000})
        stop = threading.Event()

        def produce():
            n = 0
            while not stop.is_set():
                ledger.produce(500, f"k{n}", flush=False)
                n += 1
            ledger.producer.flush(120)
        t = threading.Thread(target=produce, daemon=True)
        t.start()
        t0 = time.monotonic()
        for _ in range(KILLS):
            time.sleep(random.uniform(0.3, 1.5))
            server.kill9()
            server.log.clear()
            server.start()
        stop.set()
        t.join(180)
        held = verify(f"127.0.0.1:{server.port}", [ledger])
        print(f"\n{KILLS} kill -9s in {time.monotonic() - t0:.0f} s of acks=all idempotent produce: "
              f"{len(ledger.acked):,} acknowledged, all at their offsets, {ledger.duplicates} acknowledged twice, "
              f"{held:,} records in the log, delivery errors {ledger.errors}")
        assert ledger.duplicates == 0 and not ledger.errors and len(ledger.acked) > 1000
    finally:
        server.stop()


def test_disk_full_then_space_returning_with_a_kill_9_between(tmp_path):
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "4m")
    server = None
    try:
        server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0, store=False,
                        args=("--store", disk / "store"))
        bootstrap = f"127.0.0.1:{server.port}"
        full = Ledger(bootstrap, **{"enable.idempotence": False, "retries": 0, "message.timeout.ms": 10_000})
        for round_ in range(20):
            full.produce(200, f"full{round_}", size=2000)
            if "KAFKA_STORAGE_ERROR" in full.errors:
                break
        assert "KAFKA_STORAGE_ERROR" in full.errors, full.errors
        wait_for(lambda: any("store offline" in line for line in server.log), 10, "the store offline logged")
        server.kill9()
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        server.log.clear()
        server.start()
        after = Ledger(bootstrap)
        after.produce(2000, "after", size=2000)
        held = verify(bootstrap, [full, after])
        print(f"\ndisk full: {len(full.acked):,} acknowledged before it filled, then {full.errors}; kill -9, "
              f"space back: {len(after.acked):,} more acknowledged; all {held:,} records at their offsets, "
              "none acknowledged twice")
        assert not after.errors and full.duplicates == after.duplicates == 0
    finally:
        if server is not None:
            server.stop()
        subprocess.run(["umount", str(disk)])


def test_a_read_only_store_is_refused_at_start_and_keeps_what_it_acknowledged(tmp_path):
    """A store whose file system turned read-only (remounted while serve was stopped)
    is refused at start with exit 2 and the reason; back read-write, serve resumes
    with every acknowledged record at its offset. (A file system cannot be remounted
    read-only under files open for writing: a write failing at run time is the disk
    full case.)"""
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "64m")
    server = None
    try:
        server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0, store=False,
                        args=("--store", disk / "store"))
        bootstrap = f"127.0.0.1:{server.port}"
        before = Ledger(bootstrap)
        before.produce(500, "before")
        server.stop()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        r = subprocess.run([str(REBALANCE), "serve", "--port", "0", "--topic", f"{TOPIC}:{PARTITIONS}", "--store",
                            str(disk / "store")], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "--store" in r.stderr and "Traceback" not in r.stderr, r.stderr
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
        server.log.clear()
        server.start()
        after = Ledger(bootstrap)
        after.produce(500, "after")
        held = verify(bootstrap, [before, after])
        print(f"\nread-only store: exit {r.returncode} ({r.stderr.strip().splitlines()[-1]}); back read-write, "
              f"{held:,} records at their offsets")
    finally:
        if server is not None:
            server.stop()
        subprocess.run(["umount", str(disk)])


def bomb_batch(codec: int, compressed_records: bytes, count: int = 1) -> bytes:
    """A v2 batch of ``count`` records whose records section is ``compressed_records``."""
    data = R.HEADER.pack(0, 0, 0, 2, 0, codec, count - 1, 0, 0, -1, -1, -1, count) + compressed_records
    data = data[:8] + struct.pack(">i", len(data) - 12) + data[12:]
    return data[:17] + struct.pack(">I", R.crc32c(data[R.CRC_FROM:])) + data[21:]


def _varint(n: int) -> bytes:
    n, out = (n << 1) ^ (n >> 63), bytearray()  # zigzag, then 7 bits a byte
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _record_head(size: int) -> bytes:
    """The bytes of a record before its value of ``size`` bytes (no key, no headers after it)."""
    body = b"\0" + _varint(0) + _varint(0) + _varint(-1) + _varint(size)
    return _varint(len(body) + size + 1) + body


def _streamed(compressor, head: bytes, size: int, tail: bytes = b"\0") -> bytes:
    """``head``, ``size`` zero bytes and ``tail`` through a streaming compressor, a MiB at a time."""
    parts, zero = [compressor.compress(head)], bytes(MIB)
    for _ in range(size // MIB):
        parts.append(compressor.compress(zero))
    return b"".join(parts) + compressor.compress(tail) + compressor.flush()


def bombs() -> dict:
    """{name: batch}: one record whose value decompresses to 2 GiB (zstd), 900 MiB
    (gzip), 200 MiB (lz4) or 18 MiB (snappy, about its largest ratio), and a valid
    batch of 3M tiny records (zstd, 2.4 MB: above the default message.max.bytes)."""
    import zlib

    import cramjam
    import lz4.frame
    from backports.zstd import ZstdCompressor
    out = {"zstd": bomb_batch(4, _streamed(ZstdCompressor(), _record_head(2048 * MIB), 2048 * MIB)),
           "gzip": bomb_batch(1, _streamed(zlib.compressobj(9, zlib.DEFLATED, 31), _record_head(900 * MIB),
                                           900 * MIB)),
           "lz4": bomb_batch(3, lz4.frame.compress(_record_head(200 * MIB) + bytes(200 * MIB) + b"\0")),
           "snappy": bomb_batch(2, bytes(cramjam.snappy.compress_raw(_record_head(18 * MIB) + bytes(18 * MIB)
                                                                      + b"\0")))}
    n = 3_000_000
    tiny = b"".join(_varint(6 + len(_varint(i))) + b"\0" + _varint(0) + _varint(i) + _varint(-1) + _varint(-1)
                    + _varint(0) for i in range(n))
    out["3M records"] = bomb_batch(4, bytes(cramjam.zstd.compress(tiny)), n)
    return out


def test_compression_bombs_beside_a_heartbeating_group(tmp_path):
    """Each bomb is refused (MESSAGE_TOO_LARGE or CORRUPT_MESSAGE; snappy's 18 MiB is a
    valid batch under the 32x bound, stored; the 3M tiny records are above
    message.max.bytes compressed, and the record count bound is tests/test_records.py's)
    while a librdkafka group and a raw member heartbeat."""
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0,
                    args=("--group-min-session-timeout-ms", 1000))
    try:
        made = bombs()  # made first: building them holds this process's GIL, which the beating thread needs
        bootstrap = f"127.0.0.1:{server.port}"
        group = Group(bootstrap, "bombed")
        stable(server, "bombed", 2)
        beat = BeatingProcess(server.port)
        peak = Peak(server.proc.pid)
        mark = len(server.log)
        ledger = Ledger(bootstrap)
        results, rounds, end = {}, 0, time.monotonic() + BOMBING_S
        while time.monotonic() < end:  # every bomb in turn, again and again, the heartbeats going on
            for name, data in made.items():
                raw = Client(server.port, "bomber")
                raw.sock.settimeout(60)
                t0 = time.monotonic()
                p = produce_raw(raw, data)
                took = time.monotonic() - t0
                results[name] = (p.error_code, max(took, results.get(name, (0, 0))[1]), len(data))
                raw.sock.close()
                ledger.produce(50, f"{name}-{rounds}")
            rounds += 1
        errors, beats, slowest = beat.end()
        rss = peak.end()
        held = verify(bootstrap, [ledger])
        moved = rebalances(server, "bombed", mark)
        group.end()
        shown = {name: f"error {int(e)} in {t:.2f} s at most ({n:,} bytes)" for name, (e, t, n) in results.items()}
        print(f"\n{rounds} rounds of bombs in {BOMBING_S} s: {shown}; serve's process tree peaked at {rss:.0f} MB; "
              f"heartbeats: {beats}, slowest {slowest * 1000:.0f} ms; rebalances of the librdkafka group "
              f"meanwhile: {moved}; {held} records at their offsets")
        for name in ("zstd", "gzip", "lz4", "3M records"):
            assert results[name][0] in (R.MESSAGE_TOO_LARGE, R.CORRUPT_MESSAGE), (name, results[name])
        assert errors == [0] and slowest < 0.2 and rss < 300 and moved == 0
    finally:
        server.stop()


def test_oversize_batches_and_fetches(tmp_path):
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0)
    try:
        c = Client(server.port, "big")
        c.sock.settimeout(120)
        assert produce_raw(c, batch([bytes(60 * MIB)])).error_code == R.MESSAGE_TOO_LARGE
        one = batch([random.randbytes(1_000_000)])
        log_mb = 300 if FULL else 100
        for _ in range(log_mb):
            assert produce_raw(c, one).error_code == 0
        peak = Peak(server.proc.pid)
        t0 = time.monotonic()
        f = c.call(Api.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=2**31 - 1, isolation_level=0,
                   session_id=0, session_epoch=-1, topics=[{"topic": TOPIC, "partitions": [
                       {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                        "log_start_offset": -1, "partition_max_bytes": 2**31 - 1}]}], forgotten_topics_data=[],
                   rack_id="")
        seconds = time.monotonic() - t0
        rss = peak.end()
        got = len(f.responses[0].partitions[0].records)
        ledger = Ledger(f"127.0.0.1:{server.port}")
        ledger.produce(500, "after")
        verify(f"127.0.0.1:{server.port}", [ledger])
        print(f"\na 60 MiB batch: MESSAGE_TOO_LARGE; a Fetch of max_bytes 2^31-1 on a {log_mb} MB log: "
              f"{got / MIB:.1f} MiB in {seconds:.2f} s (fetch.max.bytes 55 MiB), process tree peak {rss:.0f} MB")
        assert got <= 57_671_680 + len(one) and rss < 300
    finally:
        server.stop()


def test_stalled_partial_frames_beside_a_stable_librdkafka_group(tmp_path):
    with beside_a_stable_group(tmp_path, "stalled") as run:
        head = struct.pack(">ihhi", 100 * MIB, Api.PRODUCE, 9, 1)
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", run.server.port))
            s.sendall(head + bytes(MIB))  # a partial 100 MiB frame, then nothing
            run.held.append(s)
        waits, end = [], time.monotonic() + HOLD_S
        while time.monotonic() < end:
            waits.append(answered_within(run.server.port))
            time.sleep(1)
    print(f"\n50 partial 100 MiB frames held {HOLD_S} s beside a Stable librdkafka group: {run.rebalances} "
          f"rebalances, a new client answered in at most {max(waits) * 1000:.0f} ms ({len(waits)} tries)")
    assert run.rebalances == 0 and max(waits) < 1


def test_5000_idle_connections_beside_a_stable_librdkafka_group(tmp_path):
    with beside_a_stable_group(tmp_path, "crowded") as run:
        for _ in range(5000):
            run.held.append(socket.create_connection(("127.0.0.1", run.server.port)))
        time.sleep(3)
        wait = answered_within(run.server.port)
    print(f"\n5,000 idle connections: {run.rebalances} rebalances, a new client answered in {wait * 1000:.0f} ms")
    assert run.rebalances == 0 and wait < 1


def test_control_endpoint_abuse_leaves_the_broker_and_its_threads_alone(tmp_path):
    from rebalance.impl import control
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", initial_delay_ms=0, args=("--control-port", 0))
    idle = []
    try:
        line = wait_for(lambda: next((line for line in server.log if "control endpoint on" in line), None), 10,
                        "the control endpoint")
        address = line.split("control endpoint on ")[1].split()[0].rstrip(",")
        host, port = address.rsplit(":", 1)
        bootstrap = f"127.0.0.1:{server.port}"
        group = Group(bootstrap, "steered")
        stable(server, "steered", 2)
        mark = len(server.log)
        for _ in range(1000):
            idle.append(socket.create_connection((host, int(port))))
        for s in idle[:50]:  # no token, foreign Host, Origin, huge bodies: answered and closed
            s.sendall(b"POST /pause HTTP/1.1\r\nHost: evil.example\r\nOrigin: http://evil.example\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 209715200\r\n\r\n")
        with open(f"/proc/{server.proc.pid}/status") as f:
            threads = next(int(x.split()[1]) for x in f if x.startswith("Threads:"))
        for s in idle:
            s.close()
        idle.clear()
        time.sleep(0.5)
        assert control.request(address, "status")["paused"] is False  # the token, read from its file
        ledger = Ledger(bootstrap)
        ledger.produce(500, "steered")
        verify(bootstrap, [ledger])
        moved = rebalances(server, "steered", mark)
        group.end()
        print(f"\n1,000 connections to the control endpoint: serve ran {threads} threads, the group {moved} "
              "rebalances, nothing paused")
        assert threads < 60 and moved == 0
    finally:
        for s in idle:
            s.close()
        server.stop()
