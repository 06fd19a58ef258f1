"""A JVM the oracle started (a Kafka broker, a Connect worker): its lifecycle by signals.

``JvmProcess`` is a base: a subclass sets ``proc`` (a ``subprocess.Popen``, None before
its first start), ``log_path`` (where its log goes) and ``stop_timeout_s``. ``stop()``
shuts it down cleanly (SIGCONT if paused, then SIGTERM: Kafka's controlled shutdown, a
Connect worker leaving its group), SIGKILL after ``stop_timeout_s``; ``kill9()`` crashes
it; ``pause()``/``resume()`` send SIGSTOP and SIGCONT; ``log_tail()`` gives the last lines
of its log, for error messages.
"""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


class JvmProcess:
    proc: subprocess.Popen | None = None
    log_path: Path
    stop_timeout_s: float = 30

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

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
