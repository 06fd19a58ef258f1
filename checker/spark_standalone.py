"""A Spark standalone cluster on loopback (issue 44 item 3): a master and N
workers, each a JVM started by the ``spark-class`` script that pyspark ships
(``org.apache.spark.deploy.master.Master``, ``org.apache.spark.deploy.worker.Worker``),
as ``sbin/start-master.sh`` and ``start-worker.sh`` would on a real cluster, but
in the foreground, so that closing the cluster ends every process it started.

    with LoopbackCluster(workers=2, cores=1) as cluster:
        rebalance check --engine spark --spark-master {cluster.master}

The engine then runs ``spark.default.parallelism`` owners, one per core of the
machine (checker/spark_session.py), which must not exceed the cluster's cores
(workers x cores): barrier mode starts every owner at once. A real cluster is
the same master URL (docs/tutorials/spark-campaigns.md).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from rebalance.extras import require


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackCluster:
    """Context manager: a master and ``workers`` workers of ``cores`` cores and
    ``memory`` each on 127.0.0.1; ``master``: its URL (``spark://127.0.0.1:PORT``),
    ``ui`` its web UI's port (``status``).
    Their logs go to ``logs`` (a temporary directory, removed on exit). Raises
    MissingExtra without the ``[spark]`` extra, RuntimeError if the workers have
    not registered with the master within ``timeout_s`` (with the logs' tails)."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g", timeout_s: float = 90.0):
        self.workers, self.cores, self.memory, self.timeout_s = workers, cores, memory, timeout_s
        self.procs: list = []
        self.master = None

    def _start(self, name: str, *args) -> None:
        log = open(self.logs / f"{name}.log", "wb")
        self.procs.append(subprocess.Popen([str(self.spark_home / "bin" / "spark-class"), *args],
                                           stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                           start_new_session=True))
        log.close()

    def __enter__(self) -> LoopbackCluster:
        require("spark", "a Spark standalone cluster")
        import pyspark
        self.spark_home = Path(pyspark.__file__).parent
        self.logs = Path(tempfile.mkdtemp(prefix="rebalance-spark-"))
        self.env = {**os.environ, "SPARK_HOME": str(self.spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_LOG_DIR": str(self.logs), "SPARK_WORKER_DIR": str(self.logs / "work"),
                    "PYSPARK_PYTHON": sys.executable}
        port, self.ui = _free_port(), _free_port()
        self.master = f"spark://127.0.0.1:{port}"
        try:
            self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(port), "--webui-port", str(self.ui))
            for i in range(self.workers):
                self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                            "--cores", str(self.cores), "--memory", self.memory, "--webui-port", "0",
                            "--work-dir", str(self.logs / f"work{i}"), self.master)
            self._await_workers()
        except BaseException:
            self.__exit__()
            raise
        return self

    def status(self) -> dict:
        """The master's status page (its web UI's ``/json/``: ``aliveworkers``,
        ``cores``, ``activeapps``, ``completedapps``, ...). Raises OSError or
        ValueError if it does not answer."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as r:
            return json.load(r)

    def _await_workers(self) -> None:
        """Until the master's status page counts every worker alive."""
        deadline = time.monotonic() + self.timeout_s
        alive = 0
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                break
            try:
                alive = self.status().get("aliveworkers", 0)
            except (OSError, ValueError):
                alive = 0
            if alive >= self.workers:
                return
            time.sleep(0.5)
        tails = "\n".join(f"--- {f.name}\n" + f.read_text(errors="replace")[-1500:]
                          for f in sorted(self.logs.glob("*.log")))
        raise RuntimeError(f"Spark standalone: {alive} of {self.workers} workers registered with "
                           f"{self.master} within {self.timeout_s:.0f} s\n{tails}")

    def __exit__(self, *exc) -> None:
        """Each process group (a JVM in its own session, with the executors and Python
        workers it started) ended: workers first, then the master; killed after 15 s."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in reversed(self.procs):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
                if sig == signal.SIGTERM:
                    try:
                        p.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        pass
        for p in self.procs:
            p.wait()
        self.procs = []
        shutil.rmtree(self.logs, ignore_errors=True)
