"""Breadth-first exploration on Spark (``--engine spark``): long-lived partition
owners, one Spark task each.

The owners are those of ``check --workers`` (checker/engines/workers.py): the
state space is split among them by a stable fingerprint of each canonical state;
each owner keeps its own visited table and parent links for the whole run,
expands its own frontier with ``System.successors`` (the local engine's code),
and exchanges successors with the others in one batch per destination and BFS
level, deduplicated locally first. They run as one barrier stage
(``RDD.barrier().mapPartitions``: Spark starts every owner at once, or none), so
every BFS level runs inside that one stage: no shuffle of the visited set, no
``subtractByKey``, no lineage. The owners find each other through
``BarrierTaskContext.allGather`` (each one's listening address) and talk over
TCP (``multiprocessing.connection``, authenticated by a key the driver draws);
the driver gets back only counters, first violations, parent links and, for
liveness, the transitions between ranks, rebuilds counterexamples by replay and
decides liveness as the local engine does.

Counts, verdicts and counterexamples equal the local engine's (states are ranked
in its breadth-first order; workers.py). Spark runs in local mode by default
(``local[*]``, one owner per core) or on any master URL with at least as many
free task slots as ``spark.default.parallelism``; a failed owner fails the stage
(barrier mode restarts all owners or none). Its UI, console progress bar and
INFO logs are off (``log4j2.properties`` beside checker/spark_session.py).
"""
from __future__ import annotations

import secrets
import time
from multiprocessing.connection import Client, Listener

from ..spark_session import session
from ..system import System
from .explore import Result
from .workers import Mesh, gather, job_for, run_owner


def _owner(job, authkey: bytes, _partition):
    """A Spark task: connect to every other owner, run ``run_owner``, yield (owner, answer)."""
    from pyspark import BarrierTaskContext
    ctx = BarrierTaskContext.get()
    me = ctx.partitionId()
    host = ctx.getTaskInfos()[me].address.rsplit(":", 1)[0]
    with Listener((host, 0), authkey=authkey) as listener:
        addresses = [a.rsplit(":", 1) for a in ctx.allGather(f"{host}:{listener.address[1]}")]
        k = len(addresses)
        conns = [None] * k
        for j in range(me + 1, k):  # connect upwards, accept from below: the highest only accepts
            conns[j] = Client((addresses[j][0], int(addresses[j][1])), authkey=authkey)
            conns[j].send_bytes(me.to_bytes(4, "big"))
        for _ in range(me):
            c = listener.accept()
            conns[int.from_bytes(c.recv_bytes(), "big")] = c
    try:
        yield me, run_owner(job, Mesh(me, conns))
    finally:
        for c in conns:
            if c is not None:
                c.close()


def explore_spark(system: System, properties, covers=(), max_states=None, max_depth=None,
                  stop_on=frozenset(), fair=None, master: str = "local[*]", progress=None, guard=None) -> Result:
    """The same contract as ``explore.explore``, run by ``spark.default.parallelism``
    owners on ``master`` (module docstring). ``progress`` is called once, at the
    end (the owners report to the driver only when done); ``guard``'s limits apply
    in every owner (memory: each owner's resident set)."""
    t0 = time.perf_counter()
    job = job_for(system, properties, covers, stop_on, max_states, max_depth, guard)
    authkey = secrets.token_bytes(32)
    spark = session(master)
    try:
        sc = spark.sparkContext
        owners = sc.defaultParallelism
        answers = (sc.parallelize(range(owners), owners).barrier()
                   .mapPartitions(lambda it: _owner(job, authkey, it)).collect())
    finally:
        spark.stop()
    result = gather(system, properties, covers, [a for _, a in sorted(answers, key=lambda x: x[0])], t0, fair)
    if progress is not None:
        progress(result.distinct_states, result.transitions, 0, result.max_depth)
    return result
