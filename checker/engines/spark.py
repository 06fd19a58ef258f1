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
TCP (``multiprocessing.connection``, authenticated by a key the driver draws).
Each owner sends its answer (counters, first violations, parent links and, for
liveness, the transitions between ranks) straight to the driver over TCP too,
not through ``collect``: the answers grow with the state space (about 28 MB for
the main job) and would otherwise be copied through both JVMs and count against
``spark.driver.maxResultSize``. The driver rebuilds counterexamples by replay
and decides liveness as the local engine does.

Counts, verdicts and counterexamples equal the local engine's (states are ranked
in its breadth-first order; workers.py). Spark runs in local mode by default
(``local[*]``, one owner per core) or on any master URL with at least as many
free task slots as ``spark.default.parallelism``; a failed owner fails the stage
(barrier mode restarts all owners or none). Its UI, console progress bar and
INFO logs are off (``log4j2.properties`` beside checker/spark_session.py).
"""
from __future__ import annotations

import pickle
import secrets
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener

from ..spark_session import session
from ..system import System
from .explore import Result
from .workers import Mesh, gather, job_for, run_owner


def _owner(job, authkey: bytes, driver: tuple, _partition):
    """A Spark task: connect to every other owner, run ``run_owner``, send (owner,
    answer) to the driver's listener at ``driver`` (host, port), yield the owner."""
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
        answer = run_owner(job, Mesh(me, conns))
        answer = pickle.dumps((me, answer | {"edges": list(answer["edges"])}), protocol=pickle.HIGHEST_PROTOCOL)
        with Client(driver, authkey=authkey) as c:
            c.send_bytes(answer)
        yield me
    finally:
        for c in conns:
            if c is not None:
                c.close()


def explore_spark(system: System, properties, covers=(), max_states=None, max_depth=None,
                  stop_on=frozenset(), fair=None, master: str = "local[*]", progress=None, guard=None) -> Result:
    """The same contract as ``explore.explore``, run by ``spark.default.parallelism``
    owners on ``master`` (module docstring). ``progress`` is called once, at the
    end (the owners report to the driver only when done); ``guard``'s limits apply
    in every owner (memory: each owner's resident set). Raises RuntimeError if the
    stage ends without every owner's answer."""
    t0 = time.perf_counter()
    job = job_for(system, properties, covers, stop_on, max_states, max_depth, guard)
    authkey = secrets.token_bytes(32)
    spark = session(master)
    try:
        sc = spark.sparkContext
        owners = sc.defaultParallelism
        with Listener((sc.getConf().get("spark.driver.host"), 0), authkey=authkey) as listener:
            answers: dict = {}  # owner -> answer (a retried stage's owner answers the same again)
            receiver = threading.Thread(target=_receive, args=(listener, answers, owners), daemon=True)
            receiver.start()
            address = listener.address
            (sc.parallelize(range(owners), owners).barrier()
             .mapPartitions(lambda it: _owner(job, authkey, address, it)).collect())
            receiver.join()  # every owner sent its answer before its task ended
    finally:
        spark.stop()
    if len(answers) < owners:
        raise RuntimeError(f"the Spark stage ended with {len(answers)} of {owners} owners' answers")
    result = gather(system, properties, covers, [answers[i] for i in range(owners)], t0, fair)
    if progress is not None:
        progress(result.distinct_states, result.transitions, 0, result.max_depth)
    return result


def _receive(listener: Listener, answers: dict, owners: int) -> None:
    """Accept the owners' answers (``_owner``) into ``answers`` until all ``owners`` are in."""
    while len(answers) < owners:
        try:
            with listener.accept() as c:
                me, answer = pickle.loads(c.recv_bytes())
        except (AuthenticationError, EOFError):  # not an owner, or an owner that failed while sending
            continue
        except OSError:  # the listener closed: the stage failed
            return
        answers[me] = answer
