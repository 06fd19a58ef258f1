"""Starting the Java consumer agent (oracle/src/main/java/rebalance/oracle/agent,
docs/java-agent.md): Kafka 4.4.0's KafkaConsumer driven as tests/interop/agent.py drives
the Python clients.

``command(jvm_options=JVM_OPTIONS)`` is the command line up to the agent's own
arguments (NAME --bootstrap ...). A consumer's JVM spends most of its start-up
loading Kafka's classes, so the command uses an application class-data-sharing
archive (AppCDS, JDK 13+'s dynamic archive) made once per oracle build by
``archive()``: one training run of the agent against an in-process ``rebalance
serve`` (rebalance.testing.Cluster) that joins, is assigned, auto-commits and closes,
with ``-XX:ArchiveClassesAtExit``. The archive lives in the build folder
(rebalance.oracle.maven.build_dir), so it follows the classpath it was made from. If
the training run fails the agent runs without it (slower, same behaviour), and the
next call tries again. benchmarks/java_agent.py prints the figures.

JVM options: a small heap, the serial collector and C1 only (a consumer needs no
more, and starts faster on two cores); the JVM's own warnings go to stderr, not to
the stdout the observed records are read from.

Errors raised: ``OracleError`` (no Java or Maven, a failed build).
"""
from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from .maven import LOG4J2, build_dir, classpath, tool

MAIN = "rebalance.oracle.agent.ConsumerAgent"
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
QUIET = ("-Xlog:disable", "-Xlog:all=warning:stderr")
TRAINING_TIMEOUT_S = 60
_lock = threading.Lock()


def archive_path() -> Path:
    return build_dir() / "agent.jsa"


def command(jvm_options=JVM_OPTIONS, cds: bool = True) -> list:
    """``java ... rebalance.oracle.agent.ConsumerAgent``, the agent's arguments to follow;
    ``cds``: with the class-data archive (made first if missing)."""
    shared = archive() if cds else None
    return _java(jvm_options, [f"-XX:SharedArchiveFile={shared}"] if shared else [])


def _java(jvm_options, more) -> list:
    return [tool("java"), *jvm_options, *QUIET, *more, f"-Dlog4j2.configurationFile={LOG4J2}", "-cp", classpath(),
            MAIN]


def archive() -> Path | None:
    """The agent's class-data archive, made by a training run if missing; None if that
    run failed (see the module docstring)."""
    path = archive_path()
    with _lock:
        if not path.exists():
            _train(path)
    return path if path.exists() else None


def _train(path: Path) -> None:
    """One agent, alone in a group of an in-process serve, until it has been assigned and
    has auto-committed; its JVM writes the archive as it exits after ``close``. Written
    under a temporary name and renamed, so a concurrent run never reads half of one."""
    from rebalance.testing import Cluster

    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with Cluster({"t": 2}, trace=False) as cluster:
        proc = subprocess.Popen(
            [*_java(JVM_OPTIONS, [f"-XX:ArchiveClassesAtExit={partial}"]), "training", "--bootstrap", cluster.bootstrap, "--group", "training", "--topic", "t"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        timer = threading.Timer(TRAINING_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            for line in proc.stdout:
                if '"assigned"' in line:
                    threading.Timer(1.0, lambda: _tell(proc, "close")).start()  # past one auto-commit (500 ms)
            proc.wait()
        finally:
            timer.cancel()
    if proc.returncode == 0 and partial.exists():
        partial.rename(path)
    else:
        partial.unlink(missing_ok=True)


def _tell(proc: subprocess.Popen, line: str) -> None:
    try:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
    except (BrokenPipeError, ValueError):  # the agent is gone already
        pass
