"""Running one catalogue scenario on one target, and judging it.

A ``Scenario`` is a script of client actions (``Run``'s methods: start agents, wait
for balance, close, kill -9, SIGSTOP/SIGCONT, admin requests, a broker restart) and a
``situation``: the claims, read off the recorded trace (facts.Facts), that show the
scenario reached what it is about (the session timeout fired, the delay ran, the
static member came back in time). A scenario whose situation was not reached is a
failed scenario, never a pass.

``run(scenario, variant, target, directory)`` plays it through a recording proxy,
then judges: the situation's claims; ``rebalance conform --side coordinator`` on the
trace; ``rebalance conform --side clients`` on the agents' observed log
(spec/OBSERVED.md); and, for the record, ``--side members`` (the clients' requests held
to the model's member: a client's departure, not the broker's; it does not fail a run; a
clients-side divergence that one of the client's recorded departures explains, from the
member side, does not either: tests/test_findings.py OVERLAPS). It returns a ``Result`` (also written as ``result.json`` in
``directory``) with the observable outcome (facts.Facts.outcome).
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from interop.harness import REBALANCE, Group, wait_for
from rebalance.impl.member import Wire
from rebalance.impl.observed import now_ms
from rebalance.impl.wire import Api

from test_findings import overlap_as_recorded

from .facts import Facts
from .targets import fresh

SESSION_MS = 4000  # the agents' session.timeout.ms unless a scenario says otherwise
_serial = itertools.count(1)


@dataclass(frozen=True)
class Variant:
    """One path through a scenario: the client (an agent kind of tests/interop), its
    partition.assignment.strategy (under the consumer protocol the server assignor it asks
    for, group.remote.assignor: the Java consumer's; librdkafka asks for none and gets the
    broker's default, uniform), static membership (group.instance.id i-NAME), its
    group.protocol (``classic``, or ``consumer``: KIP-848), and the broker settings it needs
    besides the scenario's (``((Kafka name, value), ...)``: KIP-848's are the broker's)."""

    client: str = "confluent"
    strategy: str = "cooperative-sticky"
    static: bool = False
    protocol: str = "classic"
    settings: tuple = ()

    @property
    def key(self) -> str:
        return "-".join([self.client, *([self.protocol] if self.protocol != "classic" else []), self.strategy,
                         *(["static"] if self.static else [])])


@dataclass
class Scenario:
    """``script(run)`` plays it; ``situation(run, facts)`` yields (claim, held) pairs;
    ``kip848_situation`` the same for its KIP-848 variants (group.protocol=consumer, judged
    from heartbeats: kip848.py). ``settings``: the broker's group settings (Kafka's names);
    ``departures``: {target name: the SPEC departure or finding that explains a conform
    divergence there}."""

    name: str
    title: str
    script: Callable
    variants: tuple = (Variant(),)
    partitions: int = 6
    settings: dict = field(default_factory=dict)
    situation: Callable | None = None
    departures: dict = field(default_factory=dict)
    kip848_situation: Callable | None = None


CATALOGUE: dict = {}


def settings_of(s: Scenario, variant: Variant) -> dict:
    """The broker settings a scenario's variant runs under: the scenario's, then the variant's."""
    return {**s.settings, **dict(variant.settings)}


def scenario(title: str, variants=(Variant(),), partitions: int = 6, settings=None, departures=None,
             registry=None, kip848=None):
    """Register the decorated script as a scenario of ``registry`` (default the
    conformance ``CATALOGUE``); give its situation with ``@<script>.situation``, its KIP-848
    variants' as ``kip848``."""
    return registrar(CATALOGUE if registry is None else registry, lambda script: Scenario(
        script.__name__, title, script, tuple(variants), partitions, dict(settings or {}),
        departures=dict(departures or {}), kip848_situation=kip848))


def registrar(registry: dict, make):
    """A decorator registering ``make(script)`` (a scenario with a ``name`` and a
    ``situation``) in ``registry``, its situation given with ``@<script>.situation``."""
    def register(script):
        s = make(script)
        registry[s.name] = s

        def situation(fn):
            s.situation = fn
            return fn
        script.situation = situation
        return script
    return register


class _View:
    """What interop.harness.Group needs of a server: the port clients connect to and a folder."""

    def __init__(self, port: int, tmp: Path):
        self.port, self.tmp = port, tmp


class Run:
    """One scenario being played on one target. ``group`` and ``topic``: fresh names."""

    def __init__(self, s: Scenario, variant: Variant, target, directory: Path):
        self.scenario, self.variant, self.target, self.directory = s, variant, target, directory
        self.group = self.topic = f"{s.name}-{variant.key}-{next(_serial)}"
        target.create_topic(self.topic, s.partitions)
        self.trace_path = directory / "trace.jsonl"
        self.proxy = target.record(self.trace_path)
        self.bootstrap = f"127.0.0.1:{self.proxy.port}"
        self.clients = Group(_View(self.proxy.port, directory), self.group, self.topic, s.partitions)
        self.marks: dict = {}

    # --- actions ----------------------------------------------------------------------
    def start(self, name: str, session_ms: int = SESSION_MS, max_poll_ms: int | None = None,
              instance_id: str | None = None, strategy: str | None = None):
        """Start agent ``name`` (the variant's client; static: group.instance.id i-NAME)."""
        v = self.variant
        args = ("--max-poll-ms", max_poll_ms) if max_poll_ms else ()
        if v.protocol != "classic":
            args += ("--group-protocol", v.protocol)
        return self.clients.start(v.client, name, instance_id or (f"i-{name}" if v.static else None), session_ms,
                                  strategy or v.strategy, args)

    def mark(self, label: str) -> float:
        """Note the wall-clock ms of a moment the situation or the outcome refers to."""
        self.marks[label] = now_ms()
        return self.marks[label]

    def wait_balanced(self, names=None, timeout: float = 60) -> dict:
        """Wait until ``names`` (default: every running agent) own every partition once,
        loads within one, with no callback for 1.5 s; returns {member: partitions}."""
        names = list(self.clients.members) if names is None else list(names)
        self.wait(lambda: self.clients.balanced_among(names), f"{names} to balance; owned {self.clients.owned()}",
                  timeout)
        return self.clients.owned()

    def wait(self, predicate, what: str, timeout: float = 60):
        """``wait_for`` that gives up at once when an agent exited by itself (a client that
        could not start, or died: neither closed nor killed by the script)."""
        def ready():
            dead = {n: p.returncode for n, p in self.clients.members.items() if p.poll() is not None}
            if dead:
                raise RuntimeError(f"agents exited by themselves: {dead}")
            return predicate()
        return wait_for(ready, timeout, what)

    def facts(self) -> Facts:
        """The trace recorded so far (the proxy writes a line per record)."""
        return Facts(self.trace_path, self.group)

    def close(self, name: str) -> None:
        self.clients.close(name)

    def kill9(self, name: str) -> None:
        self.clients.kill9(name)

    def pause(self, name: str) -> None:
        self.clients.pause(name)

    def resume(self, name: str) -> float:
        return self.clients.resume(name)

    def tell(self, name: str, command: str) -> None:
        self.clients.tell(name, command)

    def _admin(self, api: int, version: int, client_id: str = "admin", **fields):
        """One request to the group's coordinator (FindCoordinator first), through the
        proxy, as an admin client sends it; returns the response."""
        async def go():
            wire = await Wire.open("127.0.0.1", self.proxy.port, client_id)
            try:
                found = await wire.call(Api.FIND_COORDINATOR, 3, key=self.group, key_type=0)
            finally:
                wire.close()
            wire = await Wire.open(found.host, found.port, client_id)
            try:
                return await wire.call(api, version, **fields)
            finally:
                wire.close()
        return asyncio.run(go())

    def remove_members(self, instance_ids) -> None:
        """The admin API's removeMembersFromConsumerGroup (KIP-345): one LeaveGroup v3
        naming each group.instance.id with an empty member.id."""
        self._admin(Api.LEAVE_GROUP, 3, group_id=self.group,
                    members=[{"member_id": "", "group_instance_id": i} for i in instance_ids])

    def delete_group(self) -> str:
        """The admin API's deleteConsumerGroups: DeleteGroups v2 of this group; its error name."""
        r = self._admin(Api.DELETE_GROUPS, 2, groups_names=[self.group])
        return r.results[0].error_code.name.upper()

    def restart_broker(self, crash: bool = True) -> None:
        """Restart the broker (kill -9 when ``crash``), recorded as a ``restart`` record
        in which it loaded this scenario's group (R37)."""
        self.target.stop(crash)
        self.proxy.restarted([self.group])  # before clients reconnect: nothing reaches a dead broker
        self.target.start()

    def commit_as(self, member_id: str, generation: int, partition: int, offset: int, client_id: str) -> str:
        """An OffsetCommit (v7) of ``partition`` at ``offset`` under ``member_id`` and
        ``generation``, as a client that kept a stale identity would send it: returns the
        partition's error name."""
        r = self._admin(Api.OFFSET_COMMIT, 7, client_id, group_id=self.group, generation_id_or_member_epoch=generation,
                        member_id=member_id, group_instance_id=None, topics=[
                            {"name": self.topic, "partitions": [{"partition_index": partition,
                                                                 "committed_offset": offset,
                                                                 "committed_leader_epoch": -1,
                                                                 "committed_metadata": ""}]}])
        return r.topics[0].partitions[0].error_code.name.upper()

    def join_as(self, member_id: str, client_id: str, version: int = 5):
        """A JoinGroup under ``member_id`` (a stale identity), answered at once when the
        coordinator refuses it: returns (error name, the member.id it echoes)."""
        r = self._admin(Api.JOIN_GROUP, version, client_id, group_id=self.group, session_timeout=10_000,
                        rebalance_timeout=10_000, member_id=member_id, group_instance_id=None,
                        protocol_type="consumer", protocols=[{"name": self.variant.strategy, "metadata": b""}])
        return r.error_code.name.upper(), r.member_id

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def finish(self) -> None:
        self.clients.stop_all()
        self.proxy.close()


@dataclass
class Result:
    scenario: str
    variant: str
    target: str
    situation: list  # [{"claim", "held"}]
    reached: bool
    outcome: dict
    conform: dict  # {"coordinator": {...}, "clients": {...}}
    departure: str | None
    seconds: float
    error: str | None = None
    clients_departure: str | None = None  # the client's recorded departure behind a clients-side divergence

    @property
    def passed(self) -> bool:
        """The situation was reached, and each side conforms or diverges only where a
        documented departure says it does."""
        if self.error or not self.reached:
            return False
        ok = self.conform["clients"]["verdict"] == "conforms" or self.clients_departure is not None
        coordinator = self.conform["coordinator"]["verdict"]
        return ok and (coordinator == "conforms" or (coordinator == "divergent" and self.departure is not None))


CONFORM_TIMEOUT_S = 300


def _verdict(side: str, path: Path) -> dict:
    """``rebalance conform --side SIDE`` on ``path``, as the result's entry; a conform that
    runs past CONFORM_TIMEOUT_S or prints no JSON is this run's "error" verdict, not the
    end of the whole catalogue."""
    try:
        p = subprocess.run([str(REBALANCE), "conform", "--side", side, str(path), "--json", "--out",
                            str(path.parent / "out")], capture_output=True, text=True, timeout=CONFORM_TIMEOUT_S)
        code, v = p.returncode, json.loads(p.stdout)
    except subprocess.TimeoutExpired:
        code, v = None, {"error": {"message": f"conform ran past {CONFORM_TIMEOUT_S} s"}}
    except json.JSONDecodeError:
        code, v = p.returncode, {"error": {"message": f"conform printed no JSON: {p.stderr[-500:]}"}}
    d = v.get("divergence") or {}
    return {"verdict": v.get("verdict", "error"), "exit": code, "rule": d.get("rule"), "line": d.get("line"),
            "reason": d.get("reason") or (v.get("error") or {}).get("message"),
            "divergences": [{k: x.get(k) for k in ("side", "rule", "line", "reason", "record")}
                            for x in v.get("divergences") or ()]}


def clients_departure(client: str, conform: dict) -> str | None:
    """The recorded departure of ``client`` (tests/test_findings.py) that explains every
    clients-side divergence of a run, from its member side's divergences, or None."""
    clients = conform["clients"]
    if clients["verdict"] != "divergent" or not clients["divergences"]:
        return None
    names = {overlap_as_recorded(client, overlap, conform["members"]["divergences"])
             for overlap in clients["divergences"]}
    return names.pop() if len(names) == 1 and None not in names else None


def run(s: Scenario, variant: Variant, target, directory: Path) -> Result:
    """Play ``s`` as ``variant`` on ``target`` (targets.Target) in ``directory``; judge it."""
    fresh(directory)
    started = time.monotonic()
    try:
        r = Run(s, variant, target, directory)
    except Exception as e:  # the target could not take a scenario (a broker that died): a failed run
        return Result(s.name, variant.key, target.name, [], False, {}, {}, None, 0.0, f"{type(e).__name__}: {e}")
    error = None
    try:
        s.script(r)
    except Exception as e:  # a scenario that could not be played is reported, not raised
        error = f"{type(e).__name__}: {e}"
    finally:
        r.finish()
    if r.proxy.failure and error is None:  # the trace stops there: nothing after it can be judged
        error = f"RecorderStopped: a response Kafka's schema does not read ({r.proxy.failure})"
    facts = r.facts()
    outcome = {**facts.outcome(), "latency_ms": facts.settled_ms(max(r.marks.values())) if r.marks else None}
    situation = s.kip848_situation if variant.protocol == "consumer" else s.situation
    try:
        claims = [{"claim": claim, "held": bool(held)} for claim, held in (situation(r, facts) if situation else ())]
    except Exception as e:  # a script that stopped early leaves marks unset
        claims = [{"claim": f"the situation could be read off the trace ({type(e).__name__}: {e})", "held": False}]
    conform = {"coordinator": _verdict("coordinator", r.trace_path), "clients": _verdict("clients", r.clients.observed),
               "members": _verdict("members", r.trace_path)}
    result = Result(s.name, variant.key, target.name, claims, bool(claims) and all(c["held"] for c in claims),
                    outcome, conform, s.departures.get(target.name), round(time.monotonic() - started, 1), error,
                    clients_departure(variant.client, conform))
    (directory / "result.json").write_text(json.dumps(dataclasses.asdict(result), indent=1))
    return result
