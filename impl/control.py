"""The fault-injection control endpoint of ``rebalance serve`` (``--control-port``).

JSON over HTTP on loopback, from the standard library's ``http.server`` on a
thread of its own: ``GET /status``, and ``POST /OPERATION`` with a JSON object
of the operation's arguments, OPERATION one of ``OPERATIONS`` (impl/faults.py's
``Faults`` methods: expire, rebalance, inject, clear, coordinator-away,
coordinator-back, pause, resume, records). Each call runs on the coordinator's
event loop (``asyncio.run_coroutine_threadsafe``), between two of its steps.

Answers: 200 and the operation's result (a JSON object); 400 ``{"error":
message}`` for bad input (``FaultError``, unknown or missing arguments, a body
that is not a JSON object); 404 for an unknown operation. ``rebalance ctl`` and
``rebalance.testing.Cluster`` are its clients.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .faults import FaultError, Faults

log = logging.getLogger("rebalance.control")
CALL_TIMEOUT_S = 30


def operations(faults: Faults) -> dict:
    """Operation name -> the Faults method carrying it out."""
    return {"status": faults.status, "expire": faults.expire, "rebalance": faults.rebalance,
            "inject": faults.inject, "clear": faults.clear, "coordinator-away": faults.coordinator_away,
            "coordinator-back": faults.coordinator_back, "pause": faults.pause, "resume": faults.resume,
            "records": faults.records, "describe": faults.describe}


def call(faults: Faults, operation: str, args: dict) -> dict:
    """Run ``operation`` with ``args`` on the loop's thread (already there). Raises
    FaultError for an unknown operation or bad arguments."""
    fn = operations(faults).get(operation)
    if fn is None:
        raise FaultError(f"unknown operation {operation!r} (one of {', '.join(operations(faults))})")
    try:
        return fn(**args)
    except TypeError as e:  # an argument the operation does not take, or one missing
        raise FaultError(f"{operation}: {e}") from None


class ControlServer:
    """The endpoint for ``faults`` whose coordinator runs on ``loop``; ``start`` binds
    ``host``:``port`` (0: any free port) and returns the port."""

    def __init__(self, faults: Faults, loop: asyncio.AbstractEventLoop, host: str = "127.0.0.1", port: int = 0):
        self.faults, self.loop, self.address = faults, loop, (host, port)
        self.httpd = None

    def start(self) -> int:
        control = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                log.debug("control: " + fmt, *args)

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _run(self, args: dict) -> None:
                operation = self.path.strip("/")
                if operation not in operations(control.faults):
                    self._answer(404, {"error": f"unknown operation {operation!r}"})
                    return

                async def on_loop():
                    return call(control.faults, operation, args)
                try:
                    result = asyncio.run_coroutine_threadsafe(on_loop(), control.loop).result(CALL_TIMEOUT_S)
                except FaultError as e:
                    self._answer(400, {"error": str(e)})
                    return
                self._answer(200, result)

            def do_GET(self):
                self._run({})

            def do_POST(self):
                size = int(self.headers.get("Content-Length") or 0)
                try:
                    args = json.loads(self.rfile.read(size) or b"{}")
                except ValueError as e:
                    self._answer(400, {"error": f"the body is not JSON: {e}"})
                    return
                if not isinstance(args, dict):
                    self._answer(400, {"error": "the body must be a JSON object of arguments"})
                    return
                self._run(args)

        self.httpd = ThreadingHTTPServer(self.address, Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name="control", daemon=True).start()
        port = self.httpd.server_address[1]
        log.info("control endpoint on %s:%d", self.address[0], port)
        return port

    def close(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


class Unreachable(Exception):
    """The control endpoint did not answer (not listening, or timed out)."""


def request(address: str, operation: str, args: dict | None = None, timeout_s: float = CALL_TIMEOUT_S) -> dict:
    """Call ``operation`` on the control endpoint at ``address`` (host:port) with
    ``args``; its result. Raises FaultError for an answer 400/404 (bad input) and
    Unreachable when nothing answers."""
    import urllib.error
    import urllib.request

    data = json.dumps(args or {}).encode()
    req = urllib.request.Request(f"http://{address}/{operation}", data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read())["error"]
        except (ValueError, KeyError):
            message = f"HTTP {e.code}"
        raise FaultError(message) from None
    except (urllib.error.URLError, OSError) as e:
        raise Unreachable(f"no control endpoint at {address}: {getattr(e, 'reason', e)}") from None
