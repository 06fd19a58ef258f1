"""The fault suite of ``rebalance serve`` (issue 18): real processes, each test
printing its figures. Slow: ``pytest -m slow tests/test_serve_faults.py -s``."""
import socket
import struct
import threading
import time

import pytest

from interop.harness import Server

pytestmark = pytest.mark.slow
MIB = 1024 * 1024


def rss_mb(pid: int) -> float:
    """Resident set size of a process, MB (/proc/PID/status VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_eight_concurrent_100_mib_frames_keep_the_server_under_300_mb(tmp_path):
    """Item 2: eight connections each send a 100 MiB Metadata frame (a header, then
    zeros: trailing bytes, refused once decoded). The old server buffered them all
    (and copied each), 950 MB; queued.max.request.bytes (100 MiB) lets one be read
    at a time, the others' connections wait to read."""
    server = Server(tmp_path, "t:4", initial_delay_ms=0)
    try:
        start = rss_mb(server.proc.pid)
        size = 100 * MIB
        head = struct.pack(">ihhih", size, 3, 0, 1, 1) + b"x" + struct.pack(">i", 0)
        chunk = bytes(MIB)
        peak, done = start, []

        def send():
            with socket.create_connection(("127.0.0.1", server.port), timeout=120) as s:
                s.sendall(head)
                left = size - (len(head) - 4)
                try:
                    while left:
                        n = min(left, len(chunk))
                        s.sendall(chunk[:n])
                        left -= n
                    s.recv(1)  # closed by the server once it has read and refused the frame
                except (ConnectionError, socket.timeout):
                    pass
                done.append(1)
        senders = [threading.Thread(target=send) for _ in range(8)]
        t0 = time.monotonic()
        for t in senders:
            t.start()
        while any(t.is_alive() for t in senders):
            peak = max(peak, rss_mb(server.proc.pid))
            time.sleep(0.02)
        took = time.monotonic() - t0
        print(f"\n8 x 100 MiB frames: server RSS {start:.0f} MB at start, peak {peak:.0f} MB, "
              f"{took:.1f} s, {len(done)} refused")
        assert len(done) == 8 and server.alive()
        assert not any("internal error" in line or "Traceback" in line for line in server.log), server.log
        assert peak < 300
    finally:
        server.stop()
