"""A Kafka Streams 4.4.0 application instance on loopback (the oracle's CountApp,
oracle/src/main/java/rebalance/oracle/streams/CountApp.java), for the Streams scenarios
(docs/streams.md).

``StreamsInstance(name, bootstrap, application_id, input, output, directory, settings)``
writes ``NAME.properties`` into ``directory`` and starts the JVM; its log (Log4j 2,
oracle/log4j2.properties) goes to ``NAME.log`` there, and a thread reads the app's
stdout: one JSON line each time its state or its tasks change, kept in ``history`` as
``{"t": ms, "state", "active": ["0_1", ...], "standby": [...]}`` (standbys include
warmups: Streams does not tell them apart on an instance). Its consumer's ``client.id``
is ``NAME-StreamThread-1-consumer`` (Streams appends the thread), so a trace names
instances as the scenario does.

``DEFAULTS`` make the HighAvailabilityTaskAssignor's moves quick to see: one stream thread,
``num.standby.replicas`` 1, ``acceptable.recovery.lag`` 100 records (Kafka's default
10,000: a new instance with a few thousand changelog records to restore is not caught
up), ``max.warmup.replicas`` 2 (the default), ``probing.rebalance.interval.ms`` 60,000
(its minimum, StreamsConfig; default 10 minutes), ``processing.guarantee``
at_least_once, commits every second, no record cache (every update reaches the changelog
and the output), the classic group protocol, sessions of 6 s and heartbeats of 1 s.

``stop()`` closes it cleanly (SIGTERM: the shutdown hook closes Streams, leaving the
group only when ``leave.group.on.close`` is "true"); ``kill9()`` crashes it.

Errors raised: ``OracleError`` (no Java or Maven, a failed build, an instance that exits
or is not RUNNING within ``STARTUP_TIMEOUT_S``; the message ends with its log's last lines).
"""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from .process import JvmProcess, java

MAIN = "rebalance.oracle.streams.CountApp"
STARTUP_TIMEOUT_S = 120
JVM_OPTIONS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
DEFAULTS = {
    "num.stream.threads": 1,
    "num.standby.replicas": 1,
    "acceptable.recovery.lag": 100,
    "max.warmup.replicas": 2,
    "probing.rebalance.interval.ms": 60_000,
    "processing.guarantee": "at_least_once",
    "commit.interval.ms": 1000,
    "statestore.cache.max.bytes": 0,
    "replication.factor": 1,
    "group.protocol": "classic",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
}


class StreamsInstance(JvmProcess):
    """One instance of the application ``application_id`` (the group.id)."""

    stop_timeout_s = 60

    def __init__(self, name: str, bootstrap: str, application_id: str, input_topic: str, output_topic: str,
                 directory: Path, settings: dict | None = None):
        self.name = name
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.settings = {**DEFAULTS, **(settings or {}), "application.id": application_id,
                         "bootstrap.servers": bootstrap, "client.id": name,
                         "state.dir": str(self.directory / f"{name}-state"),
                         "input.topic": input_topic, "output.topic": output_topic}
        self.properties = self.directory / f"{name}.properties"
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        self.log_path = self.directory / f"{name}.log"
        self.history: list = []
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        """Start the JVM and wait until the instance is RUNNING."""
        with self.log_path.open("a") as log:
            self.proc = subprocess.Popen(java(MAIN, str(self.properties), options=JVM_OPTIONS),
                                         stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True, name=f"streams-{self.name}").start()
        self.wait_ready(f"Streams instance {self.name}", lambda: self.state() == "RUNNING", STARTUP_TIMEOUT_S)

    def _read(self, proc) -> None:
        for line in proc.stdout:
            try:
                self.history.append(json.loads(line))
            except ValueError:
                pass

    def state(self) -> str | None:
        return self.history[-1]["state"] if self.history else None

    def tasks(self) -> tuple:
        """(active, standby) task ids now, as sets of "SUBTOPOLOGY_PARTITION" strings."""
        last = self.history[-1] if self.history else {"active": [], "standby": []}
        return set(last["active"]), set(last["standby"])

    def close(self) -> None:
        """Kill it; nothing is left running."""
        self.resume()
        self.kill9()
