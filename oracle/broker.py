"""A real Apache Kafka 4.4.0 broker on loopback: one KRaft node that is both broker and
controller, started from the jars ``rebalance.oracle.maven`` resolves.

``KafkaBroker(settings)`` writes ``server.properties`` into its folder (a temporary one
unless ``directory`` is given), formats the storage as a standalone controller
(``kafka.tools.StorageTool format --standalone``, as ``kafka-storage.sh`` does) and
starts ``kafka.Kafka``. It is ready when it answers an ApiVersions request (v0) on its
client listener; ``startup_s`` holds the seconds from the JVM's launch to that answer.
Its log (Log4j 2, the group coordinator at DEBUG: oracle/log4j2.properties) goes to
``broker.log`` in its folder.

Settings are Kafka's broker properties; ``DEFAULTS`` makes a single node fast on two
cores (one ``__consumer_offsets`` partition, replication factor 1 everywhere) and lets
tests use short sessions (``group.min.session.timeout.ms`` 100, where Kafka's default
is 6000) and no initial rebalance delay (``group.initial.rebalance.delay.ms`` 0, KIP-134;
Kafka's default 3000). Give the group settings under test, e.g.
``{"group.initial.rebalance.delay.ms": 3000}`` or the ``group.consumer.*`` ones.

``stop()`` shuts down cleanly (SIGTERM: Kafka's controlled shutdown); ``kill9()``
crashes it; ``start()`` starts it again on the same ports and storage (a broker
restart). ``pause()``/``resume()`` SIGSTOP and SIGCONT it. A context manager stops it and
deletes a temporary folder.

Errors raised: ``OracleError`` (no Java or Maven, a failed build, a broker that exits
or does not answer within ``STARTUP_TIMEOUT_S``; the message ends with its log's last
lines), ``ValueError`` (a setting the launcher owns, such as ``listeners``).
"""
from __future__ import annotations

import base64
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

from rebalance.impl.wire import Api, read_response, request_frame

from .maven import OracleError
from .process import JvmProcess, java

STARTUP_TIMEOUT_S = 60
# JVM options: a small heap and the serial collector suit one node on two cores
JVM_OPTIONS = ("-Xms256m", "-Xmx1g", "-XX:+UseSerialGC", "-Djava.awt.headless=true")

DEFAULTS = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "share.coordinator.state.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
    "num.partitions": 1,
    "auto.create.topics.enable": "false",
    # a restart after kill -9 waits for the old registration to expire (Kafka's default 9000 ms)
    "broker.session.timeout.ms": 1500,
    "broker.heartbeat.interval.ms": 300,
}
# set by the launcher from its ports and folder
OWNED = ("process.roles", "node.id", "listeners", "advertised.listeners", "controller.listener.names",
         "controller.quorum.bootstrap.servers", "listener.security.protocol.map", "inter.broker.listener.name",
         "log.dirs")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_answered(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether ``host:port`` answers an ApiVersions v0 request with error NONE."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(request_frame(Api.API_VERSIONS, 0, 1, "rebalance-oracle", {}))
            size = int.from_bytes(_read(s, 4), "big")
            _, body = read_response(_read(s, size), Api.API_VERSIONS, 0)
            return body.error_code.name == "none"
    except OSError:
        return False


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class KafkaBroker(JvmProcess):
    """One KRaft broker+controller on 127.0.0.1. ``settings``: broker properties on top
    of ``DEFAULTS``; ``port``: the client listener (0: a free one); ``directory``: where
    its config, storage and log go (a temporary folder by default); ``start``: start now."""

    def __init__(self, settings: dict | None = None, *, port: int = 0, directory=None, start: bool = True):
        clash = sorted(set(settings or ()) & set(OWNED))
        if clash:
            raise ValueError(f"the launcher sets {', '.join(clash)} itself")
        self.settings = {**DEFAULTS, **(settings or {})}
        self._tmp = None if directory else tempfile.TemporaryDirectory(prefix="rebalance-kafka-")
        self.directory = Path(directory or self._tmp.name)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = port or free_port(), free_port()
        self.log_path = self.directory / "broker.log"
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None
        self._formatted = False
        if start:
            self.start()

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def properties(self) -> dict:
        """Every property of the node's server.properties."""
        h = self.host
        return {
            "process.roles": "broker,controller", "node.id": 1,
            "listeners": f"PLAINTEXT://{h}:{self.port},CONTROLLER://{h}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{h}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": f"{h}:{self.controller_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.directory / "data"),
            **self.settings,
        }

    def _java(self, main: str, *args: str) -> list:
        return java(main, *args, options=JVM_OPTIONS)

    def _format(self) -> None:
        config = self.directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")  # as `kafka-storage.sh random-uuid`
        # --cluster-id=ID in one argument: a base64url id may start with '-', which would read as an option
        p = subprocess.run(self._java("kafka.tools.StorageTool", "format", "--standalone", f"--cluster-id={cid}",
                                      "-c", str(config)), capture_output=True, text=True)
        if p.returncode != 0:
            raise OracleError(f"formatting Kafka's storage failed (exit {p.returncode}):\n{p.stdout}{p.stderr}")
        self._formatted = True

    def start(self) -> None:
        """Start the node (formatting its storage the first time) and wait until it answers."""
        if self.proc and self.proc.poll() is None:
            return
        if not self._formatted:
            self._format()
        with self.log_path.open("a") as log:
            self.proc = subprocess.Popen(self._java("kafka.Kafka", str(self.directory / "server.properties")),
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_ready("the Kafka broker", lambda: api_versions_answered(self.host, self.port), STARTUP_TIMEOUT_S,
                        poll_s=0.05)

    def close(self) -> None:
        """Stop, and delete a temporary folder."""
        self.stop()
        if self._tmp:
            self._tmp.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
