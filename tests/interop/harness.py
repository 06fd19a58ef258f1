"""Real processes for the interop tests: ``rebalance serve`` and consumer agents
(agent.py; agent.js for kafkajs; for Kafka's own Java consumer, the oracle's
``rebalance.oracle.agent.ConsumerAgent``, oracle/src/main/java), with what they print
collected by reader threads.

The agents print observed-log records (spec/OBSERVED.md); a Group writes them,
with its own ``killed``, ``paused`` and ``resumed`` markers, to one observed log
(``observed.jsonl`` beside the coordinator's trace) for ``rebalance conform --side
clients``, and rebuilds ownership from them (wall-clock ms of one machine).
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from rebalance.impl.observed import header, now_ms
from rebalance.checker.conform.report import divergence_lines

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


async def wait_until(predicate, what: str, timeout: float = 15):
    """``wait_for`` inside an event loop: polls every 50 ms without blocking it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Server:
    """``rebalance serve`` in its own process, on a fixed port."""

    # the tests run sessions of 1 s and less: below Kafka's group.min.session.timeout.ms (6 s, R42)
    MIN_SESSION_MS = 100

    def __init__(self, tmp: Path, topic: str, port: int | None = None, initial_delay_ms: int = 300, mutations=(),
                 args=(), store: bool = True):
        """``store``: keep the store in ``tmp``/store across restarts (else serve's own temporary one)."""
        self.tmp, self.topic, self.port = tmp, topic, port or free_port()
        self.kept = store
        self.mutations, self.args = tuple(mutations), tuple(map(str, args))
        self.store, self.trace = tmp / "store", tmp / "trace.jsonl"
        self.initial_delay_ms = initial_delay_ms
        self.log: list = []
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(REBALANCE), "serve", "--port", str(self.port), "--topic", self.topic,
             *(("--store", str(self.store)) if self.kept else ()),
             "--trace", str(self.trace), "--initial-rebalance-delay-ms", str(self.initial_delay_ms),
             "--group-min-session-timeout-ms", str(self.MIN_SESSION_MS),
             *(f"--mutation={m}" for m in self.mutations), *self.args],
            stderr=subprocess.PIPE, text=True)
        mark = len(self.log)  # after a restart, this process's own line, not the last one's
        threading.Thread(target=lambda: [self.log.append(line) for line in self.proc.stderr], daemon=True).start()
        try:
            wait_for(lambda: any("listening on" in line for line in self.log[mark:]), 30, "the coordinator to listen")
        except AssertionError:  # nobody holds a server that did not start: stop it, or it outlives the test
            self.kill9()
            raise

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def rebalances_since(self, mark: int) -> int:
        """Rebalances begun (PreparingRebalance logged) after log line ``mark``
        (``len(server.log)`` taken before)."""
        return sum("PreparingRebalance" in line for line in self.log[mark:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def records(self, kind: str | None = None) -> list:
        """The trace's records written so far, its header first, or only those of type
        ``kind`` (serve may be writing one as the trace is read: a last line without
        its newline is not complete yet)."""
        records = [json.loads(line) for line in self.trace.read_text().rpartition("\n")[0].splitlines()]
        return records if kind is None else [r for r in records if r["type"] == kind]

    def generations(self) -> list:
        """Generations of the successful JoinGroup responses in the trace, in order."""
        return [r["body"]["generation_id"] for r in self.records("response")
                if r["api"] == "JoinGroup" and r["body"]["error"] == "NONE"]


def conform(side: str, *paths) -> tuple:
    """``rebalance conform --side SIDE PATHS... --json``: (exit code, its JSON object); a
    divergence's files go to ``out/`` beside the first path (not the working directory)."""
    out = Path(paths[0]).parent / "out"
    r = subprocess.run([str(REBALANCE), "conform", "--side", side, *map(str, paths), "--json", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout)


def verdict_text(doc: dict) -> str:
    """A ``conform --json`` object as an assertion message, in ``rebalance conform``'s own
    words (report.divergence_lines): the verdict, then each divergence (a CI log keeps no trace)."""
    head = (f"{doc['side']} side: {doc['verdict']}, {doc.get('records_checked')} of {doc.get('records')} records"
            f" checked ({doc['trace']})")
    error = [f"error: {doc['error']}"] if doc.get("error") else []
    return "\n".join([head, *(divergence_lines(doc) if doc.get("divergence") else ()), *error])


def agent_command(client: str) -> list:
    """The command line that starts an agent of kind ``client``, before its NAME: ``java``
    (Kafka 4.4.0's KafkaConsumer, rebalance.oracle.agent: built by Maven and its class-data
    archive made on first use),
    ``kafkajs``, ``franz-go`` (tests/interop/franz, built with Go on first use), or one of
    agent.py's clients."""
    if client == "java":
        from rebalance.oracle.agent import command

        return command()
    if client == "kafkajs":
        return ["node", str(HERE / "agent.js")]
    if client == "franz-go":  # franz-go's kgo: tests/interop/franz, built with Go on first use
        from gobuild import binary

        return [str(binary(HERE / "franz", "franz-agent"))]
    return [sys.executable, str(HERE / "agent.py"), client]


def partitions(record: dict) -> set:
    return {tp["partition"] for tp in record.get("partitions", ())}


class Group:
    """Consumer agents of one group, their observed records and the observed log."""

    def __init__(self, server: Server, group: str, topic: str, partitions: int):
        self.server, self.group, self.topic, self.partitions = server, group, topic, partitions
        self.events: list = []
        self.members: dict = {}
        self.fatal: dict = {}
        self.lock = threading.Lock()
        self.observed = server.tmp / "observed.jsonl"
        self.observed.write_text(json.dumps(header([(topic, partitions)], group)) + "\n")

    def record(self, record: dict) -> None:
        with self.lock:
            self.events.append(record)
            with self.observed.open("a") as f:
                f.write(json.dumps(record) + "\n")

    def start(self, client: str, name: str, instance_id: str | None = None, session_ms: int = 6000,
              strategy: str | None = None, args=()):
        """Start agent ``name`` of kind ``client``; ``args``: more agent options (e.g.
        ``("--max-poll-ms", "3000")``). A ``java`` agent's log (Kafka's client at INFO)
        goes to ``NAME.java.log`` beside the observed log; a line it prints starting
        ``fatal`` (the consumer failed, e.g. FencedInstanceIdException) is kept in
        ``self.fatal[name]``."""
        cmd = [*agent_command(client), name, "--bootstrap", f"127.0.0.1:{self.server.port}",
               "--group", self.group, "--topic", self.topic, "--session-ms", str(session_ms)]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        if strategy:  # partition.assignment.strategy (confluent, java)
            cmd += ["--strategy", strategy]
        cmd += list(map(str, args))
        stderr = (self.server.tmp / f"{name}.java.log").open("a") if client == "java" else None
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if stderr:
            stderr.close()  # the child has its own descriptor
        self.members[name] = proc

        def read():
            for line in proc.stdout:
                if line.startswith("{"):
                    self.record(json.loads(line))
                elif line.startswith("fatal"):
                    self.fatal.setdefault(name, []).append(line.rstrip("\n"))
        threading.Thread(target=read, daemon=True).start()
        return proc

    def tell(self, name: str, command: str) -> None:
        proc = self.members[name]
        proc.stdin.write(command + "\n")
        proc.stdin.flush()

    def close(self, name: str) -> None:
        self.tell(name, "close")
        self.members.pop(name).wait(30)
        time.sleep(0.1)  # the reader thread takes the last line
        assert self.last(name)["event"] == "closed"

    def kill9(self, name: str) -> None:
        proc = self.members.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.record({"t_ms": now_ms(), "member": name, "event": "killed"})

    def pause(self, name: str) -> None:
        """SIGSTOP: a zombie (a long GC pause); its heartbeats stop, its state stays."""
        self.members[name].send_signal(signal.SIGSTOP)
        self.record({"t_ms": now_ms(), "member": name, "event": "paused"})

    def resume(self, name: str) -> float:
        """SIGCONT; returns the resume's t_ms."""
        t = now_ms()
        self.record({"t_ms": t, "member": name, "event": "resumed"})
        self.members[name].send_signal(signal.SIGCONT)
        return t

    def stop_all(self) -> None:
        for proc in self.members.values():
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()

    def snapshot(self) -> list:
        with self.lock:
            return sorted(self.events, key=lambda e: e["t_ms"])

    def last(self, name: str) -> dict:
        return [e for e in self.snapshot() if e["member"] == name][-1]

    def owned(self) -> dict:
        """{member: set of partitions} from the events so far."""
        owned: dict = {}
        for e in self.snapshot():
            mine = owned.setdefault(e["member"], set())
            if e["event"] == "assigned":
                mine |= partitions(e)
            elif e["event"] in ("revoked", "lost"):
                mine -= partitions(e)
            elif e["event"] in ("killed", "closed"):
                mine.clear()
        return owned

    def double_ownership(self) -> list:
        """Each moment a partition was assigned to a member while another held it."""
        holder: dict = {}
        found = []
        for e in self.snapshot():
            for p in partitions(e):
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
        return self.balanced_among(list(self.members), quiet)

    def balanced_among(self, names: list, quiet: float = 1.5) -> bool:
        """As ``balanced``, for the members ``names`` (others, paused, may own some too)."""
        events = self.snapshot()
        if not events or now_ms() - events[-1]["t_ms"] < quiet * 1000:
            return False
        owned = self.owned()
        loads = [owned.get(m, set()) for m in names]
        union = set().union(*loads) if loads else set()
        return (sum(map(len, loads)) == len(union) == self.partitions
                and max(map(len, loads)) - min(map(len, loads)) <= 1)

    def wait_balanced(self, timeout: float = 60) -> dict:
        wait_for(self.balanced, timeout, f"{sorted(self.members)} to balance; owned {self.owned()}")
        return self.owned()
