"""The member side of ``rebalance conform`` for Kafka Connect groups (protocol type
``connect``): each worker's JoinGroups and the leader's assignments held to the rules
of the deferred protocol (spec/SPEC.md 4b, 4c'), read off the decoded Connect protocol
(impl/connect_protocol.py, spec/TRACE.md).

A Connect worker's resources are its connectors and tasks (``(connector, task)``, task
-1 for the connector itself). A round is a generation whose leader sent assignments:
the leader's JoinGroupResponse lists each worker's *allocation* (what it runs, its
metadata's ``allocation``), its SyncGroup gives each worker what to start
(``assigned``), what to stop (``revoked``) and a ``delay``. What a worker runs after a
round is its allocation less what was revoked plus what was assigned
(WorkerCoordinator.onJoinComplete). Checked:

* R13: a worker's JoinGroup claims what it runs: on the connection it was given its
  assignment on, exactly what its last assignment left it (also after it lost its
  membership: a cooperative worker keeps its connectors and tasks until the leader
  revokes them, WorkerCoordinator.onJoinPrepare, unlike R15's consumer); a new process
  (a new connection without a member.id) claims nothing or part of it.
* R18: a worker is told to stop only what its allocation says it runs.
* R16: after the round no resource runs on two workers (duplicated allocations
  revoked from every holder: IncrementalCooperativeAssignor's ``duplicatedToRevoke``).
* R23: nothing is assigned that a worker of the round runs (revoke before assign).
* R33: a resource lost (run after the previous round, in no allocation now) is
  either assigned at once or held back under a delay > 0 sent to every worker; a
  delay already running keeps its deadline (a later round's delay ends no later
  than the first one did, plus the slack); held-back resources are given out by the
  first round after the deadline (plus the slack).
* R81: a resource leaves the group's work only when it is deleted, and a deletion is
  a write to Connect's config topic, so the leader's config offset (the assignment's
  ``config_offset``) has grown: what a round revokes is given out again by the next
  round (IncrementalCooperativeAssignor: a revoked resource is not in the previous
  assignment, so it is created anew), unless the offset grew between the round before
  the revocation and the next one; a lost resource neither assigned nor held back is
  deleted only at a round whose offset grew; a deleted connector takes its tasks with
  it (the configured tasks are those of the configured connectors); and a deleted
  resource comes back only at a higher offset (created again). The resources judged
  deleted are counted (figure ``deleted``).
Not checked here: when a worker rejoins for its delay (R32: it may rejoin earlier for
another reason, a revocation or a rebalance the coordinator started, which the trace
does not tell apart), balance and completeness (the configured connectors and tasks are
in Connect's config topic, not in the trace), which the Connect scenarios check from
Connect's REST API and the records the tasks write (tests/catalogue/connect.py).
"""
from __future__ import annotations

from typing import NamedTuple

from rebalance.impl.connect_protocol import CONNECTOR_TASK, PROTOCOL_TYPE

from .coordinator import DEFAULT_SLACK_MS
from .verdict import CONFORMS, DIVERGENT, INCOMPLETE, Divergence, Verdict, divergent, option


class Uninterpretable(Exception):
    """Connect protocol bytes that did not decode."""


class Worker(NamedTuple):
    """A worker process as the trace shows it: ``owned`` (what it runs after its last
    round), ``connection`` (where it was given it), ``client_id``."""

    owned: frozenset = frozenset()
    connection: str = ""
    client_id: str = ""


class Round(NamedTuple):
    """One generation's assignment: ``generation``, ``line`` and ``t_ms`` of the
    leader's SyncGroup, ``leader`` (member.id), ``allocations`` {member.id: set},
    ``assigned`` / ``revoked`` {member.id: set}, ``delay`` {member.id: ms},
    ``config_offset``: how far the leader had read Connect's config topic (-1: not said)."""

    generation: int
    line: int
    t_ms: float
    leader: str
    allocations: dict
    assigned: dict
    revoked: dict
    delay: dict
    config_offset: int = -1

    def outcome(self) -> dict:
        """{member.id: what it runs after the round}."""
        return {m: (a - self.revoked.get(m, set())) | self.assigned.get(m, set()) for m, a in self.allocations.items()}


def resources(entries) -> set:
    """The ``assigned`` or ``revoked`` JSON of a Connect assignment (spec/TRACE.md) as a
    set of ``(connector, task)``, task -1 for the connector itself."""
    return {(e["connector"], t) for e in entries for t in e["tasks"]}


def connect_groups(records) -> set:
    """The group ids whose JoinGroups name protocol type ``connect``."""
    return {r["body"]["group_id"] for _, r in records
            if r["type"] == "request" and r.get("api") == "JoinGroup" and r["body"]["protocol_type"] == PROTOCOL_TYPE}


def _allocation(metadata: dict) -> set:
    if "opaque" in metadata:
        raise Uninterpretable("the JoinGroup metadata is opaque bytes (not Connect's protocol)")
    a = metadata.get("allocation")
    return resources(a["assigned"]) if a else set()


def _assignment(a) -> tuple:
    """(assigned, revoked, delay) of a decoded SyncGroup assignment (None: nothing)."""
    if a is None:
        return set(), set(), 0
    if "opaque" in a:
        raise Uninterpretable("the SyncGroup assignment is opaque bytes (not Connect's protocol)")
    return resources(a["assigned"]), resources(a["revoked"]), a["delay"]


def _name(resource: tuple) -> str:
    connector, task = resource
    return connector if task == CONNECTOR_TASK else f"{connector}-{task}"


def names(resources_) -> str:
    """Resources as Connect prints them, sorted: ``[seq, seq-0, seq-3]``."""
    return "[" + ", ".join(sorted(map(_name, resources_))) + "]"


def rounds(records, group: str) -> list:
    """The rounds of ``group`` (Round), in the order their leaders sent them. Raises
    Uninterpretable for bytes that did not decode."""
    return list(_Walk(group).rounds(records))


class _Walk:
    """The records of one Connect group in order: the rounds as they complete."""

    def __init__(self, group: str):
        self.group = group
        self.requests: dict = {}  # (connection, correlation id) -> (line, request)
        self.members: dict = {}   # generation -> (leader, {member.id: allocation})

    def rounds(self, records):
        """Yields each Round at its leader's SyncGroup."""
        for line, rec in records:
            if rec["type"] not in ("request", "response") or rec.get("api") not in ("JoinGroup", "SyncGroup"):
                continue
            if rec["type"] == "request":
                if rec["body"]["group_id"] != self.group:
                    continue
                self.requests[(rec["connection"], rec["correlation_id"])] = (line, rec)
                if rec["api"] == "SyncGroup" and rec["body"]["assignments"]:
                    yield self._round(line, rec)
                continue
            q = self.requests.get((rec["connection"], rec["correlation_id"]))
            if q is None:
                continue
            body = rec["body"]
            if rec["api"] == "JoinGroup" and body["error"] == "NONE" and body["members"]:
                self.members[body["generation_id"]] = (
                    body["leader"], {m["member_id"]: _allocation(m["metadata"]) for m in body["members"]})

    def _round(self, line: int, rec: dict) -> Round:
        body = rec["body"]
        leader, allocations = self.members.get(body["generation_id"], (body["member_id"], {}))
        assigned, revoked, delay = {}, {}, {}
        for a in body["assignments"]:
            assigned[a["member_id"]], revoked[a["member_id"]], delay[a["member_id"]] = _assignment(a["assignment"])
        offset = max((a["assignment"].get("config_offset", -1) for a in body["assignments"] if a["assignment"]),
                     default=-1)
        return Round(body["generation_id"], line, rec["t_ms"], leader, allocations, assigned, revoked, delay, offset)


def check(trace, options=None, groups=None) -> Verdict:
    """Hold the Connect groups of ``trace`` (``groups``, default every one) to the
    rules above. ``options``: ``slack_ms`` (default 1000). Returns a Verdict
    (checker/conform/verdict.py): DIVERGENT with the first record a rule refuses,
    INCOMPLETE naming bytes that did not decode, CONFORMS otherwise."""
    slack = option(options, "slack_ms", DEFAULT_SLACK_MS)
    groups = connect_groups(trace.records) if groups is None else groups
    checker = _Checker(slack)
    for group in sorted(groups):
        divergence = checker.group(trace.records, group)
        if divergence is not None:
            return checker.verdict(DIVERGENT, divergence)
    return checker.verdict(INCOMPLETE if checker.uninterpreted else CONFORMS)


def combine(a: Verdict, b: Verdict) -> Verdict:
    """Two verdicts of one side on parts of a trace as one: their divergences by
    line, else INCOMPLETE if either is, else CONFORMS; rules, counts and figures summed."""
    rules, checked, figures = a.rules | b.rules, a.records_checked + b.records_checked, {**a.figures, **b.figures}
    divergences = [d for v in (a, b) if v.status == DIVERGENT for d in v.divergences]
    if divergences:
        return divergent(checked, rules, divergences, figures)
    status = INCOMPLETE if INCOMPLETE in (a.status, b.status) else CONFORMS
    return Verdict(status, checked, rules, None, a.uninterpreted + b.uninterpreted, figures)


class _Deferral(NamedTuple):
    """What the rounds so far leave owed: ``expected`` (run after the last round, or
    held back), ``held`` {resource: the deadline it is held back until}, ``deadline``
    (the running delay's end, t_ms, or None). R81: ``revoked`` (what the last round
    revoked), ``offsets`` (the config offsets of the round before the last and of the
    last, -1 before any), ``deleted`` ((resource, the config offset it was deleted at), ...)."""

    expected: frozenset = frozenset()
    held: tuple = ()
    deadline: float | None = None
    revoked: frozenset = frozenset()
    offsets: tuple = (-1, -1)
    deleted: tuple = ()


class _Checker:
    def __init__(self, slack_ms: float):
        self.slack = slack_ms
        self.rules: set = set()
        self.uninterpreted: list = []
        self.checked = 0
        self.figures = {"workers": 0, "rounds": 0, "deferred_rounds": 0, "revoking_rounds": 0, "deleted": 0}

    def verdict(self, status: str, divergence=None) -> Verdict:
        if status == DIVERGENT:
            return divergent(self.checked, self.rules, (divergence,), dict(self.figures))
        return Verdict(status, self.checked, frozenset(self.rules), None,
                       tuple(self.uninterpreted) if status == INCOMPLETE else (), dict(self.figures))

    def group(self, records, group: str):
        try:
            return self._group(records, group)
        except Uninterpretable as e:
            self.uninterpreted.append(f"group {group}: {e}")
            return None

    def _group(self, records, group: str):
        walk = _Walk(group)
        workers: dict = {}        # member.id -> Worker
        by_connection: dict = {}  # connection -> member.id
        context: list = []
        deferral = _Deferral()
        rounds_by_generation: dict = {}

        def diverge(line, rec, rule, reason, expected=()):
            return Divergence(line, rec, "members", rule, tuple(expected) or ("nothing",), reason,
                              tuple(context[-40:]))

        for line, rec in records:
            if rec["type"] not in ("request", "response") or rec.get("api") not in ("JoinGroup", "SyncGroup"):
                continue
            if rec["type"] == "request" and rec["body"]["group_id"] != group:
                continue
            key = (rec["connection"], rec["correlation_id"])
            if rec["type"] == "response" and key not in walk.requests:
                continue
            context.append((line, rec))
            self.checked += 1
            produced = list(walk.rounds([(line, rec)]))
            body = rec["body"]
            if rec["type"] == "request" and rec["api"] == "JoinGroup":
                divergence = self._claim(workers, by_connection, line, rec, diverge)
                if divergence is not None:
                    return divergence
            elif rec["type"] == "response" and rec["api"] == "JoinGroup":
                if body["error"] == "NONE":
                    by_connection[rec["connection"]] = body["member_id"]
            elif rec["type"] == "request":  # the leader's SyncGroup
                for r in produced:
                    divergence, deferral = self._round(r, deferral, line, rec, diverge)
                    if divergence is not None:
                        return divergence
                    rounds_by_generation[r.generation] = r
            else:  # a SyncGroup response: what the worker runs from now
                q = walk.requests[key][1]
                r = rounds_by_generation.get(q["body"]["generation_id"])
                if body["error"] != "NONE" or r is None:
                    continue
                member = q["body"]["member_id"]
                assigned, revoked, _ = _assignment(body["assignment"])
                before = r.allocations.get(member, workers.get(member, Worker()).owned)
                workers[member] = Worker(frozenset((before - revoked) | assigned), rec["connection"], q["client_id"])
                by_connection[rec["connection"]] = member
                self.figures["workers"] = len({w.client_id for w in workers.values()})
        return None

    def _claim(self, workers: dict, by_connection: dict, line: int, rec: dict, diverge):
        """R13: a JoinGroup's allocation against what the worker runs."""
        body = rec["body"]
        claim = _allocation(body["protocols"][0]["metadata"]) if body["protocols"] else set()
        member = body["member_id"] or by_connection.get(rec["connection"])
        known = workers.get(member) if member else None
        self.rules.add("R13")
        if known is not None and known.connection == rec["connection"]:
            if claim != known.owned:
                return diverge(line, rec, "R13", "the worker's JoinGroup claims other connectors and tasks than its "
                               "last assignment left it", [f"allocation {names(known.owned)}"])
        elif known is not None:
            if not claim <= known.owned:
                return diverge(line, rec, "R13", "a worker on a new connection claims what it was not given",
                               [f"allocation within {names(known.owned)}"])
        elif claim:
            given = set().union(*(w.owned for w in workers.values() if w.client_id == rec["client_id"]))
            if not claim <= given:
                return diverge(line, rec, "R13", "a new worker claims connectors or tasks it was never given",
                               ["allocation []"])
        return None

    def _round(self, r: Round, deferral: _Deferral, line: int, rec: dict, diverge) -> tuple:
        """R16, R18, R23, R33, R81 on one round: ``(divergence or None, the deferral after it)``."""
        self.figures["rounds"] += 1
        members = set(r.allocations)
        strangers = sorted(set(r.assigned) - members) if members else []
        if strangers:
            return diverge(line, rec, "R16", f"the leader assigns to {strangers}, not in the round"), deferral
        for m, revoked in r.revoked.items():
            if not revoked <= r.allocations.get(m, set()):
                return diverge(line, rec, "R18", f"the leader revokes from {m} what it does not run: "
                               f"{names(revoked - r.allocations.get(m, set()))}"), deferral
        self.rules.add("R18")
        running: dict = {}
        for m, alloc in r.allocations.items():
            for res in alloc:
                running.setdefault(res, set()).add(m)
        for m, assigned in r.assigned.items():
            taken = sorted(res for res in assigned if res in running)
            if taken:
                return diverge(line, rec, "R23", f"the leader assigns to {m} what {sorted(running[taken[0]])} "
                               f"run(s): {names(taken)}"), deferral
        self.rules.add("R23")
        after: dict = {}
        for m, owned in r.outcome().items():
            for res in owned:
                if res in after:
                    return diverge(line, rec, "R16", f"after the round {_name(res)} runs on {after[res]} and {m}"), \
                        deferral
                after[res] = m
        self.rules.add("R16")
        if any(r.revoked.values()):
            self.figures["revoking_rounds"] += 1
        delays = set(r.delay.values())
        delay = max(delays, default=0)
        lost = set(deferral.expected) - set(running)
        withheld = lost - set(after)
        held = dict(deferral.held)
        if lost:
            self.rules.add("R33")
        before, last = deferral.offsets
        judged = r.config_offset >= 0  # v0 says no offset: R81 is not judged
        deleted = withheld if judged and delay <= 0 and r.config_offset > last else set()
        if withheld - deleted and delay <= 0:
            return diverge(line, rec, "R33", f"lost connectors and tasks {names(withheld)} are neither assigned nor "
                           "held back under a delay, and the leader read no config change (config offset "
                           f"{r.config_offset})"), deferral
        if judged:
            divergence, deletion = self._deletions(r, deferral, running, after, deleted)
            if divergence is not None:
                return diverge(line, rec, "R81", divergence), deferral
            deferral = deferral._replace(revoked=frozenset().union(*r.revoked.values()) - set(after),
                                         offsets=(last, r.config_offset), deleted=deletion)
        if delay > 0 and len(delays) != 1:
            return diverge(line, rec, "R33", f"the workers are given different delays {sorted(delays)}"), deferral
        if deferral.deadline is not None and delay > 0 and r.t_ms + delay > deferral.deadline + self.slack:
            return diverge(line, rec, "R33", f"a delay runs until {deferral.deadline:.0f} (t_ms) but this round's "
                           f"{delay} ms ends {r.t_ms + delay - deferral.deadline:.0f} ms later"), deferral
        overdue = sorted(res for res in withheld if res in held and r.t_ms > held[res] + self.slack)
        if overdue:
            return diverge(line, rec, "R33", f"{names(overdue)} are still held back "
                           f"{r.t_ms - min(held[x] for x in overdue):.0f} ms after their delay passed"), deferral
        if delay <= 0:
            return None, deferral._replace(expected=frozenset(after), held=(), deadline=None)
        self.figures["deferred_rounds"] += 1
        deadline = min(deferral.deadline, r.t_ms + delay) if deferral.deadline is not None else r.t_ms + delay
        held = {res: held.get(res, deadline) for res in withheld}
        return None, deferral._replace(expected=frozenset(after) | frozenset(withheld), held=tuple(held.items()),
                                       deadline=deadline)

    def _deletions(self, r: Round, deferral: _Deferral, running: dict, after: dict, lost: set) -> tuple:
        """R81 on one round: ``(why it diverges or None, the deletions after it)``;
        ``lost``: the lost resources it gives to nobody at a grown config offset."""
        self.rules.add("R81")
        before, _ = deferral.offsets
        assigned = set().union(*r.assigned.values())
        dropped = set(deferral.revoked) - assigned - set(running) - set(after)
        if dropped and r.config_offset <= before:
            return (f"{names(dropped)}, revoked last round, are given to nobody though the leader read no config "
                    f"change (config offset {r.config_offset}, {before} before the revocation)"), deferral.deleted
        gone = dropped | lost
        for connector in sorted(c for c, t in gone if t == CONNECTOR_TASK):
            tasks = sorted(res for res in after if res[0] == connector and res[1] != CONNECTOR_TASK)
            if tasks:
                return f"connector {connector} is deleted but its tasks {names(tasks)} run on", deferral.deleted
        deleted = dict(deferral.deleted)
        back = sorted(res for res in assigned if res in deleted and r.config_offset <= deleted[res])
        if back:
            return (f"{names(back)}, deleted at config offset {deleted[back[0]]}, are assigned again with no config "
                    f"change (config offset {r.config_offset})"), deferral.deleted
        self.figures["deleted"] += len(gone)
        deleted = {res: at for res, at in deleted.items() if res not in assigned}
        deleted.update((res, r.config_offset) for res in gone)
        return None, tuple(sorted(deleted.items()))
