"""The fault-injection control endpoint of ``rebalance serve`` (``--control-port``).

JSON over HTTP on loopback, from the standard library's ``http.server``: ``POST
/OPERATION`` with a JSON object of the operation's arguments, OPERATION one of
``operations`` (impl/faults.py's ``Faults`` methods: expire, rebalance, inject,
clear, coordinator-away, coordinator-back, pause, resume, records, describe,
status); ``GET`` only for the operations that change nothing (``READ_ONLY``),
their arguments in the query string. Each call runs on the coordinator's event
loop (``asyncio.run_coroutine_threadsafe``), between two of its steps.

Nobody else can drive it:

* a random token (``secrets.token_urlsafe``), printed at start and written to a
  file only the user can read (``token_path``), is required on every request
  (``Authorization: Bearer TOKEN``; 401 without it);
* state changes only by POST with ``Content-Type: application/json`` (a web
  page's form cannot send that without a CORS preflight, which is refused);
* the Host header must name loopback (127.0.0.1, localhost, ::1; 421 otherwise:
  DNS rebinding) and any Origin header is refused (403: a browser's cross-origin
  request);
* bounded: bodies of at most ``MAX_BODY`` bytes (413), at most
  ``MAX_CONNECTIONS`` connections at once (503 to more), each closed after
  ``TIMEOUT_S`` of silence; the values an operation takes are bounded by it
  (impl/faults.py).

Answers are JSON, errors too (``{"error": message}``): 200 and the operation's
result; 400 bad input (FaultError, unknown or missing arguments, a body that is
not a JSON object, a malformed Content-Length); 401, 403, 404 (unknown
operation), 405 (GET of an operation that changes state), 411, 413, 415, 421,
503. ``rebalance ctl`` and ``rebalance.testing.Cluster`` are its clients; both
read the token file, so the user never types it.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import secrets
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .faults import FaultError, Faults

log = logging.getLogger("rebalance.control")
CALL_TIMEOUT_S = 30
MAX_BODY = 64 << 10  # bytes
MAX_CONNECTIONS = 16
TIMEOUT_S = 10  # a connection silent this long is closed
READ_ONLY = frozenset(("status", "describe", "records"))
LOOPBACK = frozenset(("127.0.0.1", "localhost", "::1"))


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


def token_path(port: int) -> Path:
    """Where the token of the control endpoint on ``port`` is written by default:
    $XDG_RUNTIME_DIR/rebalance/control-PORT.token, else ~/.cache/rebalance/."""
    base = os.environ.get("XDG_RUNTIME_DIR") or Path.home() / ".cache"
    return Path(base) / "rebalance" / f"control-{port}.token"


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable by the user only (its folder made 0700 if new)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


class _Server(ThreadingHTTPServer):
    """Serves at most MAX_CONNECTIONS connections at once, a thread each."""

    daemon_threads = True

    def __init__(self, *args):
        super().__init__(*args)
        self.lock, self.active = threading.Lock(), 0

    def handle_error(self, request, client_address):  # a connection's failure is one log line, not a traceback
        log.warning("control: a connection from %s failed: %r", client_address[0], sys.exc_info()[1])

    def process_request(self, request, client_address):
        with self.lock:
            full = self.active >= MAX_CONNECTIONS
            if not full:
                self.active += 1
        if full:  # answered and closed at once, on the accepting thread
            body = json.dumps({"error": f"at most {MAX_CONNECTIONS} connections at once"}).encode()
            try:
                request.settimeout(1)
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.lock:
                self.active -= 1


class ControlServer:
    """The endpoint for ``faults`` whose coordinator runs on ``loop``; ``start`` binds
    ``host``:``port`` (0: any free port), writes the token to ``token_file``
    (``token_path(port)`` when None) and returns the port."""

    def __init__(self, faults: Faults, loop: asyncio.AbstractEventLoop, host: str = "127.0.0.1", port: int = 0,
                 token_file: str | os.PathLike | None = None):
        self.faults, self.loop, self.address = faults, loop, (host, port)
        self.token = secrets.token_urlsafe(32)
        self.token_file = None if token_file is None else Path(token_file)
        self.httpd = None

    def start(self) -> int:
        control = self

        class Handler(BaseHTTPRequestHandler):
            timeout = TIMEOUT_S
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                log.debug("control: " + fmt, *args)

            def send_error(self, code, message=None, explain=None):  # http.server's own errors, as JSON
                self._answer(code, {"error": message or explain or self.responses.get(code, ("error",))[0]})

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                if self.request_version == "HTTP/0.9":  # a request line that did not parse: answered as HTTP/1.0
                    self.request_version = "HTTP/1.0"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 401:
                    self.send_header("WWW-Authenticate", "Bearer")
                if status >= 400:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(data)

            def _refused(self) -> bool:
                """Answer and return True if the request may not be served (see the module docstring)."""
                host = urllib.parse.urlsplit("//" + (self.headers.get("Host") or "")).hostname
                if host not in LOOPBACK:
                    self._answer(421, {"error": f"Host {self.headers.get('Host')!r} is not loopback"})
                elif self.headers.get("Origin") is not None:
                    self._answer(403, {"error": "cross-origin requests are refused"})
                else:
                    given = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
                    if hmac.compare_digest(given.encode(), control.token.encode()):
                        return False
                    self._answer(401, {"error": "the control token is required (Authorization: Bearer TOKEN; "
                                                f"serve wrote it to {control.token_file})"})
                return True

            def _run(self, operation: str, args: dict) -> None:
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
                if self._refused():
                    return
                url = urllib.parse.urlsplit(self.path)
                operation = url.path.strip("/")
                if operation in operations(control.faults) and operation not in READ_ONLY:
                    self._answer(405, {"error": f"{operation} changes state: POST it with a JSON body"})
                    return
                self._run(operation, dict(urllib.parse.parse_qsl(url.query)))

            def do_POST(self):
                if self._refused():
                    return
                if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
                    self._answer(415, {"error": "the body must be JSON (Content-Type: application/json)"})
                    return
                length = self.headers.get("Content-Length")
                if length is None:
                    self._answer(411, {"error": "Content-Length is required"})
                    return
                if not length.isdigit():
                    self._answer(400, {"error": f"malformed Content-Length {length!r}"})
                    return
                if int(length) > MAX_BODY:
                    self._answer(413, {"error": f"a body of {length} bytes is above {MAX_BODY}"})
                    return
                try:
                    args = json.loads(self.rfile.read(int(length)) or b"{}")
                except ValueError as e:
                    self._answer(400, {"error": f"the body is not JSON: {e}"})
                    return
                if not isinstance(args, dict):
                    self._answer(400, {"error": "the body must be a JSON object of arguments"})
                    return
                self._run(urllib.parse.urlsplit(self.path).path.strip("/"), args)

        self.httpd = _Server(self.address, Handler)
        port = self.httpd.server_address[1]
        self.token_file = self.token_file or token_path(port)
        _write_private(self.token_file, self.token)
        threading.Thread(target=self.httpd.serve_forever, name="control", daemon=True).start()
        log.info("control endpoint on %s:%d, token %s (also in %s)", self.address[0], port, self.token,
                 self.token_file)
        return port

    def close(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.token_file.unlink(missing_ok=True)


class Unreachable(Exception):
    """The control endpoint did not answer (not listening, or timed out)."""


def read_token(address: str) -> str:
    """The token of the control endpoint at ``address`` (host:port) from its default
    file (``token_path``). Raises Unreachable naming the file if it cannot be read
    (nothing serves there, or not as this user)."""
    path = token_path(int(address.rsplit(":", 1)[1]))
    try:
        return path.read_text().strip()
    except OSError as e:
        raise Unreachable(f"no control endpoint at {address}: its token file {path} cannot be read "
                          f"({e.strerror}; is serve running there with --control-port, as this user? "
                          "Else pass --token)") from None


def request(address: str, operation: str, args: dict | None = None, timeout_s: float = CALL_TIMEOUT_S,
            token: str | None = None) -> dict:
    """Call ``operation`` on the control endpoint at ``address`` (host:port) with
    ``args`` and ``token`` (read from its file when None); its result. Raises
    FaultError for an answer 4xx (bad input, a wrong token) and Unreachable when
    nothing answers or no token file is there."""
    import urllib.error
    import urllib.request

    if token is None:
        token = read_token(address)
    data = json.dumps(args or {}).encode()
    req = urllib.request.Request(f"http://{address}/{operation}", data=data, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
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
