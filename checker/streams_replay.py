"""The seed's Streams examples, replayed round by round (``rebalance replay`` of a
scenario whose ``[group] protocol`` is ``streams``; seed 001).

A scenario file (TOML)::

    name = "Scale-up"
    source = "seed 001, Scale-up"
    [group]
    protocol = "streams"
    [streams]                 # as in a check configuration: version, standby_replicas ...
    version = "1.0"
    [initial]
    leader = "S1"
    owned = { S1 = ["T1", "T2"], S2 = ["T3", "T4"], S3 = ["T5"] }
    tasks = 5                 # all stateful (the seed's examples)
    [[rounds]]
    note = "New member S4 joins the group."
    join = ["S4"]             # members that join (with nothing)
    ready = []                # members whose learners all finished restoring (R55)
    leaving = []              # members the scale-down tool marks leaving (R53)
    crash = []                # members that crash first (the leader too: R52)

Each round applies its events, then the leader (the first member in R29 order
after a crash, with no memory, R52) runs the Streams assignor's decision
(``model/streams.target``: R48-R51, before R23's withholding, which is what the
seed prints) on the members' user data (R46), and every member takes it: its
active and learner tasks, readiness kept for tasks it still learns. A leaving
member left with no active task shuts down (R54). The round is printed in the
seed's notation, the join status (being-learned tasks shown as revoked) and the
decision ``S1(assigned: [...], revoked: [...], learning: [...])``.

Raises ConfigError for a malformed scenario (the message names the key).
"""
from __future__ import annotations

from rebalance.model import streams
from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.protocol import Subscription, mask_of, member_id, union

from .settings import parse_toml, streams_settings


def _names(value, where: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) and v[:1] == "S" and v[1:].isdigit()
                                               and int(v[1:]) >= 1 for v in value):
        raise ConfigError(f"{where} must be a list of member names S1, S2, ..., got {value!r}")
    return value


def _mid(name: str) -> int:
    return member_id(int(name[1:]) - 1, 1)


def load(path) -> dict:
    """Parse and validate a Streams scenario; ConfigError naming the key otherwise."""
    data = parse_toml(path, "scenario")
    init = data.get("initial", {})
    owned = init.get("owned", {})
    if not isinstance(owned, dict) or not owned:
        raise ConfigError(f"{path}: initial.owned must name the members and their tasks")
    tasks = init.get("tasks", 0)
    topics, extra = streams_settings({"stateless": 0, "standby_replicas": 0, **data.get("streams", {}),
                                      "tasks": tasks}, len(owned))
    cfg = GroupConfig(topics=topics, protocol="streams", assignor="streams", **extra)
    index = {cfg.partition_name(t): t for t in range(cfg.num_partitions)}
    members = {}
    for name, names in owned.items():
        _names([name], "initial.owned")
        if not isinstance(names, list) or any(n not in index for n in names):
            raise ConfigError(f"{path}: initial.owned.{name} must list tasks of {', '.join(index)}")
        members[name] = mask_of(index[n] for n in names)
    leader = init.get("leader", min(members, key=lambda n: int(n[1:])))
    rounds = data.get("rounds", [])
    if not isinstance(rounds, list) or not rounds:
        raise ConfigError(f"{path}: no [[rounds]]")
    for i, r in enumerate(rounds):
        for key in ("join", "ready", "leaving", "crash"):
            _names(r.get(key, []), f"{path}: rounds[{i}].{key}")
    return {"name": data.get("name", str(path)), "source": data.get("source", "seed 001"), "cfg": cfg,
            "seed_title": data.get("seed_title"),
            "owned": members, "leader": leader, "rounds": rounds}


def _status(cfg, name: str, m: dict, being_learned: int) -> str:
    """The seed's notation for a member: being-learned tasks shown as revoked (R46)."""
    return (f"{name}(assigned: {streams.task_names(m['active'] & ~being_learned)}, "
            f"revoked: {streams.task_names(m['active'] & being_learned)}, learning: "
            f"{streams.task_names(m['learning'])})")


def run(scenario: dict) -> dict:
    """Replay: ``{name, source, rounds: [{note, join: [lines], decision: [lines]}], final}``."""
    cfg = scenario["cfg"]
    members = {n: {"active": mask, "learning": 0, "ready": 0, "leaving": False}
               for n, mask in scenario["owned"].items()}
    leader, memory = scenario["leader"], streams.StreamsMemory(tuple(sorted(_mid(n) for n in members)))
    out = []
    for r in scenario["rounds"]:
        for n in r.get("crash", []):
            members.pop(n, None)
            if n == leader:  # R52: the new leader remembers nothing
                leader, memory = min(members, key=lambda x: int(x[1:])), streams.NO_MEMORY
        for n in r.get("join", []):
            members[n] = {"active": 0, "learning": 0, "ready": 0, "leaving": False}
        for n in r.get("ready", []):
            members[n]["ready"] = members[n]["learning"]
        for n in r.get("leaving", []):
            members[n]["leaving"] = True
        order = sorted(members, key=lambda x: int(x[1:]))
        learned = union(members[n]["learning"] for n in order)
        subs = tuple((_mid(n), 0, Subscription(m["active"], 1, streams=(m["learning"], m["ready"], 0, m["leaving"])))
                     for n, m in ((n, members[n]) for n in order))
        _, active, learning, _ = streams.target(cfg, subs, memory)
        joined = [_status(cfg, n, members[n], learned & ~members[n]["learning"]) for n in order]
        decision = []
        for n in order:
            m, mid = members[n], _mid(n)
            decision.append(f"{n}(assigned: {streams.task_names(active[mid])}, revoked: "
                            f"{streams.task_names(m['active'] & ~active[mid])}, learning: "
                            f"{streams.task_names(learning[mid])})")
            m.update(active=active[mid], learning=learning[mid], ready=m["ready"] & learning[mid])
        memory = streams.StreamsMemory(tuple(sorted(_mid(n) for n in order)),
                                       tuple(sorted(_mid(n) for n in order if members[n]["leaving"])))
        shut = [n for n in order if members[n]["leaving"] and not members[n]["active"]]
        for n in shut:  # R54
            members.pop(n)
        out.append({"note": r.get("note", ""), "join": joined, "leader": leader, "decision": decision,
                    "shut_down": shut})
    return {"name": scenario["name"], "source": scenario["source"], "rounds": out,
            "final": {n: streams.task_names(m["active"]) for n, m in sorted(members.items())}}


def text(report: dict) -> str:
    """The replay in the seed's layout."""
    lines = [f"{report['name']} ({report['source']})"]
    for i, r in enumerate(report["rounds"], 1):
        lines.append(f"#Round {i}: {r['note']}".rstrip())
        lines.append("Members join with:")
        lines.extend("\t" + x for x in r["join"])
        lines.append(f"{r['leader']} performs task assignments:")
        lines.extend("\t" + x for x in r["decision"])
        if r["shut_down"]:
            lines.append(f"{', '.join(r['shut_down'])} shut down: no active task left (R54)")
    lines.append("final: " + ", ".join(f"{n}{t}" for n, t in report["final"].items()))
    return "\n".join(lines)
