"""Kafka Connect 4.4.0 on a target (``rebalance serve`` or the real broker), behind the
recording proxy: three distributed workers (rebalance.oracle.connect.ConnectWorker) run
the oracle's SequenceSourceConnector with eight tasks, and each scenario moves workers
and connectors (docs/connect.md).

``ConnectRun`` plays a scenario: workers W1, W2, ... (client.id ``connect-W1``, ...), the
connector ``seq`` writing to the run's topic, REST calls through any live worker, waits
on Connect's own view (``GET /connectors/NAME/status``). ``run_connect(scenario, target,
directory)`` plays it and judges it: the situation's claims (read off the trace's rounds,
checker/conform/connect.py ``rounds``), ``rebalance conform`` on both sides of the trace
(coordinator; members: the Connect rules), the records the tasks wrote (every task's
sequence without a gap, each task writing again after the last event: none lost, with
each task's longest silence), and the model's prediction (``connect_model.py``: the rounds
before and after the scenario's event replayed on ``--protocol deferred``, as seed 000
and as Connect, ``--mutation connect-leader-state``).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rebalance.checker.conform.connect import Round, names, rounds
from rebalance.checker.conform.trace import read
from rebalance.impl.observed import now_ms
from rebalance.oracle.connect import ConnectError, ConnectWorker, sequence_connector

from .runner import _verdict, registrar
from .targets import fresh

TASKS = 8
CONNECTOR = "seq"
# scheduled.rebalance.max.delay.ms: above a worker's restart (its JVM and its join: 5-8 s on a loaded 2-core
# machine), so that a bounce can come back within it; Kafka's default is 5 minutes, 0 switches it off
DELAY_MS = 12_000
SETTINGS = {"scheduled.rebalance.max.delay.ms": DELAY_MS}
_serial = itertools.count(1)


@dataclass
class ConnectScenario:
    """``script(run)`` plays it; ``situation(run, rounds)`` yields (claim, held) pairs
    about the rounds after the mark ``event``; ``model``: the replay's events from the
    mark ``model_from`` on ([(action, worker, timers)], worker "leader" for the leader
    at the mark; for ``delete-connector`` the connector's name), or None when the model
    cannot state the scenario."""

    name: str
    title: str
    script: Callable
    situation: Callable | None = None
    model: tuple | None = None
    departures: dict = field(default_factory=dict)
    model_from: str = "event"


CONNECT: dict = {}


def connect_scenario(title: str, model=None, model_from: str = "event"):
    """Register the decorated script as a Connect scenario; ``model``: its replay events
    from the mark ``model_from``."""
    return registrar(CONNECT, lambda script: ConnectScenario(script.__name__, title, script,
                                                             model=tuple(model) if model is not None else None,
                                                             model_from=model_from))


class ConnectRun:
    """One Connect scenario on one target: its group, topic, proxy and workers."""

    def __init__(self, s: ConnectScenario, target, directory: Path):
        self.scenario, self.target, self.directory = s, target, directory
        self.group = f"connect-{s.name}-{next(_serial)}"
        self.topic = f"{self.group}-out"
        target.create_topic(self.topic, 1)
        self.trace_path = directory / "trace.jsonl"
        self.proxy = target.record(self.trace_path)
        self.bootstrap = f"127.0.0.1:{self.proxy.port}"
        self.workers: dict = {}
        self.stopped: set = set()
        self.marks: dict = {}
        self.connectors: dict = {}  # name -> tasks

    # --- actions ----------------------------------------------------------------------
    def start(self, name: str) -> ConnectWorker:
        """Start worker ``name`` (again, after a stop: a new process, same REST port)."""
        if name in self.workers and name in self.stopped:
            self.workers[name].start()
        else:
            self.workers[name] = ConnectWorker(name, self.bootstrap, self.group, self.directory / "workers", SETTINGS)
        self.stopped.discard(name)
        return self.workers[name]

    def stop(self, name: str) -> None:
        """A clean shutdown: the worker stops its tasks and leaves the group (LeaveGroup)."""
        self.workers[name].stop()
        self.stopped.add(name)

    def kill9(self, name: str) -> None:
        self.workers[name].kill9()
        self.stopped.add(name)

    def live(self) -> list:
        return [n for n in self.workers if n not in self.stopped]

    def _any(self) -> ConnectWorker:
        return self.workers[self.live()[0]]

    def create(self, connector: str = CONNECTOR, tasks: int = TASKS) -> None:
        self.connectors[connector] = tasks
        self._retry(lambda: self._any().create(connector, sequence_connector(self.topic, tasks)))

    def delete(self, connector: str) -> None:
        self.connectors.pop(connector)
        self._retry(lambda: self._any().delete(connector))

    def _retry(self, call, timeout: float = 60):
        """A REST call retried while the cluster rebalances (409) or a request is
        forwarded to a leader not known yet."""
        end = time.monotonic() + timeout
        while True:
            try:
                return call()
            except ConnectError as e:
                if e.status not in (409, 500, 503) or time.monotonic() > end:
                    raise
            time.sleep(0.5)

    def mark(self, label: str) -> float:
        self.marks[label] = now_ms()
        return self.marks[label]

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def placement(self) -> dict:
        """{worker name: sorted resources it runs} from Connect's REST status of every
        connector (RUNNING only), a connector as its name, a task as NAME-i."""
        ports = {w.port: n for n, w in self.workers.items()}
        out: dict = {n: [] for n in self.live()}
        for connector in self.connectors:
            try:
                s = self._any().status(connector)
            except (ConnectError, OSError):
                return {}
            items = [(connector, s["connector"])] + [(f"{connector}-{t['id']}", t) for t in s["tasks"]]
            for label, st in items:
                if st["state"] != "RUNNING":
                    continue
                port = int(st["worker_id"].rsplit(":", 1)[1])
                out.setdefault(ports.get(port, st["worker_id"]), []).append(label)
        return {n: sorted(rs) for n, rs in out.items()}

    def balanced(self) -> bool:
        """Every connector and task RUNNING on a live worker, once; loads within one
        per kind (connectors, tasks) over the live workers; and so says the group: the
        last round (the trace's) has every live worker, no delay, and leaves every
        connector and task running once (Connect's status topic lags behind a
        rebalance: a stopped task may still read RUNNING)."""
        trace = read(self.trace_path)
        last = (rounds(trace.records, self.group) or [None])[-1]
        want = set(self.connectors) | {f"{c}-{i}" for c, n in self.connectors.items() for i in range(n)}
        if last is None or max(last.delay.values(), default=0) > 0 or any(last.revoked.values()):
            return False
        who = _member_names(trace)
        if sorted(who.get(m) for m in last.allocations) != sorted(self.live()):
            return False
        running = [names({x}).strip("[]") for rs in last.outcome().values() for x in rs]
        if sorted(running) != sorted(want):
            return False
        placed = self.placement()
        if not placed or set(placed) - set(self.live()):
            return False
        every = [r for rs in placed.values() for r in rs]
        if sorted(every) != sorted(want):
            return False
        for kind in (lambda r: r in self.connectors, lambda r: r not in self.connectors):
            loads = [sum(map(kind, placed.get(n, []))) for n in self.live()]
            if max(loads) - min(loads) > 1:
                return False
        return True

    def wait_balanced(self, timeout: float = 120) -> dict:
        """Wait until ``balanced`` holds twice, 1 s apart; returns the placement."""
        end = time.monotonic() + timeout
        streak = 0
        while time.monotonic() < end:
            dead = [n for n in self.live() if not self.workers[n].alive()]
            if dead:
                raise RuntimeError(f"workers exited by themselves: {dead}")
            streak = streak + 1 if self.balanced() else 0
            if streak >= 2:
                return self.placement()
            time.sleep(1)
        raise AssertionError(f"timed out after {timeout} s waiting for Connect to balance: {self.placement()}")

    def rounds(self) -> list:
        """The Connect rounds of this group in the trace so far."""
        return rounds(read(self.trace_path).records, self.group)

    def leader(self) -> str:
        """The worker that led the last round (by its client.id)."""
        trace = read(self.trace_path)
        last = rounds(trace.records, self.group)[-1]
        return _member_names(trace)[last.leader]

    def finish(self) -> None:
        for w in self.workers.values():
            w.close()
        self.proxy.close()


def _member_names(trace, name_of=lambda client_id: client_id.removeprefix("connect-")) -> dict:
    """{member.id: name} from the JoinGroup answers, ``name_of(client.id)`` (a worker's
    client.id is connect-NAME)."""
    client = {}
    for _, r in trace.records:
        if r["type"] == "request":
            client[(r["connection"], r["correlation_id"])] = r["client_id"]
    out = {}
    for _, r in trace.records:
        if r["type"] == "response" and r.get("api") == "JoinGroup" and r["body"]["error"] in ("NONE",
                                                                                           "MEMBER_ID_REQUIRED"):
            name = client.get((r["connection"], r["correlation_id"])) or "?"
            out[r["body"]["member_id"]] = name_of(name)
    return out


# --- the records the tasks wrote ------------------------------------------------------------
def task_records(bootstrap: str, topic: str) -> dict:
    """{task key: [(seq, timestamp ms), ...]} of everything in ``topic`` (one partition),
    read to its end with librdkafka (confluent-kafka) outside any group."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "records-reader", "enable.auto.commit": False})
    out: dict = {}
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        read_to = 0
        end = time.monotonic() + 60
        while read_to < high and time.monotonic() < end:
            for m in c.consume(500, timeout=1):
                if m.error():
                    continue
                out.setdefault(m.key().decode(), []).append((int(m.value()), m.timestamp()[1]))
                read_to = m.offset() + 1
    finally:
        c.close()
    return out


def records_outcome(records: dict, event_ms: float, end_ms: float, tasks: dict) -> dict:
    """What the tasks wrote: per task its highest sequence number, the numbers missing
    below it (a gap: records lost), whether it wrote after ``end_ms`` (it runs at the
    end), and its longest silence from ``event_ms`` on (ms between two records: how
    long the scenario stopped it); ``tasks``: {connector: task count}."""
    out = {}
    for connector, n in tasks.items():
        for i in range(n):
            key = f"{connector}-{i}"
            rs = sorted(records.get(key, ()), key=lambda r: r[1])
            seqs = {s for s, _ in rs}
            top = max(seqs, default=-1)
            times = [t for _, t in rs if t >= event_ms]
            out[key] = {"max": top, "missing": sorted(set(range(top + 1)) - seqs)[:10],
                        "runs_after": any(t > end_ms for _, t in rs),
                        "longest_silence_ms": max((b - a for a, b in zip(times, times[1:])), default=None)}
    return out


@dataclass
class ConnectResult:
    scenario: str
    target: str
    situation: list
    reached: bool
    rounds: list       # the rounds after the mark, as text
    records: dict
    none_lost: bool
    conform: dict
    model: dict | None
    seconds: float
    error: str | None = None

    @property
    def passed(self) -> bool:
        return (self.error is None and self.reached and self.none_lost
                and all(v["verdict"] == "conforms" for v in self.conform.values()))


def round_text(r: Round, who: dict) -> str:
    """One round as the table shows it: what each worker starts and stops, the delay."""
    parts = []
    for m in sorted(r.assigned, key=lambda m: who.get(m, m)):
        started, stopped = r.assigned[m], r.revoked.get(m, set())
        if started or stopped:
            parts.append(f"{who.get(m, m)}" + (f" +{names(started)}" if started else "")
                         + (f" −{names(stopped)}" if stopped else ""))
    delay = max(r.delay.values(), default=0)
    return f"g{r.generation}: " + ("; ".join(parts) or "nothing moves") + (f"; delay {delay} ms" if delay else "")


def run_connect(s: ConnectScenario, target, directory: Path) -> ConnectResult:
    """Play ``s`` on ``target`` in ``directory``; judge it (module docstring)."""
    from .connect_model import predict

    fresh(directory)
    started = time.monotonic()
    r = ConnectRun(s, target, directory)
    error = None
    try:
        s.script(r)
        records = task_records(f"{target.upstream[0]}:{target.upstream[1]}", r.topic)
    except Exception as e:  # a scenario that could not be played is reported, not raised
        error = f"{type(e).__name__}: {e}"
        records = {}
    finally:
        r.finish()
    trace = read(r.trace_path)
    who = _member_names(trace)
    everything = rounds(trace.records, r.group)
    after = r.marks.get("event", 0)
    later = [x for x in everything if x.t_ms >= after]
    try:
        claims = [{"claim": c, "held": bool(h)} for c, h in (s.situation(r, later, who) if s.situation else ())]
    except Exception as e:
        claims = [{"claim": f"the situation could be read off the trace ({type(e).__name__}: {e})", "held": False}]
    outcome = records_outcome(records, after, r.marks.get("end", after), r.connectors or {CONNECTOR: TASKS})
    none_lost = bool(outcome) and all(not o["missing"] and o["runs_after"] for o in outcome.values())
    model = None
    if s.model is not None and error is None:
        start = r.marks.get(s.model_from, after)
        model = predict(s, [x for x in everything if x.t_ms < start], [x for x in everything if x.t_ms >= start],
                        who, r)
    result = ConnectResult(s.name, target.name, claims, bool(claims) and all(c["held"] for c in claims),
                           [round_text(x, who) for x in later], outcome, none_lost,
                           {"coordinator": _verdict("coordinator", r.trace_path),
                            "members": _verdict("members", r.trace_path)},
                           model, round(time.monotonic() - started, 1), error)
    (directory / "result.json").write_text(json.dumps(dataclasses.asdict(result), indent=1))
    return result


# --- the scenarios ------------------------------------------------------------------------
def _setup(run, workers=("W1", "W2", "W3")):
    for name in workers:
        run.start(name)
    run.create()
    run.wait_balanced()


def _end(run):
    run.wait_balanced()
    run.sleep(3)  # every task writes again after the last rebalance
    run.mark("end")
    run.sleep(2)


@connect_scenario("a fourth worker joins three that run the connector and its 8 tasks",
                  model=[("join", "W4", True)])
def worker_joins(run):
    _setup(run)
    run.mark("event")
    run.start("W4")
    _end(run)


@worker_joins.situation
def _(run, later, who):
    yield "W4 took part in a round after it started", any("W4" in {who.get(m) for m in r.allocations} for r in later)
    yield "a round revoked tasks from the others for balance", any(any(r.revoked.values()) for r in later)


@connect_scenario("a worker leaves for good (a clean shutdown: LeaveGroup)", model=[("leave", "W3", True)])
def worker_leaves(run):
    _setup(run)
    run.mark("event")
    run.stop("W3")
    _end(run)


@worker_leaves.situation
def _(run, later, who):
    delayed = [r for r in later if max(r.delay.values(), default=0) > 0]
    yield "a round held W3's connectors and tasks back under scheduled.rebalance.max.delay.ms", bool(delayed)
    yield "they were reassigned once the delay passed", bool(delayed) and any(
        r.t_ms >= delayed[0].t_ms + DELAY_MS - 1000 and any(r.assigned.values()) for r in later)


@connect_scenario("a worker bounces: stopped and started again within scheduled.rebalance.max.delay.ms",
                  model=[("leave", "W3", False), ("join", "W3", True)])
def worker_bounces(run):
    _setup(run)
    run.mark("event")
    run.stop("W3")
    run.start("W3")
    _end(run)


def _held_and_back(later, who, worker: str) -> tuple:
    """(the first round that sent a delay, the first with ``worker`` in it), each or None."""
    delayed = [r for r in later if max(r.delay.values(), default=0) > 0]
    back = [r for r in later if worker in {who.get(m) for m in r.allocations}]
    return (delayed or [None])[0], (back or [None])[0]


@worker_bounces.situation
def _(run, later, who):
    delayed, back = _held_and_back(later, who, "W3")
    yield "a round held W3's work back under the delay", delayed is not None
    yield "W3 was back in a round before the delay passed", None not in (delayed, back) and \
        back.t_ms < delayed.t_ms + DELAY_MS


@connect_scenario("a worker bounces beyond scheduled.rebalance.max.delay.ms: its work is reassigned first",
                  model=[("leave", "W3", True), ("join", "W3", True)])
def worker_bounces_beyond_delay(run):
    _setup(run)
    run.mark("event")
    run.stop("W3")
    run.wait_balanced()  # W1 and W2 took W3's work after the delay
    run.start("W3")
    _end(run)


@worker_bounces_beyond_delay.situation
def _(run, later, who):
    delayed, back = _held_and_back(later, who, "W3")
    yield "a round held W3's work back under the delay", delayed is not None
    yield "W3 came back after the delay passed", None not in (delayed, back) and \
        back.t_ms >= delayed.t_ms + DELAY_MS - 1000


@connect_scenario("the leader leaves for good", model=[("leave", "leader", True)])
def leader_leaves(run):
    _setup(run)
    run.mark("event")
    run.leader_at_event = run.leader()
    run.stop(run.leader_at_event)
    _end(run)


@leader_leaves.situation
def _(run, later, who):
    yield f"the leader ({run.leader_at_event}) left and another worker led the next round", bool(later) and \
        who.get(later[0].leader) != run.leader_at_event


@connect_scenario("the leader bounces: stopped and started again within scheduled.rebalance.max.delay.ms",
                  model=[("leave", "leader", False), ("join", "leader", True)])
def leader_bounces(run):
    _setup(run)
    run.mark("event")
    run.leader_at_event = run.leader()
    run.stop(run.leader_at_event)
    run.start(run.leader_at_event)
    _end(run)


@leader_bounces.situation
def _(run, later, who):
    back = [r for r in later if run.leader_at_event in {who.get(m) for m in r.allocations}]
    yield f"another worker led while {run.leader_at_event} was away", bool(later) and \
        who.get(later[0].leader) != run.leader_at_event
    yield f"{run.leader_at_event} came back", bool(back)


@connect_scenario("a second connector (4 tasks) is added, then deleted (the model from the deletion on: R81)",
                  model=[("delete-connector", "seq2", True)], model_from="delete")
def connector_added_and_deleted(run):
    _setup(run)
    run.mark("event")
    run.create("seq2", 4)
    run.wait_balanced()
    run.mark("delete")
    run.delete("seq2")
    _end(run)


@connector_added_and_deleted.situation
def _(run, later, who):
    added = [r for r in later if any(c == "seq2" for a in r.assigned.values() for c, _ in a)]
    deleted = [r for r in later if r.t_ms >= run.marks["delete"]
               and any(c == "seq2" for a in r.revoked.values() for c, _ in a)]
    yield "a round assigned seq2 and its tasks at once (no delay)", bool(added) and \
        max(added[0].delay.values(), default=0) == 0
    yield "after the deletion a round revoked seq2 and its tasks from their workers", bool(deleted)
    yield "and none of them was assigned again", not [r for r in later if r.t_ms >= run.marks["delete"] and any(
        c == "seq2" for a in r.assigned.values() for c, _ in a)]
