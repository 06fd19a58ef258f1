"""serve's logs (impl/logs.py): one line per record whatever a client names its
group or itself, JSON on request, and a flood of bad frames logged a bounded
number of times, with the rest counted (issue 18 item 8)."""
import json
import logging
import socket
import struct
import subprocess
import threading

from conftest import REBALANCE
from interop.harness import free_port, wait_for
from rebalance.impl.logs import RateLimit, TextFormatter
from rebalance.impl.wire import Api, request_frame


def serve(*args):
    port = free_port()
    proc = subprocess.Popen([str(REBALANCE), "serve", "--port", str(port), "--topic", "t:2",
                             "--initial-rebalance-delay-ms", "0", *args], stderr=subprocess.PIPE, text=True)
    lines: list = []
    threading.Thread(target=lambda: [lines.append(line) for line in proc.stderr], daemon=True).start()
    wait_for(lambda: any("listening on" in line for line in lines), 30, "serve to listen")
    return proc, port, lines


def forge_and_flood(port: int) -> None:
    """A JoinGroup whose group.id carries a forged log line, then 50 garbage frames."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request_frame(Api.JOIN_GROUP, 3, 1, "x\nFORGED client", {  # v3: joins at once (no R36)
            "group_id": "g\n2026-11-24 00:00:00,000 INFO FORGED group", "session_timeout": 10_000,
            "rebalance_timeout": 10_000, "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}], "reason": None}))
        s.recv(4096)
    for _ in range(50):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(struct.pack(">i", 2) + b"\x00\x0b")  # a request header of 2 bytes
            s.shutdown(socket.SHUT_WR)
            s.recv(10)


def stop(proc) -> None:
    proc.terminate()
    proc.wait(10)


def test_text_logs_escape_what_clients_name_and_limit_warnings():
    proc, port, lines = serve()
    try:
        forge_and_flood(port)
        wait_for(lambda: sum("closing connection" in line for line in lines) >= 10, 10, "the warnings")
    finally:
        stop(proc)
    assert not any(line.startswith(("2026-11-24 00:00:00", "FORGED")) for line in lines)
    assert any("\\n2026-11-24 00:00:00,000 INFO FORGED group" in line for line in lines)
    assert sum("closing connection" in line for line in lines) == 10  # of 50 bad frames


def test_json_logs_are_one_object_per_line():
    proc, port, lines = serve("--log-format", "json")
    try:
        forge_and_flood(port)
        wait_for(lambda: sum("closing connection" in line for line in lines) >= 10, 10, "the warnings")
    finally:
        stop(proc)
    records = [json.loads(line) for line in lines]
    assert {r["level"] for r in records} >= {"INFO", "WARNING"}
    assert any(r["message"].startswith("group g\n2026") for r in records)


def test_dropped_warnings_are_counted_on_the_next_one_let_through():
    now = [0.0]
    limit = RateLimit(burst=2, window_s=60, clock=lambda: now[0])
    rec = lambda: logging.LogRecord("rebalance.serve", logging.WARNING, "", 0, "closing %s", ("x",), None)
    assert [limit.filter(rec()) for _ in range(5)] == [True, True, False, False, False]
    now[0] = 61
    r = rec()
    assert limit.filter(r) and r.suppressed == 3
    assert TextFormatter().format(r).endswith("closing x (3 similar suppressed)")
    assert limit.filter(logging.LogRecord("rebalance.serve", logging.INFO, "", 0, "group %s", ("g",), None))
