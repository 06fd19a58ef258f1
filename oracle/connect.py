"""Kafka Connect 4.4.0 distributed workers (``org.apache.kafka.connect.cli.ConnectDistributed``,
connect-runtime) on loopback, for the Connect scenarios (docs/connect.md), and their REST API.

``ConnectWorker(name, bootstrap, group, directory, settings)`` writes ``NAME.properties`` into
``directory`` and starts the worker; its log (Log4j 2, oracle/log4j2.properties) goes to
``NAME.log`` there. It is ready when its REST API answers (``GET /``). A worker's member of
the Connect group is named ``connect-NAME`` (its ``client.id``), so a trace names workers as
the scenario does.

``DEFAULTS`` suit tests: the internal topics small and replicated once, the string
converters, ``plugin.discovery`` ``service_load`` (the oracle's SequenceSourceConnector is
found through META-INF/services, without scanning 375 jars), offsets flushed every second,
``worker.unsync.backoff.ms`` 1 s (Kafka's default: 5 minutes), session 6 s and heartbeat 1 s,
and ``scheduled.rebalance.max.delay.ms`` 6 s (Kafka's default: 5 minutes; 0 switches the
delay off, DistributedConfig: at least 0).

``stop()`` shuts down cleanly (SIGTERM: the worker leaves the group); ``kill9()`` crashes it;
``start()`` starts it again with the same name and REST port. The REST calls (``create``,
``delete``, ``status``, ``connectors``) raise ``ConnectError`` with the worker's answer.

Errors raised: ``OracleError`` (no Java or Maven, a failed build, a worker that exits or does
not answer within ``STARTUP_TIMEOUT_S``; the message ends with its log's last lines).
"""
from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from .broker import free_port
from .process import JvmProcess, java

MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
CONNECTOR = "rebalance.oracle.connect.SequenceSourceConnector"
STARTUP_TIMEOUT_S = 120
JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
DEFAULTS = {
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    "config.storage.replication.factor": 1,
    "offset.storage.replication.factor": 1,
    "status.storage.replication.factor": 1,
    "offset.storage.partitions": 5,
    "status.storage.partitions": 3,
    "plugin.discovery": "service_load",
    "offset.flush.interval.ms": 1000,
    "worker.unsync.backoff.ms": 1000,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "scheduled.rebalance.max.delay.ms": 6000,
}


class ConnectError(RuntimeError):
    """A REST call the worker refused: ``status`` (HTTP) and its ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class ConnectWorker(JvmProcess):
    """One distributed worker of Connect group ``group`` (its internal topics named
    ``GROUP-configs``, ``GROUP-offsets``, ``GROUP-status``)."""

    stop_timeout_s = 60

    def __init__(self, name: str, bootstrap: str, group: str, directory: Path, settings: dict | None = None):
        self.name, self.bootstrap, self.group = name, bootstrap, group
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.settings = {**DEFAULTS, "group.id": group, "client.id": f"connect-{name}",
                         "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
                         "status.storage.topic": f"{group}-status", **(settings or {}),
                         "bootstrap.servers": bootstrap, "listeners": self.url,
                         "rest.advertised.host.name": "127.0.0.1", "rest.advertised.port": self.port}
        self.properties = self.directory / f"{name}.properties"
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        self.log_path = self.directory / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        """Start the worker's JVM and wait until its REST API answers."""
        with self.log_path.open("a") as log:
            self.proc = subprocess.Popen(java(MAIN, str(self.properties), options=JVM_OPTIONS),
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_ready(f"Connect worker {self.name}", self._answers, STARTUP_TIMEOUT_S)

    def _answers(self) -> bool:
        try:
            self._call("GET", "/")
            return True
        except (OSError, ConnectError):
            return False

    def close(self) -> None:
        """Kill it (a paused worker too); nothing is left running."""
        self.resume()
        self.kill9()

    # --- REST ---------------------------------------------------------------------------
    def _call(self, method: str, path: str, body=None, timeout: float = 10):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message", text)
            except ValueError:
                message = text
            raise ConnectError(e.code, message) from None
        return json.loads(text) if text else None

    def create(self, connector: str, config: dict) -> dict:
        """POST /connectors: ``connector`` with ``config`` (Connect's connector config)."""
        return self._call("POST", "/connectors", {"name": connector, "config": {k: str(v) for k, v in config.items()}})

    def delete(self, connector: str) -> None:
        """DELETE /connectors/NAME."""
        self._call("DELETE", f"/connectors/{connector}")

    def status(self, connector: str) -> dict:
        """GET /connectors/NAME/status: the connector's and its tasks' states and workers."""
        return self._call("GET", f"/connectors/{connector}/status")

    def connectors(self) -> list:
        return self._call("GET", "/connectors")


def sequence_connector(topic: str, tasks: int, interval_ms: int = 200) -> dict:
    """The config of a SequenceSourceConnector (oracle/src) writing to ``topic``."""
    return {"connector.class": CONNECTOR, "tasks.max": tasks, "topic": topic, "interval.ms": interval_ms}
