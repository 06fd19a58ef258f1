"""The member side of ``rebalance conform`` on Kafka Connect groups (checker/conform/connect.py):
small traces written here round by round, as Kafka Connect 4.4.0's workers and leader
(WorkerCoordinator, IncrementalCooperativeAssignor) write them, conform; each mutation of
the leader's or a worker's behaviour (``MUTATIONS``, named after the model's mutation of the
same rule where model/mutations.py has one) diverges, naming its rule; and a real trace of
Kafka Connect on Kafka 4.4.0 (tests/kafka_traces/connect_worker_joins.jsonl) conforms while
its leader's assignment mutated diverges."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rebalance.checker.conform import connect, members
from rebalance.checker.conform.trace import parse, read
from rebalance.checker.conform.verdict import CONFORMS, DIVERGENT, INCOMPLETE

GROUP = "connect-cluster"
T0 = 1_795_946_400_000.0
TASKS = [f"seq-{i}" for i in range(8)]


def entries(names) -> list:
    """Resource names (``seq`` the connector, ``seq-3`` a task) as Connect's JSON."""
    out: dict = {}
    for n in sorted(names):
        connector, _, task = n.partition("-")
        out.setdefault(connector, []).append(int(task) if task else -1)
    return [{"connector": c, "tasks": ts} for c, ts in out.items()]


def assignment(leader: str, assigned=(), revoked=(), delay: int = 0, offset: int = 2) -> dict:
    return {"version": 1, "error": 0, "leader": leader, "leader_url": "http://127.0.0.1:8083/",
            "config_offset": offset, "assigned": entries(assigned), "revoked": entries(revoked), "delay": delay}


def story() -> list:
    """Three workers run the connector ``seq`` and its 8 tasks; W3 leaves for good (its
    tasks held back under a 6 s delay, then given out); W4 joins (tasks revoked for
    balance, then assigned); the connector ``del`` and its task, on W2, are deleted (the
    leader's config offset grows from 2 to 4: revoked, then given to nobody). Each round:
    ``t`` (ms from T0), ``leader``, ``workers`` (who joins; a name in ``new`` is a new
    process), ``plan`` {worker: (assigned, revoked, delay)} and ``offset`` (the leader's
    config offset, default 2); ``claims`` {worker: allocation} overrides what a worker claims."""
    return [
        {"t": 0, "leader": "W1", "workers": ["W1", "W2", "W3"], "new": ["W1", "W2", "W3"],
         "plan": {"W1": ({"seq", "seq-0", "seq-1", "seq-2"}, set(), 0),
                  "W2": ({"seq-3", "seq-4", "seq-5", "del", "del-0"}, set(), 0), "W3": ({"seq-6", "seq-7"}, set(), 0)}},
        # W3 left: its seq-6 and seq-7 are held back (IncrementalCooperativeAssignor's scheduled delay)
        {"t": 10_000, "leader": "W1", "workers": ["W1", "W2"],
         "plan": {"W1": (set(), set(), 6000), "W2": (set(), set(), 6000)}},
        {"t": 16_100, "leader": "W1", "workers": ["W1", "W2"],
         "plan": {"W1": ({"seq-6"}, set(), 0), "W2": ({"seq-7"}, set(), 0)}},
        # W4 joins: one task revoked from each, then given to W4 in the next round
        {"t": 20_000, "leader": "W1", "workers": ["W1", "W2", "W4"], "new": ["W4"],
         "plan": {"W1": (set(), {"seq-6"}, 0), "W2": (set(), {"seq-7"}, 0), "W4": (set(), set(), 0)}},
        {"t": 20_200, "leader": "W1", "workers": ["W1", "W2", "W4"],
         "plan": {"W1": (set(), set(), 0), "W2": (set(), set(), 0), "W4": ({"seq-6", "seq-7"}, set(), 0)}},
        # del is deleted (R81): every worker rejoins, the leader revokes it and its task, and gives them to nobody
        {"t": 30_000, "leader": "W1", "workers": ["W1", "W2", "W4"], "offset": 4,
         "plan": {"W1": (set(), set(), 0), "W2": (set(), {"del", "del-0"}, 0), "W4": (set(), set(), 0)}},
        {"t": 30_200, "leader": "W1", "workers": ["W1", "W2", "W4"], "offset": 4,
         "plan": {"W1": (set(), set(), 0), "W2": (set(), set(), 0), "W4": (set(), set(), 0)}},
    ]


def write(rounds) -> list:
    """The JSONL lines of ``rounds``: each worker's JoinGroup (claiming what it runs, or
    its ``claims``), the leader's JoinGroup answer listing every worker's allocation, its
    SyncGroup with the plan, every worker's SyncGroup answer."""
    lines = [{"type": "header", "format": "rebalance-trace", "version": 2, "recorder": "proxy",
              "recorded_at": "2026-11-24T10:00:00Z",
              "settings": {"topics": [], "group_initial_rebalance_delay_ms": 0, "mutations": []}}]
    runs: dict = {}       # worker -> what it runs
    processes: dict = {}  # worker -> process number (a new process: a new connection and member.id)
    correlation = iter(range(1, 10_000))

    def record(kind, t, worker, api, body, c=None):
        rec = {"type": kind, "t_ms": T0 + t, "connection": f"c-{worker}-{processes[worker]}",
               "correlation_id": c, "api": api, "version": 5 if api == "SyncGroup" else 9, "body": body}
        if kind == "request":
            rec["client_id"] = f"connect-{worker}"
        lines.append(rec)

    def member(w):
        return f"connect-{w}-{processes[w]}"

    for generation, r in enumerate(rounds, 1):
        t = r["t"]
        for w in r.get("new", ()):
            processes[w] = processes.get(w, 0) + 1
            runs[w] = set()
            lines.append({"type": "open", "t_ms": T0 + t, "connection": f"c-{w}-{processes[w]}", "host": "127.0.0.1"})
        claims = {w: r.get("claims", {}).get(w, runs.get(w, set())) for w in r["workers"]}
        metadata = {w: {"version": 1, "url": f"http://{w}/", "config_offset": 2,
                        "allocation": assignment(member(r["leader"]), claims[w]) if claims[w] else None}
                    for w in r["workers"]}
        joins = {}
        for w in r["workers"]:
            joins[w] = next(correlation)
            record("request", t, w, "JoinGroup", {
                "group_id": GROUP, "member_id": "" if w in r.get("new", ()) else member(w), "group_instance_id": None,
                "session_timeout_ms": 6000, "rebalance_timeout_ms": 60000, "protocol_type": "connect",
                "protocols": [{"name": "compatible", "metadata": metadata[w]}], "reason": ""}, joins[w])
        for w in r["workers"]:
            record("response", t + 1, w, "JoinGroup", {
                "error": "NONE", "generation_id": generation, "protocol_type": "connect", "protocol_name": "compatible",
                "leader": member(r["leader"]), "skip_assignment": False, "member_id": member(w),
                "members": [{"member_id": member(x), "group_instance_id": None, "metadata": metadata[x]}
                            for x in r["workers"]] if w == r["leader"] else []}, joins[w])
        given = {w: assignment(member(r["leader"]), *plan, offset=r.get("offset", 2)) for w, plan in r["plan"].items()}
        syncs = {w: next(correlation) for w in r["workers"]}
        for w in r["workers"]:
            record("request", t + 2, w, "SyncGroup", {
                "group_id": GROUP, "generation_id": generation, "member_id": member(w), "group_instance_id": None,
                "protocol_type": "connect", "protocol_name": "compatible",
                "assignments": [{"member_id": member(x), "assignment": a} for x, a in given.items()]
                if w == r["leader"] else []}, syncs[w])
        for w in r["workers"]:
            record("response", t + 3, w, "SyncGroup", {"error": "NONE", "protocol_type": "connect",
                                                      "protocol_name": "compatible", "assignment": given.get(w)},
                   syncs[w])
            assigned, revoked, _ = r["plan"].get(w, (set(), set(), 0))
            runs[w] = (claims[w] - revoked) | assigned
    return [json.dumps(x) for x in lines]


def check(rounds):
    return members.check(parse(write(rounds)), None)


def test_the_story_conforms_and_exercises_every_rule():
    verdict = check(story())
    assert verdict.status == CONFORMS, verdict.divergence
    assert {"R13", "R16", "R18", "R23", "R33", "R81"} <= verdict.rules
    assert verdict.figures["deferred_rounds"] == 1 and verdict.figures["revoking_rounds"] == 2
    assert verdict.figures["deleted"] == 2


def _assign_before_revoke(rounds):
    rounds[3]["plan"]["W4"] = ({"seq-6"}, set(), 0)  # W1 still runs seq-6 this round


def _revoke_what_another_runs(rounds):
    rounds[3]["plan"]["W1"] = (set(), {"seq-7"}, 0)


def _forget_the_delay(rounds):
    rounds[1]["plan"] = {"W1": (set(), set(), 0), "W2": (set(), set(), 0)}
    rounds[2]["t"] = 10_500  # W3's tasks are neither given out nor held back


def _restart_the_delay(rounds):
    rounds.insert(2, {"t": 13_000, "leader": "W1", "workers": ["W1", "W2"],
                      "plan": {"W1": (set(), set(), 6000), "W2": (set(), set(), 6000)}})


def _hold_beyond_the_delay(rounds):
    rounds[2]["t"] = 18_000
    rounds[2]["plan"] = {"W1": (set(), set(), 1000), "W2": (set(), set(), 1000)}


def _uneven_delays(rounds):
    rounds[1]["plan"]["W2"] = (set(), set(), 3000)


def _assign_twice(rounds):
    rounds[2]["plan"]["W2"] = ({"seq-6", "seq-7"}, set(), 0)


def _claim_what_was_revoked(rounds):
    rounds[4]["claims"] = {"W1": {"seq", "seq-0", "seq-1", "seq-2", "seq-6"}}


def _new_process_claims(rounds):
    rounds[3]["claims"] = {"W4": {"seq-5"}}


def _drop_without_config_change(rounds):
    for r in rounds[5:]:
        r["offset"] = 2  # del is revoked and given to nobody, but the leader read no deletion


def _delete_the_connector_alone(rounds):
    rounds[5]["plan"]["W2"] = (set(), {"del"}, 0)  # its task del-0 runs on


def _deleted_comes_back(rounds):
    rounds.append({"t": 30_400, "leader": "W1", "workers": ["W1", "W2", "W4"], "offset": 4,
                   "plan": {"W1": ({"del-0"}, set(), 0), "W2": (set(), set(), 0), "W4": (set(), set(), 0)}})


# name -> (the mutation of the story, the rule conform names); model/mutations.py's name where it has the rule's
MUTATIONS = {
    "assign-before-revoke": (_assign_before_revoke, "R23"),
    "revoke-what-another-runs": (_revoke_what_another_runs, "R18"),
    "leader-forgets-delay": (_forget_the_delay, "R33"),
    "delay-restarted": (_restart_the_delay, "R33"),
    "held-beyond-the-delay": (_hold_beyond_the_delay, "R33"),
    "uneven-delays": (_uneven_delays, "R33"),
    "assign-twice": (_assign_twice, "R16"),
    "claim-what-was-revoked": (_claim_what_was_revoked, "R13"),
    "new-process-claims": (_new_process_claims, "R13"),
    "dropped-without-config-change": (_drop_without_config_change, "R81"),
    "deleted-tasks-run-on": (_delete_the_connector_alone, "R81"),
    "deleted-comes-back": (_deleted_comes_back, "R81"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_each_mutation_is_caught_naming_its_rule(name):
    mutate, rule = MUTATIONS[name]
    rounds = story()
    mutate(rounds)
    verdict = check(rounds)
    assert verdict.status == DIVERGENT and verdict.divergence.rule == rule, (verdict.status, verdict.divergence)


def test_bytes_that_did_not_decode_make_the_verdict_incomplete():
    lines = write(story())
    rec = json.loads(lines[-1])
    rec["body"]["assignment"] = {"opaque": "AAE="}
    lines[-1] = json.dumps(rec)
    verdict = members.check(parse(lines), None)
    assert verdict.status == INCOMPLETE and "opaque" in verdict.uninterpreted[0]


KAFKA_TRACE = Path(__file__).parent / "kafka_traces" / "connect_worker_joins.jsonl"


def test_kafka_connects_real_trace_conforms_and_its_mutation_diverges():
    """Kafka Connect 4.4.0, three workers and a fourth joining (tests/catalogue/connect.py
    worker_joins) on Kafka 4.4.0: its rounds conform; moved one round earlier, the
    assignment that gives W4 its tasks lands before they were revoked (R23)."""
    trace = read(KAFKA_TRACE)
    assert members.check(trace, None).status == CONFORMS
    rounds = connect.rounds(trace.records, connect.connect_groups(trace.records).pop())
    revoking = next(r for r in rounds if any(r.revoked.values()))
    giving = rounds[rounds.index(revoking) + 1]
    lines = KAFKA_TRACE.read_text().splitlines()
    rec = json.loads(lines[revoking.line - 1])
    moved = {a["member_id"]: a["assignment"] for a in json.loads(lines[giving.line - 1])["body"]["assignments"]}
    for a in rec["body"]["assignments"]:
        if moved.get(a["member_id"]) and moved[a["member_id"]]["assigned"]:
            a["assignment"] = {**a["assignment"], "assigned": copy.deepcopy(moved[a["member_id"]]["assigned"])}
    lines[revoking.line - 1] = json.dumps(rec)
    verdict = members.check(parse(lines), None)
    assert verdict.status == DIVERGENT and verdict.divergence.rule == "R23", verdict.divergence
