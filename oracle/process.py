"""A JVM the oracle started (a Kafka broker, a Connect worker, a Streams instance): its
command line (``java``) and its lifecycle by signals.

``JvmProcess`` is a base: a subclass sets ``proc`` (a ``subprocess.Popen``, None before
its first start), ``log_path`` (where its log goes) and ``stop_timeout_s``. ``stop()``
shuts it down cleanly (SIGCONT if paused, then SIGTERM: Kafka's controlled shutdown, a
Connect worker leaving its group), SIGKILL after ``stop_timeout_s``; ``kill9()`` crashes
it; ``pause()``/``resume()`` send SIGSTOP and SIGCONT; ``log_tail()`` gives the last lines
of its log, for error messages; ``wait_ready(what, ready, timeout_s)`` waits for a start.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from .maven import LOG4J2, OracleError, classpath, tool


def java(main: str, *args: str, options=()) -> list:
    """The command line running class ``main`` with ``args`` on the oracle's classpath,
    the JVM ``options`` and the oracle's Log4j 2 configuration."""
    return [tool("java"), *options, f"-Dlog4j2.configurationFile={LOG4J2}", "-cp", classpath(), main, *args]


class JvmProcess:
    proc: subprocess.Popen | None = None
    log_path: Path
    stop_timeout_s: float = 30

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait_ready(self, what: str, ready, timeout_s: float, poll_s: float = 0.2) -> None:
        """Poll ``ready()`` every ``poll_s`` until it is true; ``startup_s`` then holds the
        seconds it took. OracleError naming ``what`` with the log's last lines if the JVM
        exits first, or does not get ready within ``timeout_s`` (it is killed)."""
        started = time.monotonic()
        while not ready():
            if self.proc.poll() is not None:
                raise OracleError(f"{what} exited ({self.proc.returncode}):\n{self.log_tail(30)}")
            if time.monotonic() - started > timeout_s:
                self.kill9()
                raise OracleError(f"{what} was not ready in {timeout_s} s:\n{self.log_tail(30)}")
            time.sleep(poll_s)
        self.startup_s = time.monotonic() - started

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), SIGKILL after ``stop_timeout_s``."""
        if not self.alive():
            return
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            self.kill9()

    def kill9(self) -> None:
        """A crash: SIGKILL, no controlled shutdown."""
        if self.alive():
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            os.kill(self.proc.pid, signal.SIGCONT)
