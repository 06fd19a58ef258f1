"""What the model predicts for a Streams scenario (tests/catalogue/streams.py), round by
round, beside the real HighAvailabilityTaskAssignor's rounds read off the trace's
decoded AssignmentInfo: the model's ``--protocol streams --assignor high-availability``
(KIP-441 as the model states it, R57-R60, model/high_availability.py) and seed 001's
learner assignor (``--assignor streams``, R48-R52, model/streams.py), each run on the
same group: the real instances as members, their tasks as the model's (task ``0_i`` is
``T{i+1}``), ``num.standby.replicas`` and ``max.warmup.replicas`` as the app's.

The rounds follow the scenario's events: a member joins with nothing; at the probing
rebalance every warmup (learner) and standby restored to within the acceptable lag
(R55's ready, R57's caught-up); after a round that withheld a task for its revocation
(R23) the group rebalances again at once; members that leave and join at one event
(a host swap) leave in a round of their own first; a leader that crashes does so once
the rounds after the join settle, before the probing rebalance, and the member that
leads next remembers no round (R52); rounds stop once nothing moves or is withheld.
Each round shows, per member, its active tasks, its warmups (the model's learner tasks)
and its standbys; the real rounds show Kafka's standbys, where a task Kafka's assignor
kept off its balanced owner counts as that owner's warmup, as TaskMovement decides it
(the destination of an active task that stayed on a caught-up instance).
"""
from __future__ import annotations

from rebalance.model import high_availability, streams
from rebalance.model.config import GroupConfig
from rebalance.model.protocol import NO_GENERATION, Subscription, member_id, partitions_of

ROUNDS = 6


def task_label(t: int) -> str:
    """Kafka's name of the model's task ``t`` (0-based; one subtopology)."""
    return f"0_{t}"


def _labels(mask: int) -> list:
    return [task_label(t) for t in partitions_of(mask)]


def config(assignor: str, tasks: int, standby: int, max_warmup: int) -> GroupConfig:
    return GroupConfig(topics=(("task", tasks),), protocol="streams", assignor=assignor, standby_replicas=standby,
                       max_warmup_replicas=max_warmup)


def model_rounds(assignor: str, tasks: int, standby: int, max_warmup: int, before: dict, joining: list,
                 leaving: list = (), leader_crash: str | None = None) -> list:
    """The model's rounds: ``before`` {name: (active, standby) task masks} (every member
    caught up on both), ``joining``: names that join with nothing, ``leaving``: names of
    ``before`` that leave the group (LeaveGroup; with ``joining``, in a round before they
    join), ``leader_crash``: the name of the leader, which crashes once the rounds after
    the join settle (its session expires; the next leader has no StreamsMemory).
    Returns [{"event", "members": {name: {"active", "warmup", "standby"}}, "withheld":
    bool, "probing": bool}]."""
    cfg = config(assignor, tasks, standby, max_warmup)
    names = list(before) + list(joining)
    mids = {n: member_id(i, 1) for i, n in enumerate(names)}
    later = [("join", joining)] if joining and leaving else []  # events after the first settles
    if leader_crash:
        later.append(("crash", leader_crash))
    state = {n: {"active": before.get(n, (0, 0))[0], "warmup": 0, "standby": before.get(n, (0, 0))[1], "ready": 0}
             for n in names if n not in leaving and not (n in joining and leaving)}
    # the leader remembers the last round's members (R50: newcomers are the members not in it)
    memory = streams.StreamsMemory(tuple(sorted(mids[n] for n in before)))
    out = []
    event = _names(leaving, "leave") if leaving else _names(joining, "join")
    for _ in range(ROUNDS):
        subs = tuple((mids[n], 0, Subscription(s["active"], 1 if s["active"] else NO_GENERATION,
                                               streams=(s["warmup"], s["ready"], s["standby"], False)))
                     for n, s in state.items())
        assign = high_availability.assign if assignor == "high-availability" else streams.assign
        assignments, memory = assign(cfg, subs, memory)
        given = dict(assignments)
        row, withheld, probing = {}, False, False
        for n, s in state.items():
            a = given[mids[n]]
            warmup, standby_ = a.streams or (0, 0)
            withheld |= bool(s["active"] & ~a.partitions)
            probing |= bool(a.scheduled)
            # a warmup placed where the member restored the task already (its ready warmup or its
            # standby) is ready at once (R55)
            s.update(active=a.partitions, warmup=warmup, standby=standby_,
                     ready=warmup & (s["ready"] | s["standby"]))
            row[n] = {"active": _labels(a.partitions), "warmup": _labels(warmup), "standby": _labels(standby_)}
        out.append({"event": event, "members": row, "withheld": withheld, "probing": probing})
        if withheld:
            event = "at once: the withheld tasks (R23)"
        elif later and later[0][0] == "join":
            state.update({n: {"active": 0, "warmup": 0, "standby": 0, "ready": 0} for n in later.pop(0)[1]})
            event = _names(joining, "join")
        elif later:
            del state[later.pop(0)[1]]
            memory = streams.NO_MEMORY
            event = (f"{leader_crash}, the leader, crashes: its session expires; the next leader remembers no "
                     "round (R52)")
        elif probing or any(s["warmup"] for s in state.values()):
            event = ("probing rebalance: every warmup restored (R60)" if assignor == "high-availability"
                     else "the learners restored: their member rejoins (R55)")
            for s in state.values():
                s["ready"] = s["warmup"]
        else:
            break
    return out


def _names(names, verb: str) -> str:
    return f"{', '.join(names)} {verb}{'s' if len(names) == 1 else ''}"


def real_rounds(trace_records, group: str, who: dict) -> list:
    """The real rounds of ``group`` from the trace's SyncGroup responses (their decoded
    AssignmentInfo), one per generation: [{"generation", "t_ms", "members": {name:
    {"active", "standby"}}, "next_rebalance_ms": {name: ms}}]; ``who``: {member.id: name}."""
    requests, by_generation = {}, {}
    for _, r in trace_records:
        body = r.get("body") or {}
        if r["type"] == "request" and r.get("api") == "SyncGroup" and body.get("group_id") == group:
            requests[(r["connection"], r["correlation_id"])] = body
        elif r["type"] == "response" and r.get("api") == "SyncGroup":
            req = requests.get((r["connection"], r["correlation_id"]))
            info = (body.get("assignment") or {}).get("streams")
            if req is None or body.get("error") != "NONE" or info is None:
                continue
            g = by_generation.setdefault(req["generation_id"], {"generation": req["generation_id"], "t_ms": r["t_ms"],
                                                               "members": {}, "next_rebalance_ms": {}})
            name = who.get(req["member_id"], req["member_id"])
            g["members"][name] = {"active": sorted(info["active_tasks"]), "standby": sorted(info["standby_tasks"])}
            g["next_rebalance_ms"][name] = info["next_rebalance_ms"]
    return [by_generation[g] for g in sorted(by_generation)]


def shape(rounds: list, start: dict) -> list:
    """[(replicas, withheld, handed over)] per round of ``rounds`` (real or model) from
    ``start`` ({task: the member running it} before the first): the standby and warmup
    replicas placed, the active tasks that lost their owner without getting another
    (withheld for revocation, R23), and those now run by another member than before.
    Which tasks move is the assignor's free choice; how many, and in which round, is the
    protocol's."""
    out, before = [], dict(start)
    for x in rounds:
        now = {t: n for n, m in x["members"].items() for t in m["active"]}
        replicas = sum(len(m["standby"]) + len(m.get("warmup", ())) for m in x["members"].values())
        withheld = len(set(before) - set(now))
        moved = sum(1 for t, n in now.items() if before.get(t, n) != n) + \
            sum(1 for t in now if t not in before and (before or start))
        out.append((replicas, withheld, moved))
        before = now
    return out
