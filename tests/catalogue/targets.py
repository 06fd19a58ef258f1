"""Where a catalogue scenario runs: the real Apache Kafka 4.4.0 broker
(rebalance.oracle.broker), ``rebalance serve``, or another implementation's test double
(franz-go's kfake, librdkafka's mock cluster: tests/doubles/), each behind a ``rebalance
proxy`` (impl/proxy.py, in a thread of this process) that records the scenario's trace,
so all are judged from the same kind of record by ``rebalance conform``.

A target is started with Kafka's names for the group settings under test
(``group.initial.rebalance.delay.ms``, ``group.min.session.timeout.ms``,
``group.max.session.timeout.ms``; KIP-848's ``group.consumer.*``); serve takes them as its
options.
"""
from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rebalance.impl.member import Wire
from rebalance.impl.proxy import Proxy
from rebalance.impl.trace import Recorder
from rebalance.impl.wire import Api
from rebalance.model.timing import SessionBounds
from rebalance.oracle.broker import KafkaBroker, api_versions_answered, free_port

REBALANCE = Path(sys.executable).parent / "rebalance"
# the scenarios run sessions of a few seconds: below Kafka's group.min.session.timeout.ms (6 s)
DEFAULT_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 100}
# Kafka's setting -> serve's option; None: a Kafka setting serve has no option for because it already behaves so
# (KIP-848: no lower bounds on the session and heartbeat intervals a test sets, and a new target assignment at
# every group epoch bump, as group.consumer.assignment.interval.ms 0 makes Kafka compute it)
SERVE_OPTIONS = {"group.initial.rebalance.delay.ms": "--initial-rebalance-delay-ms",
                 "group.min.session.timeout.ms": "--group-min-session-timeout-ms",
                 "group.max.session.timeout.ms": "--group-max-session-timeout-ms",
                 "group.consumer.session.timeout.ms": "--group-consumer-session-timeout-ms",
                 "group.consumer.heartbeat.interval.ms": "--group-consumer-heartbeat-interval-ms",
                 "group.consumer.min.session.timeout.ms": None, "group.consumer.min.heartbeat.interval.ms": None,
                 "group.consumer.assignment.interval.ms": None}
CONSUMER_SESSION_MS = 45_000  # Kafka's default group.consumer.session.timeout.ms


def create_topic(host: str, port: int, name: str, partitions: int, timeout_s: float = 30) -> None:
    """CreateTopics v4 (replication factor 1) on one broker, through our wire client, then
    Metadata v12 until the broker lists the topic with its partitions: Kafka's broker
    forwards CreateTopics to its controller (KafkaApis.handle, KafkaApis.scala:190, Kafka
    4.4.0) and answers Metadata from a cache the controller's records reach later
    (KRaftMetadataCachePublisher.onMetadataUpdate, KRaftMetadataCachePublisher.java:43), and
    a recording proxy started in between writes a header without the topic (conform's
    coordinator side then says incomplete; it diverged before, K5, one Java lifecycle run in
    five). Raises RuntimeError unless NONE or TOPIC_ALREADY_EXISTS, or if the topic is not
    listed within ``timeout_s``."""
    async def go():
        wire = await Wire.open(host, port, "catalogue")
        try:
            r = await wire.call(Api.CREATE_TOPICS, 4, topics=[{
                "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                "configs": []}], timeout=10_000, validate_only=False)
            error = r.topics[0].error_code
            if error.value not in (0, 36):
                raise RuntimeError(f"CreateTopics {name}: {error.name}")
            end = time.monotonic() + timeout_s
            while True:
                m = await wire.call(Api.METADATA, 12, topics=[{"name": name, "topic_id": None}],
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
                if m.topics and m.topics[0].error_code.value == 0 and len(m.topics[0].partitions) == partitions:
                    return
                if time.monotonic() > end:
                    raise RuntimeError(f"Metadata does not list {name} with {partitions} partitions after "
                                       f"{timeout_s} s: {m.topics[0].error_code.name if m.topics else 'no topic'}")
                await asyncio.sleep(0.05)
        finally:
            wire.close()
    asyncio.run(go())


def coordinator_ready(host: str, port: int, group: str, timeout_s: float = 60) -> None:
    """Wait until ``group``'s coordinator answers an OffsetFetch (v7) with NONE, asking
    FindCoordinator (v4) first: a fresh Kafka broker creates __consumer_offsets on the
    first FindCoordinator and answers COORDINATOR_LOAD_IN_PROGRESS while it loads it, an
    answer that comes from the broker, not the group's handler (conform's member side
    cannot read it). Raises RuntimeError after ``timeout_s``."""
    async def go():
        wire = await Wire.open(host, port, "catalogue")
        try:
            end = time.monotonic() + timeout_s
            while True:
                await wire.call(Api.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[group])
                r = await wire.call(Api.OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=False)
                if r.error_code.value == 0:
                    return
                if time.monotonic() > end:
                    raise RuntimeError(f"group {group}'s coordinator answers {r.error_code.name}")
                await asyncio.sleep(0.2)
        finally:
            wire.close()
    asyncio.run(go())


class RecordingProxy:
    """``rebalance proxy`` in a thread with its own event loop, recording ``trace``."""

    def __init__(self, upstream: tuple, trace: Path, initial_delay_ms: int, session_bounds: SessionBounds,
                 consumer_session_ms: int = 45_000):
        self.trace = trace
        self._loop = asyncio.new_event_loop()
        self._proxy = Proxy(("127.0.0.1", 0), upstream, Recorder(str(trace), "proxy"), initial_delay_ms,
                            session_bounds, consumer_session_ms)
        started = threading.Event()

        def run():
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._proxy.start())
            started.set()
            self._loop.run_forever()
        self._thread = threading.Thread(target=run, daemon=True, name="proxy")
        self._thread.start()
        if not started.wait(30):
            raise RuntimeError("the recording proxy did not start")
        self.port = self._proxy.port

    def inject(self, api: str, **rule) -> dict:
        """The proxy's ``inject`` (impl/proxy.py: delay or drop responses), run on its loop."""
        async def go():
            return self._proxy.injections.inject(api, **rule)
        return asyncio.run_coroutine_threadsafe(go(), self._loop).result(10)

    @property
    def failure(self) -> str | None:
        """Why the proxy stopped recording (a response that did not parse), or None."""
        return self._proxy.trace.failure

    def restarted(self, groups) -> None:
        """A ``restart`` record: the upstream broker restarted and loaded ``groups``."""
        self._loop.call_soon_threadsafe(self._proxy.restarted, groups)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._proxy.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def fresh(directory: Path) -> Path:
    """``directory``, made empty: what an earlier catalogue run into the same ``--out`` left
    there goes (the recorder would append this run to its trace, a Kafka broker refuses
    storage formatted for another cluster id, serve would load its groups)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


class Target:
    """A broker under test. ``name``: a key of TARGETS; ``settings``: Kafka's group
    settings; ``directory``: its files, from an empty folder (``fresh``). Subclasses start
    it on construction."""

    name = ""

    def __init__(self, settings: dict, directory: Path):
        self.settings = {**DEFAULT_SETTINGS, **settings}
        self.directory = fresh(directory)

    @property
    def initial_delay_ms(self) -> int:
        return int(self.settings["group.initial.rebalance.delay.ms"])

    @property
    def upstream(self) -> tuple:
        raise NotImplementedError

    def create_topic(self, name: str, partitions: int) -> None:
        create_topic(*self.upstream, name, partitions)

    def record(self, trace: Path) -> RecordingProxy:
        """A proxy in front of this broker, recording into ``trace`` (start it after the
        scenario's topic exists: the header lists the topics)."""
        return RecordingProxy(self.upstream, trace, self.initial_delay_ms, SessionBounds(
            int(self.settings["group.min.session.timeout.ms"]),
            int(self.settings.get("group.max.session.timeout.ms", SessionBounds().max_ms))),
            int(self.settings.get("group.consumer.session.timeout.ms", CONSUMER_SESSION_MS)))

    def stop(self, crash: bool = False) -> None:
        """Stop the broker (kill -9 when ``crash``); ``start`` starts it again on its store."""
        raise NotImplementedError

    def ensure_up(self) -> None:
        """Start the broker again if a scenario left it down (a restart that failed)."""
        if not api_versions_answered(*self.upstream):
            self.stop(crash=True)
            self.start()

    def start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class KafkaTarget(Target):
    """The real Apache Kafka 4.4.0, one KRaft node."""

    name = "kafka"

    def __init__(self, settings: dict, directory: Path):
        super().__init__(settings, directory)
        self.broker = KafkaBroker(self.settings, directory=directory / "kafka")
        self.startup_s = self.broker.startup_s

    @property
    def upstream(self) -> tuple:
        return self.broker.host, self.broker.port

    def stop(self, crash: bool = False) -> None:
        self.broker.kill9() if crash else self.broker.stop()

    def start(self) -> None:
        self.broker.start()

    def close(self) -> None:
        self.broker.close()


class ServeTarget(Target):
    """``rebalance serve`` in its own process (its store folder and log in ``directory``, kept across
    ``stop``/``start``: a restart loads the groups it stored)."""

    name = "serve"

    def __init__(self, settings: dict, directory: Path):
        super().__init__(settings, directory)
        unknown = sorted(set(self.settings) - set(SERVE_OPTIONS))
        if unknown:
            raise ValueError(f"serve has no option for {', '.join(unknown)}")
        self.port = free_port()
        self.log = directory / "serve.log"
        self.proc = None
        self.start()

    @property
    def upstream(self) -> tuple:
        return "127.0.0.1", self.port

    def start(self) -> None:
        options = [a for key, value in self.settings.items() if SERVE_OPTIONS[key]
                   for a in (SERVE_OPTIONS[key], str(value))]
        started = time.monotonic()
        with self.log.open("a") as log:
            # serve needs one topic to start with; the scenarios create theirs (CreateTopics)
            self.proc = subprocess.Popen([str(REBALANCE), "serve", "--port", str(self.port), "--no-auto-create-topics",
                                          "--topic", "catalogue:1",
                                          "--store", str(self.directory / "store"), *options],
                                         stdout=log, stderr=subprocess.STDOUT)
        while not api_versions_answered(*self.upstream):
            if self.proc.poll() is not None or time.monotonic() - started > 30:
                raise RuntimeError(f"rebalance serve did not start:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.02)
        self.startup_s = time.monotonic() - started

    def stop(self, crash: bool = False) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if crash else signal.SIGTERM)
            self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


class CannotRun(Exception):
    """A target that cannot play a scenario: a setting it does not have, an action
    (a broker restart) it cannot take. The fidelity table says so."""


class DoubleTarget(Target):
    """Another implementation's test double in its own process (tests/doubles/), which
    prints ``bootstrap HOST:PORT`` once it listens and reads commands on stdin;
    ``SETTINGS``: the group settings it takes, as ``{Kafka name: its option}``."""

    SETTINGS: dict = {}

    def __init__(self, settings: dict, directory: Path):
        super().__init__(settings, directory)
        unknown = sorted(k for k, v in self.settings.items() if k not in self.SETTINGS
                         and DEFAULT_SETTINGS.get(k) != v)
        if unknown:
            raise CannotRun(f"{self.name} has no {', '.join(unknown)}")
        directory.mkdir(parents=True, exist_ok=True)
        self.log = directory / f"{self.name}.log"
        self.proc = None
        self.start()

    def command(self) -> list:
        raise NotImplementedError

    @property
    def upstream(self) -> tuple:
        return self.host, self.port

    def start(self) -> None:
        started = time.monotonic()
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("bootstrap "):
            self.proc.kill()
            raise RuntimeError(f"{self.name} did not start: {line!r}\n{self.log.read_text()[-2000:]}")
        self.host, port = line.split()[1].rsplit(":", 1)
        self.port = int(port)
        while not api_versions_answered(*self.upstream):
            if self.proc.poll() is not None or time.monotonic() - started > 30:
                raise RuntimeError(f"{self.name} did not answer:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.02)
        self.startup_s = time.monotonic() - started

    def tell(self, command: str) -> str:
        """One command on its stdin; its answer line."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write("close\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class KfakeTarget(DoubleTarget):
    """franz-go's kfake (tests/doubles/kfake, built with Go into the user's cache): its
    session bounds set; no initial rebalance delay (kfake has none); a restart on the
    same data folder and port."""

    name = "kfake"
    SETTINGS = {"group.min.session.timeout.ms": "-group-min-session-ms",
                "group.max.session.timeout.ms": "-group-max-session-ms"}

    def __init__(self, settings: dict, directory: Path):
        self.fixed_port = free_port()
        super().__init__(settings, directory)

    def command(self) -> list:
        from doubles.kfake_build import binary
        options = [a for key, value in self.settings.items() if key in self.SETTINGS
                   for a in (self.SETTINGS[key], str(value))]
        return [str(binary()), "-port", str(self.fixed_port), "-data", str(self.directory / "data"), *options]

    def stop(self, crash: bool = False) -> None:
        self.proc.send_signal(signal.SIGKILL if crash else signal.SIGTERM)
        self.proc.wait(30)


class MockClusterTarget(DoubleTarget):
    """librdkafka's mock cluster (tests/doubles/mock_cluster.py): its initial rebalance
    delay set; no session bounds (it checks none); topics made through its API; no
    restart (its state lives in the process)."""

    name = "librdkafka-mock"
    SETTINGS = {"group.initial.rebalance.delay.ms": "--initial-rebalance-delay-ms",
                "group.min.session.timeout.ms": None, "group.max.session.timeout.ms": None}

    def command(self) -> list:
        options = [a for key, value in self.settings.items() if self.SETTINGS.get(key)
                   for a in (self.SETTINGS[key], str(value))]
        return [sys.executable, str(Path(__file__).parent.parent / "doubles" / "mock_cluster.py"), *options]

    def create_topic(self, name: str, partitions: int) -> None:
        answer = self.tell(f"topic {name} {partitions}")
        if answer != "ok":
            raise RuntimeError(f"rd_kafka_mock_topic_create {name}: {answer}")

    def stop(self, crash: bool = False) -> None:
        raise CannotRun("librdkafka's mock cluster cannot restart: its state lives in its process")


TARGETS = {"kafka": KafkaTarget, "serve": ServeTarget, "kfake": KfakeTarget, "librdkafka-mock": MockClusterTarget}
DOUBLES = ("kfake", "librdkafka-mock")


def target(name: str, settings: dict, directory=None) -> Target:
    """Start the target ``name`` (a key of TARGETS) with ``settings``; CannotRun when
    it has no such setting."""
    return TARGETS[name](settings, Path(directory or tempfile.mkdtemp(prefix=f"catalogue-{name}-")))


def played_on(where: str, directory: Path, play):
    """``play(target)`` on a fresh target ``where`` (its files in ``directory/broker``),
    closed afterwards whatever happens; what ``play`` returns."""
    t = target(where, {}, Path(directory) / "broker")
    try:
        return play(t)
    finally:
        t.close()
