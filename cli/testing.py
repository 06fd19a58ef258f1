"""``rebalance.testing``: ``rebalance serve`` as a Kafka test double for Python tests.

``Cluster`` starts a one-broker cluster whose group coordinator is the model's
(impl/coordinator.py): in-process (a thread with its own event loop; the default,
fastest) or as a ``rebalance serve`` subprocess with its control endpoint
(``subprocess=True``). Point any client at ``bootstrap``; steer the group with
the fault operations of impl/faults.py (``expire``, ``rebalance``, ``inject``,
``coordinator_away``/``coordinator_back``, ``pause``/``resume``); read what
happened with ``assignment``, ``describe``, ``records`` and ``trace`` (the trace
``rebalance conform`` judges, spec/TRACE.md)::

    from rebalance.testing import Cluster

    with Cluster({"orders": 6}) as cluster:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g", ...})
        cluster.wait_for_stable("g", members=1)
        cluster.inject("Heartbeat", error="NOT_COORDINATOR", count=2)

The pytest plugin (``rebalance.pytest_plugin``, registered through the ``pytest11``
entry point) gives a ``kafka_cluster`` fixture. Errors raised: ``FaultError`` (bad
input, an unknown group or member), ``TimeoutError`` (``wait_for_stable``),
``RuntimeError`` (the server did not start).
"""
from __future__ import annotations

import asyncio
import json
import subprocess as subprocesses
import sys
import tempfile
import threading
import time
from pathlib import Path

from rebalance.impl import control
from rebalance.impl.faults import FaultError
from rebalance.oracle.broker import KafkaBroker  # the real Kafka 4.4.0, for the same tests on the oracle

__all__ = ["Cluster", "FaultError", "KafkaBroker"]
STARTUP_TIMEOUT_S = 30
LISTENING, CONTROL = "listening on ", "control endpoint on "


class Cluster:
    """A running ``rebalance serve``. ``topics``: {name: partitions} (or "name:partitions"
    strings); ``initial_delay_ms``: group.initial.rebalance.delay.ms (0: none, KIP-134);
    ``min_session_ms``: group.min.session.timeout.ms (R42; default 100 so tests may use
    short sessions); ``trace``: record a trace (into ``directory``, a temporary one by
    default); ``mutations``: model mutations (model/config.py MUTATIONS);
    ``subprocess``: run serve in its own process (else in a thread of this one).
    Starts on construction (a context manager stops it)."""

    def __init__(self, topics=None, *, initial_delay_ms: int = 0, min_session_ms: int = 100, trace: bool = True,
                 mutations=(), subprocess: bool = False, directory=None):
        topics = topics or {"t": 4}
        if isinstance(topics, dict):
            topics = [f"{name}:{n}" for name, n in topics.items()]
        self.topics = tuple(topics)
        self._tmp = None if directory else tempfile.TemporaryDirectory(prefix="rebalance-")
        self.directory = Path(directory or self._tmp.name)
        self.trace_path = self.directory / "trace.jsonl" if trace else None
        self.options = (initial_delay_ms, min_session_ms, tuple(mutations))
        self.subprocess = subprocess
        self.port = self.control_address = None
        self._proc = self._loop = self._thread = self._coordinator = self._token = None
        self._start()

    # --- lifecycle -------------------------------------------------------------------
    def _start(self) -> None:
        if self.subprocess:
            self._start_process()
        else:
            self._start_thread()

    def _start_thread(self) -> None:
        from rebalance.impl.broker import Cluster as Broker, parse_topic
        from rebalance.impl.coordinator import Coordinator
        from rebalance.impl.store import Store
        from rebalance.impl.trace import Recorder
        from rebalance.model.timing import SessionBounds

        initial_delay_ms, min_session_ms, mutations = self.options
        try:
            topics = tuple(parse_topic(t) for t in self.topics)
        except ValueError as e:
            raise FaultError(str(e)) from None
        ready, failed = threading.Event(), []

        def run():
            loop = self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._coordinator = Coordinator(
                Broker("127.0.0.1", 0, topics), Store(), Recorder(self.trace_path, "serve"),
                initial_delay_ms, mutations, SessionBounds(min_session_ms, SessionBounds().max_ms))
            try:
                loop.run_until_complete(self._coordinator.start())
            except Exception as e:  # noqa: BLE001 - reported to the starting thread
                failed.append(e)
                ready.set()
                return
            self.port = self._coordinator.cluster.port
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._coordinator.close())
            pending = asyncio.all_tasks(loop)  # the connections' tasks end on their closed sockets
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=2))
            loop.close()
        self._thread = threading.Thread(target=run, name="rebalance-serve", daemon=True)
        self._thread.start()
        ready.wait(STARTUP_TIMEOUT_S)
        if failed or self.port is None:
            raise RuntimeError(f"rebalance serve did not start: {failed[0] if failed else 'timed out'}")

    def _start_process(self) -> None:
        initial_delay_ms, min_session_ms, mutations = self.options
        args = [sys.executable, "-c", "from rebalance.cli import main; main()", "serve", "--port", "0",
                "--control-port", "0", "--initial-rebalance-delay-ms", str(initial_delay_ms),
                "--group-min-session-timeout-ms", str(min_session_ms), *(f"--topic={t}" for t in self.topics),
                *(f"--mutation={m}" for m in mutations)]
        if self.trace_path:
            args += ["--trace", str(self.trace_path)]
        self._proc = subprocesses.Popen(args, stderr=subprocesses.PIPE, text=True)
        self.log: list = []
        found = threading.Event()

        def read():
            for line in self._proc.stderr:
                self.log.append(line)
                for mark in (LISTENING, CONTROL):
                    if mark in line:
                        address = line.split(mark, 1)[1].split()[0].rstrip(",")
                        if mark == LISTENING:
                            self.port = int(address.rsplit(":", 1)[1])
                        else:
                            self.control_address = address
                if self.port and self.control_address:
                    found.set()
            found.set()
        threading.Thread(target=read, daemon=True).start()
        if not found.wait(STARTUP_TIMEOUT_S) or not (self.port and self.control_address):
            self.stop()
            raise RuntimeError("rebalance serve did not start: " + "".join(self.log[-5:]))

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(10)
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        """bootstrap.servers for a client: "127.0.0.1:PORT"."""
        return f"127.0.0.1:{self.port}"

    # --- operations (impl/faults.py) ---------------------------------------------------------
    def _call(self, operation: str, **args) -> dict:
        if self._proc is not None:
            if self._token is None:  # the token serve wrote for its port, never shown to the test
                self._token = control.read_token(self.control_address)
            return control.request(self.control_address, operation, args, token=self._token)

        async def on_loop():
            return control.call(self._coordinator.faults, operation, args)
        return asyncio.run_coroutine_threadsafe(on_loop(), self._loop).result(control.CALL_TIMEOUT_S)

    def status(self) -> dict:
        """{"paused", "away", "rules", "groups": {group: describe(group)}}."""
        return self._call("status")

    def describe(self, group: str) -> dict:
        """{"state" (Kafka's name: "Stable", ...), "generation", "protocol", "members":
        [{"member_id", "client_id", "assignment"}]} (assignments as spec/TRACE.md's)."""
        return self._call("describe", group=group)

    def assignment(self, group: str) -> dict:
        """{member.id: sorted [(topic, partition), ...]} as the coordinator holds it."""
        out = {}
        for m in self.describe(group)["members"]:
            tps = (m["assignment"] or {}).get("assigned_partitions", ())
            out[m["member_id"]] = sorted((tp["topic"], p) for tp in tps for p in tp["partitions"])
        return out

    def wait_for_stable(self, group: str, members: int | None = None, timeout_s: float = 30) -> dict:
        """Wait until ``group`` is Stable (with ``members`` members, if given) and every
        member holds its assignment; that assignment (as ``assignment``). Raises
        TimeoutError naming the last state seen."""
        deadline, last = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline:
            last = self.describe(group)
            if (last["state"] == "Stable" and (members is None or len(last["members"]) == members)
                    and all(m["assignment"] is not None for m in last["members"])):
                return self.assignment(group)
            time.sleep(0.05)
        raise TimeoutError(f"group {group!r} not Stable{f' with {members} members' if members else ''} "
                           f"after {timeout_s} s: {json.dumps(last)}")

    def expire(self, member_id: str, group: str | None = None) -> bool:
        """Expire ``member_id`` now (its session timeout fires, R11); whether it left
        (a member held at a barrier stays). ``group``: found from the member if None."""
        if group is None:
            group = next((g for g, d in self.status()["groups"].items()
                          if any(m["member_id"] == member_id for m in d["members"])), None)
            if group is None:
                raise FaultError(f"no group has member {member_id!r}")
        return self._call("expire", group=group, member_id=member_id)["expired"]

    def rebalance(self, group: str) -> str:
        """Force ``group`` to rebalance (R56); its state after."""
        return self._call("rebalance", group=group)["state"]

    def inject(self, api: str, *, error=None, delay_ms: int | None = None, drop: bool = False,
               member: str | None = None, count: int | None = None, for_ms: int | None = None) -> dict:
        """A fault for the responses of ``api`` (a Kafka API name): ``error`` (name or
        code) instead of the coordinator's answer, ``delay_ms``, or ``drop``; for one
        ``member`` (member.id or client.id) or all; for ``count`` requests and/or
        ``for_ms`` ms (neither: until ``clear``). The rule, as a dict."""
        return self._call("inject", api=api, error=error, delay_ms=delay_ms, drop=drop, member=member, count=count,
                          for_ms=for_ms)

    def clear(self) -> int:
        """Remove every injection rule; how many there were."""
        return self._call("clear")["cleared"]

    def coordinator_away(self, error: str = "NOT_COORDINATOR") -> None:
        """Group requests get ``error`` (NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE)
        and FindCoordinator COORDINATOR_NOT_AVAILABLE until ``coordinator_back``."""
        self._call("coordinator-away", error=error)

    def coordinator_back(self) -> None:
        self._call("coordinator-back")

    def pause(self) -> None:
        """Hold every request before dispatch (timers keep running) until ``resume``."""
        self._call("pause")

    def resume(self) -> None:
        self._call("resume")

    def records(self, topic: str) -> list:
        """The records produced to ``topic``: [{"partition", "offset", "timestamp_ms"}]
        by partition then offset (impl/faults.py ``Faults.records``)."""
        return self._call("records", topic=topic)["records"]

    def trace(self) -> list:
        """The trace so far, one dict per record (spec/TRACE.md); [] without ``trace``."""
        if self.trace_path is None or not self.trace_path.exists():
            return []
        with open(self.trace_path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
