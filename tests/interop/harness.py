"""Real processes for the interop tests: ``rebalance serve`` and consumer agents
(agent.py), with what they print collected by reader threads.

Ownership is rebuilt from the agents' callback events on one clock
(CLOCK_MONOTONIC is shared by the processes of a machine).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent
REBALANCE = Path(sys.executable).parent / "rebalance"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Server:
    """``rebalance serve`` in its own process, on a fixed port."""

    def __init__(self, tmp: Path, topic: str, port: int | None = None, initial_delay_ms: int = 300, mutations=(),
                 args=()):
        self.tmp, self.topic, self.port = tmp, topic, port or free_port()
        self.mutations, self.args = tuple(mutations), tuple(map(str, args))
        self.store, self.trace = tmp / "coordinator.db", tmp / "trace.jsonl"
        self.initial_delay_ms = initial_delay_ms
        self.log: list = []
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(REBALANCE), "serve", "--port", str(self.port), "--topic", self.topic, "--store", str(self.store),
             "--trace", str(self.trace), "--initial-rebalance-delay-ms", str(self.initial_delay_ms),
             *(f"--mutation={m}" for m in self.mutations), *self.args],
            stderr=subprocess.PIPE, text=True)
        threading.Thread(target=lambda: [self.log.append(line) for line in self.proc.stderr], daemon=True).start()
        wait_for(lambda: any("listening on" in line for line in self.log), 30, "the coordinator to listen")

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def generations(self) -> list:
        """Generations of the successful JoinGroup responses in the trace, in order."""
        records = [json.loads(line) for line in self.trace.read_text().splitlines()]
        return [r["body"]["generation_id"] for r in records
                if r["type"] == "response" and r["api"] == "JoinGroup" and r["body"]["error"] == "NONE"]


class Group:
    """Consumer agents of one group and their callback events."""

    def __init__(self, server: Server, group: str, topic: str, partitions: int):
        self.server, self.group, self.topic, self.partitions = server, group, topic, partitions
        self.events: list = []
        self.members: dict = {}
        self.lock = threading.Lock()

    def start(self, client: str, name: str, instance_id: str | None = None, session_ms: int = 6000):
        cmd = [sys.executable, str(HERE / "agent.py"), client, name, "--bootstrap", f"127.0.0.1:{self.server.port}",
               "--group", self.group, "--topic", self.topic, "--session-ms", str(session_ms)]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.members[name] = proc

        def read():
            for line in proc.stdout:
                if line.startswith("{"):
                    with self.lock:
                        self.events.append(json.loads(line))
        threading.Thread(target=read, daemon=True).start()
        return proc

    def tell(self, name: str, command: str) -> None:
        proc = self.members[name]
        proc.stdin.write(command + "\n")
        proc.stdin.flush()

    def close(self, name: str) -> None:
        self.tell(name, "close")
        self.members.pop(name).wait(30)
        assert self.last(name)["event"] == "closed"

    def kill9(self, name: str) -> None:
        proc = self.members.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with self.lock:
            self.events.append({"t": time.monotonic(), "member": name, "event": "killed", "partitions": []})

    def stop_all(self) -> None:
        for proc in self.members.values():
            proc.kill()
            proc.wait()

    def snapshot(self) -> list:
        with self.lock:
            return sorted(self.events, key=lambda e: e["t"])

    def last(self, name: str) -> dict:
        return [e for e in self.snapshot() if e["member"] == name][-1]

    def owned(self) -> dict:
        """{member: set of partitions} from the events so far."""
        owned: dict = {}
        for e in self.snapshot():
            mine = owned.setdefault(e["member"], set())
            if e["event"] == "assigned":
                mine |= set(e["partitions"])
            elif e["event"] in ("revoked", "lost"):
                mine -= set(e["partitions"])
            elif e["event"] in ("killed", "closed"):
                mine.clear()
        return owned

    def double_ownership(self) -> list:
        """Each moment a partition was assigned to a member while another held it."""
        holder: dict = {}
        found = []
        for e in self.snapshot():
            for p in e["partitions"]:
                if e["event"] == "assigned":
                    if holder.get(p, e["member"]) != e["member"]:
                        found.append(f"t-{p} assigned to {e['member']} while {holder[p]} held it")
                    holder[p] = e["member"]
                elif e["event"] in ("revoked", "lost") and holder.get(p) == e["member"]:
                    del holder[p]
            if e["event"] in ("killed", "closed"):
                for p in [p for p, m in holder.items() if m == e["member"]]:
                    del holder[p]
        return found

    def balanced(self, quiet: float = 1.5) -> bool:
        """The running members own every partition once, loads within one, and no
        callback for ``quiet`` seconds."""
        events = self.snapshot()
        if not events or time.monotonic() - events[-1]["t"] < quiet:
            return False
        owned = self.owned()
        loads = [owned.get(m, set()) for m in self.members]
        union = set().union(*loads) if loads else set()
        return (sum(map(len, loads)) == len(union) == self.partitions
                and max(map(len, loads)) - min(map(len, loads)) <= 1)

    def wait_balanced(self, timeout: float = 60) -> dict:
        wait_for(self.balanced, timeout, f"{sorted(self.members)} to balance; owned {self.owned()}")
        return self.owned()
