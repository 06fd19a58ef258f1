"""``rebalance serve`` with a large log on disk (issue 42 item 1): serve's peak RSS
while a log of SIZE MB is produced and then read back whole, and its restart time
(process start to listening) on that store, for each SIZE given.

    .venv/bin/python benchmarks/serve_log.py 100 1000

Prints one line per size and the machine and date. Batches of 1 MB (uncompressed
random bytes) are produced with acks=all over a raw wire client, in 4 partitions;
the read goes through Fetch at the client's default max bytes (50 MiB)."""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from test_records import batch  # noqa: E402
from test_serve import Client  # noqa: E402

from rebalance.impl.wire import Api  # noqa: E402

REBALANCE = Path(sys.executable).parent / "rebalance"
PARTITIONS = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, store: Path):
        self.port = _free_port()
        t0 = time.monotonic()
        self.proc = subprocess.Popen([str(REBALANCE), "serve", "--port", str(self.port), "--topic",
                                      f"t:{PARTITIONS}", "--store", str(store)], stderr=subprocess.PIPE, text=True)
        while "listening on" not in self.proc.stderr.readline():
            pass
        self.started_s = time.monotonic() - t0
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.peak_mb, self._stop = 0.0, threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        while not self._stop.is_set():
            try:
                with open(f"/proc/{self.proc.pid}/status") as f:
                    rss = next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024
                self.peak_mb = max(self.peak_mb, rss)
            except (OSError, StopIteration):
                pass
            time.sleep(0.05)

    def stop(self):
        self._stop.set()
        self.proc.terminate()
        self.proc.wait(30)


def produce(port: int, megabytes: int) -> None:
    c = Client(port, "bench")
    c.sock.settimeout(120)
    one = batch([random.randbytes(1_000_000)])
    for i in range(megabytes):
        r = c.call(Api.PRODUCE, 9, transactional_id=None, acks=-1, timeout=30_000, topic_data=[
            {"name": "t", "partition_data": [{"index": i % PARTITIONS, "records": one}]}])
        assert r.responses[0].partition_responses[0].error_code == 0


def read_all(port: int) -> int:
    c = Client(port, "reader")
    c.sock.settimeout(120)
    offsets, total = [0] * PARTITIONS, 0
    while True:
        f = c.call(Api.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=50 * 2**20, isolation_level=0,
                   session_id=0, session_epoch=-1, topics=[{"topic": "t", "partitions": [
                       {"partition": p, "current_leader_epoch": -1, "fetch_offset": offsets[p],
                        "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 2**20}
                       for p in range(PARTITIONS)]}], forgotten_topics_data=[], rack_id="")
        got = 0
        for part in f.responses[0].partitions:
            data = part.records or b""
            at = 0
            while at + 12 <= len(data):  # each whole batch: its base offset, size and record count
                base, size = struct.unpack_from(">qi", data, at)
                count = struct.unpack_from(">i", data, at + 57)[0]
                offsets[part.partition_index] = base + count
                at += 12 + size
            got += at
        total += got
        if not got:
            return total


def main(sizes) -> None:
    print(f"# {platform.node()} {os.cpu_count()} cores, {datetime.date.today()}, python {platform.python_version()}")
    for mb in sizes:
        with tempfile.TemporaryDirectory(prefix="serve-log-") as tmp:
            store = Path(tmp) / "store"
            serve = Serve(store)
            t0 = time.monotonic()
            produce(serve.port, mb)
            produced_s = time.monotonic() - t0
            t0 = time.monotonic()
            read = read_all(serve.port)
            read_s = time.monotonic() - t0
            serve.stop()
            restarts = []
            for _ in range(3):
                again = Serve(store)
                restarts.append(again.started_s)
                again.stop()
            size = sum(f.stat().st_size for f in store.iterdir()) / 2**20
            print(f"log {mb} MB (store {size:.0f} MiB on disk): produced in {produced_s:.1f} s, read back "
                  f"{read / 2**20:.0f} MiB in {read_s:.1f} s, serve's peak RSS {serve.peak_mb:.0f} MB; restart "
                  f"(start to listening) {min(restarts):.2f} s best of 3 ({', '.join(f'{s:.2f}' for s in restarts)})")


def megabytes(text: str) -> int:
    """A log size in MB: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"size {text!r}: a whole number of MB, at least 1")
    return int(text)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", nargs="*", type=megabytes, default=[100, 1000], metavar="SIZE",
                    help="log sizes in MB, one serve each (default: 100 1000)")
    main(ap.parse_args().sizes)
