"""Kafka Streams 4.4.0 on a target (``rebalance serve`` or the real broker), behind the
recording proxy: instances of the oracle's CountApp (rebalance.oracle.streams: a count
per key in a state store with its changelog, ``num.standby.replicas`` 1, warmups, the
probing rebalance at its 60 s minimum) on an input topic of ``PARTITIONS`` partitions,
so six tasks; each scenario moves instances while records keep arriving (docs/streams.md).

``StreamsRun`` plays a scenario: instances A, B, ... (client.id ``A``; their consumers'
``A-StreamThread-1-consumer``), a producer writing ``RATE`` records a second of keys
``k0``..``k59`` to the input topic (librdkafka, straight to the broker: only group APIs
are recorded). ``run_streams(scenario, target, directory)`` plays it and judges it: the
situation's claims (read off the instances' own view of their tasks, over time), the
end-to-end counts (every key's outputs are 1, 2, ..., n exactly once, n the key's input
records: nothing lost or counted twice), and ``rebalance conform`` on both sides of the
trace.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rebalance.checker.conform.trace import read
from rebalance.impl.observed import now_ms
from rebalance.impl.streams_info import NO_REBALANCE_MS
from rebalance.oracle.streams import DEFAULTS, StreamsInstance

from .connect import _member_names
from .runner import _verdict, registrar
from .targets import coordinator_ready, fresh
from .streams_model import model_rounds, real_rounds

PARTITIONS = 6
KEYS = 60
RATE = 50  # input records a second while the scenario runs
BACKLOG = 3000  # records written before the first instance starts: the state a newcomer must restore
_serial = itertools.count(1)


@dataclass
class StreamsScenario:
    """``script(run)`` plays it; ``situation(run)`` yields (claim, held) pairs; ``model``:
    (the names that join, the names that leave) at the event, for
    streams_model.model_rounds from the real group's last round before it, or None."""

    name: str
    title: str
    script: Callable
    situation: Callable | None = None
    settings: dict = field(default_factory=dict)
    model: tuple | None = None


STREAMS: dict = {}


def streams_scenario(title: str, model=None, **settings):
    """Register the decorated script as a Streams scenario; ``model``: its
    StreamsScenario.model; ``settings``: the app's, over rebalance.oracle.streams.DEFAULTS."""
    return registrar(STREAMS, lambda script: StreamsScenario(script.__name__, title, script, settings=settings,
                                                             model=model))


class Feeder:
    """Writes the input: ``count(n)`` records at once, or ``RATE`` a second in a thread
    between ``start()`` and ``stop()``; ``sent``: {key: records written and acknowledged}."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer
        self.topic, self.sent, self.n = topic, {}, 0
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._stop = threading.Event()
        self._thread = None

    def _one(self) -> None:
        key = f"k{self.n % KEYS}"
        self.n += 1

        def acked(err, _msg, key=key):
            if err is None:
                self.sent[key] = self.sent.get(key, 0) + 1
        self.producer.produce(self.topic, key=key, value=str(self.n), on_delivery=acked)

    def count(self, n: int) -> None:
        for _ in range(n):
            self._one()
            self.producer.poll(0)
        self.producer.flush(60)

    def start(self) -> None:
        def run():
            while not self._stop.wait(1 / RATE):
                self._one()
                self.producer.poll(0)
        self._stop.clear()
        self._thread = threading.Thread(target=run, daemon=True, name="feeder")
        self._thread.start()

    def stop(self) -> None:
        if self._thread:
            self._stop.set()
            self._thread.join(10)
            self._thread = None
        if self.producer.flush(60):
            raise RuntimeError("the feeder's records were not all acknowledged")


class StreamsRun:
    """One Streams scenario on one target: its application, topics, proxy and instances."""

    def __init__(self, s: StreamsScenario, target, directory: Path):
        self.scenario, self.target, self.directory = s, target, directory
        self.app = f"streams-{s.name}-{next(_serial)}"
        self.input, self.output = f"{self.app}-in", f"{self.app}-out"
        target.create_topic(self.input, PARTITIONS)
        target.create_topic(self.output, 1)
        coordinator_ready(*target.upstream, self.app)
        self.trace_path = directory / "trace.jsonl"
        self.proxy = target.record(self.trace_path)
        self.bootstrap = f"127.0.0.1:{self.proxy.port}"
        self.broker = f"{target.upstream[0]}:{target.upstream[1]}"
        self.feeder = Feeder(self.broker, self.input)
        self.instances: dict = {}
        self.stopped: set = set()
        self.stopped_at: dict = {}
        self.marks: dict = {}
        self.crashed_leader: str | None = None

    def start(self, name: str) -> StreamsInstance:
        self.instances[name] = StreamsInstance(name, self.bootstrap, self.app, self.input, self.output,
                                               self.directory / "instances", self.scenario.settings)
        self.stopped.discard(name)
        return self.instances[name]

    def stop(self, name: str, crash: bool = False) -> None:
        """Close instance ``name`` cleanly (SIGTERM); it sends LeaveGroup when started with
        ``leave.group.on.close`` true (the scenario's settings). ``crash``: kill -9 instead
        (no LeaveGroup, no commit: its session expires)."""
        self.stopped_at[name] = now_ms()
        self.instances[name].kill9() if crash else self.instances[name].stop()
        self.stopped.add(name)

    def leader(self) -> str:
        """The instance that leads the group now: the leader named by the trace's last
        JoinGroup answer."""
        trace = read(self.trace_path)
        leaders = [r["body"]["leader"] for _, r in trace.records if r["type"] == "response"
                   and r.get("api") == "JoinGroup" and r["body"]["error"] == "NONE"]
        return _member_names(trace, instance_of)[leaders[-1]]

    def crash_leader(self) -> str:
        """Kill -9 the group's leader (``leader()``); its name, kept as ``crashed_leader``."""
        self.crashed_leader = self.leader()
        self.stop(self.crashed_leader, crash=True)
        return self.crashed_leader

    def live(self) -> list:
        return [n for n in self.instances if n not in self.stopped]

    def mark(self, label: str) -> float:
        self.marks[label] = now_ms()
        return self.marks[label]

    def placement(self) -> dict:
        """{instance: (active, standby)} as each live instance sees its tasks now."""
        return {n: self.instances[n].tasks() for n in self.live()}

    def wait(self, predicate, what: str, timeout: float = 180) -> dict:
        """Wait until ``predicate(placement)`` holds, every instance RUNNING; the placement."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            dead = [n for n in self.live() if not self.instances[n].alive()]
            if dead:
                raise RuntimeError(f"instances exited by themselves: {dead}")
            placed = self.placement()
            if all(self.instances[n].state() == "RUNNING" for n in self.live()) and predicate(placed):
                return placed
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}: {self.placement()}")

    def wait_counted(self, timeout: float = 120) -> dict:
        """Wait until the output holds every input record's count; the outputs by key."""
        end = time.monotonic() + timeout
        while True:
            out = outputs(self.broker, self.output)
            if all(max(out.get(k, [0])) >= n for k, n in self.feeder.sent.items()) or time.monotonic() > end:
                return out
            time.sleep(1)

    def finish(self) -> None:
        self.feeder.stop()
        for i in self.instances.values():
            i.close()
        self.proxy.close()


def instance_of(client_id: str) -> str:
    """The instance name of a Streams consumer's client.id (``A-StreamThread-1-consumer``: A)."""
    return client_id.split("-StreamThread-")[0]


def outputs(bootstrap: str, topic: str) -> dict:
    """{key: [count, ...]} of everything in ``topic`` (one partition) in offset order, read
    to its end with librdkafka outside any group."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "outputs-reader", "enable.auto.commit": False})
    out: dict = {}
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        read_to, end = 0, time.monotonic() + 60
        while read_to < high and time.monotonic() < end:
            for m in c.consume(1000, timeout=1):
                if m.error():
                    continue
                out.setdefault(m.key().decode(), []).append(int(m.value()))
                read_to = m.offset() + 1
    finally:
        c.close()
    return out


def counts_outcome(sent: dict, out: dict) -> dict:
    """The end-to-end check: per key, the input records written (``sent``) against the
    counts output: ``correct`` when every key's outputs are exactly 1..n once each;
    otherwise the keys short (a record not counted), with duplicates (counted twice or
    an update output twice: at_least_once after a crash) or off."""
    short = sorted(k for k, n in sent.items() if max(out.get(k, [0])) < n)
    over = sorted(k for k, n in sent.items() if max(out.get(k, [0])) > n)
    duplicated = sorted(k for k, vs in out.items() if len(vs) != len(set(vs)))
    gaps = sorted(k for k, vs in out.items() if set(vs) != set(range(1, max(vs) + 1)))
    return {"keys": len(sent), "records": sum(sent.values()), "outputs": sum(map(len, out.values())),
            "short": short[:10], "over": over[:10], "duplicated": duplicated[:10], "gaps": gaps[:10],
            "correct": not (short or over or duplicated or gaps) and set(out) == set(sent)}


@dataclass
class StreamsResult:
    scenario: str
    target: str
    situation: list
    reached: bool
    history: dict      # {instance: [{"t", "state", "active", "standby"}, ...]}
    counts: dict
    conform: dict
    rounds: list       # the real rounds (streams_model.real_rounds) from the scenario's event on
    start: dict        # {task: instance running it} in the last real round before the event
    model: dict        # {assignor: the model's rounds (streams_model.model_rounds)}
    figures: dict      # availability.__doc__
    seconds: float
    error: str | None = None

    @property
    def passed(self) -> bool:
        return (self.error is None and self.reached and self.counts.get("correct", False)
                and all(v["verdict"] == "conforms" for v in self.conform.values()))


def run_streams(s: StreamsScenario, target, directory: Path) -> StreamsResult:
    """Play ``s`` on ``target`` in ``directory``; judge it (module docstring)."""
    fresh(directory)
    started = time.monotonic()
    r = StreamsRun(s, target, directory)
    error, counts = None, {}
    try:
        s.script(r)
        counts = counts_outcome(r.feeder.sent, r.wait_counted())
    except Exception as e:  # a scenario that could not be played is reported, not raised
        error = f"{type(e).__name__}: {e}"
    finally:
        r.finish()
    who = _member_names(read(r.trace_path), instance_of)
    r.rounds = real_rounds(read(r.trace_path).records, r.app, who)
    try:
        claims = [{"claim": c, "held": bool(h)} for c, h in (s.situation(r) if s.situation else ())]
    except Exception as e:
        claims = [{"claim": f"the situation could be read ({type(e).__name__}: {e})", "held": False}]
    later = [x for x in r.rounds if x["t_ms"] >= r.marks.get("event", 0)]
    earlier = [x for x in r.rounds if x["t_ms"] < r.marks.get("event", 0)]
    last = earlier[-1]["members"] if earlier else {}
    start = {t: n for n, m in last.items() for t in m["active"]}
    settings = {**DEFAULTS, **s.settings}
    before = {n: (_mask(m["active"]), _mask(m["standby"])) for n, m in sorted(last.items())}
    model = {a: model_rounds(a, PARTITIONS, settings["num.standby.replicas"], settings["max.warmup.replicas"],
                             before, *s.model, leader_crash=r.crashed_leader)
             for a in ("high-availability", "streams")} if s.model and last else {}
    result = StreamsResult(s.name, target.name, claims, bool(claims) and all(c["held"] for c in claims),
                           {n: i.history for n, i in r.instances.items()}, counts,
                           {"coordinator": _verdict("coordinator", r.trace_path),
                            "members": _verdict("members", r.trace_path)},
                           later, start, model, availability(r, later), round(time.monotonic() - started, 1),
                           error)
    (directory / "result.json").write_text(json.dumps(dataclasses.asdict(result), indent=1))
    return result


def unavailability(run) -> dict:
    """``unavailable_ms``: the longest time from the event on that some task ran on no
    instance, by the instances' reports (every 200 ms; a stopped instance runs nothing
    from its stop), and ``tasks_unavailable``, how many tasks had such a time."""
    event = run.marks.get("event", 0)
    reports = sorted([(h["t"], n, set(h["active"])) for n, i in run.instances.items() for h in i.history]
                     + [(t, n, set()) for n, t in run.stopped_at.items()], key=lambda r: r[0])
    latest = {n: a for t, n, a in reports if t < event}
    down, longest = {}, {}
    for t, n, active in (r for r in reports if r[0] >= event):
        latest[n] = active
        running = set().union(*latest.values())
        for task in {x for r in reports for x in r[2]}:
            if task not in running:
                down.setdefault(task, t)
            elif task in down:
                longest[task] = max(longest.get(task, 0), t - down.pop(task))
    return {"unavailable_ms": max(longest.values()), "tasks_unavailable": len(longest)} if longest else {}


def _mask(tasks) -> int:
    """The model's task mask of Kafka task ids "0_i" (one subtopology)."""
    return sum(1 << int(t.split("_")[1]) for t in tasks)


def availability(run, rounds: list) -> dict:
    """Restore and unavailability, as the instances saw them: ``rounds`` and
    ``rounds_s``, how many rounds the scenario took and the seconds from the first
    after the event to the last (a newcomer warms up in between); ``probing_s``, from
    the round that set the leader's probing time (``next_rebalance_ms``; a round asking
    someone to rejoin at once keeps it) to the first round at or after that time, and
    ``probing_on_time`` when there is one; and ``unavailability``'s figures."""
    out: dict = {}
    if rounds:
        out["rounds"] = len(rounds)
        out["rounds_s"] = round((rounds[-1]["t_ms"] - rounds[0]["t_ms"]) / 1000, 1)
    pending = None  # (the round that set the leader's probing time, that time)
    for x in rounds:
        if pending and x["t_ms"] >= pending[1]:
            out["probing_s"] = round((x["t_ms"] - pending[0]["t_ms"]) / 1000, 1)
            out["probing_on_time"] = True
            break
        times = [ms for ms in x["next_rebalance_ms"].values() if 0 < ms < NO_REBALANCE_MS]
        pending = (x, times[0]) if times else (pending if any(
            ms == 0 for ms in x["next_rebalance_ms"].values()) else None)
    out.update(unavailability(run))
    return out


# --- the scenarios ------------------------------------------------------------------------
def _tasks_of(history: list, after_ms: float, kind: str) -> list:
    """The task sets of ``kind`` ("active" or "standby") an instance reported from ``after_ms`` on."""
    return [set(h[kind]) for h in history if h["t"] >= after_ms]


def _first_running(run, name: str):
    """Instance ``name``'s first report of itself RUNNING (its first assignment), or None."""
    return next((h for h in run.instances[name].history if h["state"] == "RUNNING"), None)


def _handover(run, predicate, what: str, timeout: float = 180) -> None:
    """The end of a scenario: wait for ``predicate(placement)`` (StreamsRun.wait), mark
    "handover", let the input flow 3 s more, stop it and mark "end"."""
    run.wait(predicate, what, timeout)
    run.mark("handover")
    time.sleep(3)
    run.feeder.stop()
    run.mark("end")


def _two_sharing(run) -> None:
    """The start of the scenarios from two instances: the backlog written, A and B share
    the tasks, each with its standbys of the other's, the input flowing; marks "event"."""
    run.feeder.count(BACKLOG)
    run.start("A")
    run.start("B")
    run.wait(lambda p: len(p["A"][0]) == len(p["B"][0]) == PARTITIONS // 2
             and p["A"][1] == p["B"][0] and p["B"][1] == p["A"][0], "A and B to share the tasks, with standbys")
    run.feeder.start()
    time.sleep(3)
    run.mark("event")


@streams_scenario("scale up from one instance to two: B warms up, the probing rebalance hands tasks over",
                  model=(["B"], []))
def scale_up(run):
    run.feeder.count(BACKLOG)
    run.start("A")
    run.wait(lambda p: len(p["A"][0]) == PARTITIONS, "A to run every task")
    run.feeder.start()
    run.mark("event")
    run.start("B")
    # the probing rebalance comes probing.rebalance.interval.ms (60 s) after B's first assignment
    _handover(run, lambda p: len(p["A"][0]) == len(p["B"][0]) == PARTITIONS // 2, "the handover", timeout=240)


@scale_up.situation
def _(run):
    a = run.instances["A"].history
    event, handover = run.marks["event"], run.marks.get("handover")
    b_first = _first_running(run, "B")
    yield "B's first assignment: no active task, a standby (warming up) of each of A's", \
        b_first is not None and not b_first["active"] and len(b_first["standby"]) == PARTITIONS
    yield "A kept every active task until the handover", handover is not None and all(
        len(h["active"]) == PARTITIONS for h in a if event <= h["t"] < handover - 5000 and h["state"] == "RUNNING")
    yield "the probing rebalance (at least 60 s after B joined) handed half the tasks to B", handover is not None \
        and handover - event >= 60_000 and len(run.instances["B"].tasks()[0]) == PARTITIONS // 2
    yield "after it each task has its standby on the other instance", handover is not None and \
        run.instances["A"].tasks()[1] == run.instances["B"].tasks()[0] and \
        run.instances["B"].tasks()[1] == run.instances["A"].tasks()[0]
    figures = availability(run, [x for x in run.rounds if x["t_ms"] >= event])
    yield "the leader rejoined for the probing rebalance at or after the time its AssignmentInfo named", \
        figures.get("probing_on_time", False)


@streams_scenario("scale down from two instances to one: B leaves, A takes its tasks from its standbys",
                  model=([], ["B"]),
                  **{"leave.group.on.close": "true"})
def scale_down(run):
    _two_sharing(run)
    run.stop("B")
    _handover(run, lambda p: len(p["A"][0]) == PARTITIONS, "A to run every task")


@scale_down.situation
def _(run):
    a, event = run.instances["A"].history, run.marks["event"]
    handover = run.marks.get("handover")
    yield "B left with a LeaveGroup", any(r.get("api") == "LeaveGroup" for _, r in read(run.trace_path).records)
    yield "A ran every task within 10 s (its standbys were caught up: no warmup, no probing rebalance)", \
        handover is not None and handover - event < 10_000
    yield "A kept its own tasks throughout", all(
        {"0_0", "0_1", "0_2"} <= set(h["active"]) or {"0_3", "0_4", "0_5"} <= set(h["active"])
        for h in a if h["t"] >= event and h["state"] == "RUNNING")


@streams_scenario("scale up from two instances to three: C warms up (warmups beyond the standbys), the probing "
                  "rebalance hands it tasks", model=(["C"], []))
def scale_up_to_three(run):
    _two_sharing(run)
    run.start("C")
    _handover(run, lambda p: all(len(p[n][0]) == PARTITIONS // 3 for n in "ABC"), "the handover", timeout=240)


@scale_up_to_three.situation
def _(run):
    event, handover = run.marks["event"], run.marks.get("handover")
    at = next((i for i, x in enumerate(run.rounds) if x["t_ms"] >= event and "C" in x["members"]), None)
    first = run.rounds[at] if at is not None else None
    # a task withheld for its revocation stays a standby of its old owner (StreamsPartitionAssignor
    # .buildStandbyTaskMap): the warmups are the replicas beyond those and one standby per task
    ran = {t for m in run.rounds[at - 1]["members"].values() for t in m["active"]} if at else set()
    withheld = ran - {t for m in first["members"].values() for t in m["active"]} if first else set()
    warmups = sum(len(m["standby"]) for m in first["members"].values()) - len(withheld) - PARTITIONS if first else 0
    yield "C's first assignment: no active task, replicas of tasks it will take", \
        first is not None and not first["members"]["C"]["active"] and bool(first["members"]["C"]["standby"])
    yield f"{warmups} warmups in that round (replicas beyond one standby per task and the withheld tasks')", \
        warmups > 0
    yield "the probing rebalance (at least 60 s after C joined) handed C two tasks", handover is not None \
        and handover - event >= 60_000
    figures = availability(run, [x for x in run.rounds if x["t_ms"] >= event])
    yield "the leader rejoined for the probing rebalance at or after the time its AssignmentInfo named", \
        figures.get("probing_on_time", False)


@streams_scenario("a host swap: B's host is replaced by a new one, C, without state: B leaves and C starts at "
                  "once; A runs B's tasks from its standbys while C warms up, and the probing rebalance hands C "
                  "its share", model=(["C"], ["B"]), **{"leave.group.on.close": "true"})
def host_swap(run):
    _two_sharing(run)
    run.stop("B")
    run.start("C")
    _handover(run, lambda p: len(p["A"][0]) == len(p["C"][0]) == PARTITIONS // 2, "the handover to C", timeout=240)


@host_swap.situation
def _(run):
    a = run.instances["A"].history
    event, handover = run.marks["event"], run.marks.get("handover")
    c_first = _first_running(run, "C")
    yield "B left with a LeaveGroup", any(r.get("api") == "LeaveGroup" for _, r in read(run.trace_path).records)
    yield "A ran every task once B had left (its standbys of B's tasks were caught up)", any(
        len(h["active"]) == PARTITIONS for h in a if h["t"] >= event and h["state"] == "RUNNING")
    yield "C's first assignment: no active task, replicas (warming up)", \
        c_first is not None and not c_first["active"] and bool(c_first["standby"])
    yield "the probing rebalance (at least 60 s after B left) handed C half the tasks", handover is not None \
        and handover - event >= 60_000
    figures = availability(run, [x for x in run.rounds if x["t_ms"] >= event])
    yield "the leader rejoined for the probing rebalance at or after the time its AssignmentInfo named", \
        figures.get("probing_on_time", False)


@streams_scenario("a leader crash during scaling: C joins A and B and warms up; before the probing rebalance the "
                  "group's leader is killed (kill -9, no LeaveGroup), its session (6 s) expires, and the next "
                  "leader finishes the scaling on the two that are left", model=(["C"], []))
def leader_crash(run):
    _two_sharing(run)
    run.start("C")
    run.wait(lambda p: not p["C"][0] and p["C"][1], "C to warm up")
    time.sleep(3)  # the rounds after the join settle (a task withheld for its revocation moves at once)
    # the input pauses long enough for every record to be processed and committed (commit.interval.ms 1 s): the
    # crash replays nothing, so at_least_once still counts each record once and the counts stay exact
    run.feeder.stop()
    time.sleep(4)
    run.mark("crash")
    leader = run.crash_leader()
    run.feeder.start()
    survivors = [n for n in "ABC" if n != leader]
    _handover(run, lambda p: all(len(p[n][0]) == PARTITIONS // 2 for n in survivors),
              "the scaling to end on the two left", timeout=300)


@leader_crash.situation
def _(run):
    event, crash, handover = run.marks["event"], run.marks.get("crash"), run.marks.get("handover")
    c_first = _first_running(run, "C")
    trace = read(run.trace_path)
    who = _member_names(trace, instance_of)
    leaders = [(r["t_ms"], who.get(r["body"]["leader"])) for _, r in trace.records if r["type"] == "response"
               and r.get("api") == "JoinGroup" and r["body"]["error"] == "NONE"]
    yield "C's first assignment: no active task, replicas (warming up)", \
        c_first is not None and not c_first["active"] and bool(c_first["standby"])
    probing = [ms for x in run.rounds if event <= x["t_ms"] for ms in x["next_rebalance_ms"].values()
               if 0 < ms < NO_REBALANCE_MS]
    yield f"the leader ({run.crashed_leader}) crashed during the scaling: after C's first assignment, before the " \
        "probing rebalance the leader's AssignmentInfo named", crash is not None and c_first is not None \
        and c_first["t"] < crash < min(probing, default=0)
    yield "the crashed leader sent no LeaveGroup", not any(r.get("api") == "LeaveGroup" for _, r in trace.records)
    yield "after the crash another instance led the group", any(
        t > crash and name not in (None, run.crashed_leader) for t, name in leaders) if crash else False
    yield "the two left ran three tasks each in the end", handover is not None
