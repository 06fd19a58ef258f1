"""What the model predicts for a Connect scenario (tests/catalogue/connect.py): the real
group's state before the scenario's event, replayed on the model (``rebalance replay``,
checker/replay.py) with the scenario's events, as seed 000 with R31 (the model) and as
Kafka Connect (``--mutation connect-leader-state``), and each side's rounds put beside
the real ones.

The real group becomes a replay scenario (``model.toml`` in the run's folder): protocol
``deferred`` with Connect's two resource kinds (R66: ``connectors`` = the connectors,
named ``connector-0``, ... in name order; each connector's tasks a topic of that name),
the workers W1, W2, ... as members A, B, ..., their connectors and tasks as the last
round before the event left them, the leader of that round as the leader. A connector
deleted (R81) is a ``delete-connector`` event, the connector ``deletable_connectors``.

A round's *shape* is (held back under a delay, connectors and tasks revoked,
connectors and tasks newly assigned); rounds where nothing moves and nothing is held
are left out. The real rounds match a model's when their shapes are equal, round by
round: which tasks move is the assignor's free choice (both balance per kind), when
they move and how many is the protocol's.
"""
from __future__ import annotations

from rebalance.checker import replay

from rebalance.checker.conform.connect import names


def _letters(run) -> dict:
    return {name: chr(ord("A") + i) for i, name in enumerate(sorted(run.workers))}


def _model_name(resource: tuple, connectors: list) -> str:
    connector, task = resource
    return f"connector-{connectors.index(connector)}" if task == -1 else f"{connector}-{task}"


def _real_name(model_name: str, connectors: list) -> str:
    return connectors[int(model_name.split("-")[1])] if model_name.startswith("connector-") else model_name


def scenario_toml(name: str, owned: dict, leader: str, tasks: dict, events, deletable=()) -> str:
    """A replay scenario (checker/replay.py): ``owned`` {letter: [model resource names]},
    ``tasks`` {connector: task count}, ``events`` [(action, letter or None, timers)],
    ``deletable``: the model's names of the connectors a ``delete-connector`` deletes (R81)."""
    topics = ", ".join(f"{c} = {n}" for c, n in sorted(tasks.items()))
    owned_text = ", ".join(f"{m} = [{', '.join(repr(r) for r in rs)}]".replace("'", '"')
                           for m, rs in sorted(owned.items()))
    lines = [f'name = "Connect on serve: {name}"',
             'source = "the real Kafka Connect group before the event (tests/catalogue/connect_model.py)"',
             "[group]", 'protocol = "deferred"', f"connectors = {len(tasks)}", f"topics = {{ {topics} }}"]
    if deletable:
        lines.append(f"deletable_connectors = [{', '.join(f'{d!r}' for d in deletable)}]".replace("'", '"'))
    lines += ["[initial]", "generation = 1", f'leader = "{leader}"', f"owned = {{ {owned_text} }}"]
    for action, member, timers in events:
        lines += ["[[events]]", f'action = "{action}"'] + ([f'member = "{member}"'] if member else []) + \
            [f"timers = {str(timers).lower()}"]
    return "\n".join(lines) + "\n"


def shape(rounds_: list) -> list:
    """[(held back, revoked, newly assigned)] of ``rounds_`` ([{held, moves: {worker:
    (added, revoked)}}]), rounds where nothing happens left out."""
    out = []
    for r in rounds_:
        revoked = sum(len(rv) for _, rv in r["moves"].values())
        added = sum(len(ad) for ad, _ in r["moves"].values())
        if r["held"] or revoked or added:
            out.append((bool(r["held"]), revoked, added))
    return out


def _text(r: dict) -> str:
    parts = [f"{w}" + (f" +{names(ad)}" if ad else "") + (f" −{names(rv)}" if rv else "")
             for w, (ad, rv) in sorted(r["moves"].items()) if ad or rv]
    held = f"; holds back {names(r['held'])}" if r["held"] else ""
    return ("; ".join(parts) or "nothing moves") + held


def _model_rounds(report: dict, owned: dict, connectors: list, worker_of: dict) -> list:
    """The replay's rounds as ``{held, moves}`` in the real names (workers W1.., tasks seq-i)."""
    out, have = [], {m: set(rs) for m, rs in owned.items()}
    for r in report["rounds"]:
        moves = {}
        for lane, m in r["members"].items():
            now = set(m["assigned"])
            added = now - have.get(lane, set())
            moves[worker_of[lane]] = ({_as_tuple(_real_name(x, connectors)) for x in added},
                                      {_as_tuple(_real_name(x, connectors)) for x in m["revoked"]})
            have[lane] = now
        for lane in set(have) - set(r["members"]):  # it left: it runs nothing now
            have[lane] = set()
        held = {_as_tuple(_real_name(x, connectors)) for x in r.get("deferred", ())} if r.get("scheduled") else set()
        out.append({"held": held, "moves": moves})
    return out


def _as_tuple(real_name: str) -> tuple:
    connector, _, task = real_name.rpartition("-")
    return (connector, int(task)) if connector and task.isdigit() else (real_name, -1)


def real_rounds(later: list, who: dict, expected_before: set) -> list:
    """The real rounds as ``{held, moves}``: held = what ran before or was held, and
    runs nowhere after the round, when the round sent a delay."""
    out, expected = [], set(expected_before)
    for r in later:
        after = set().union(*r.outcome().values()) if r.allocations else set()
        delay = max(r.delay.values(), default=0)
        held = (expected - after) if delay > 0 else set()
        moves = {who.get(m, m): (r.assigned.get(m, set()), r.revoked.get(m, set())) for m in r.assigned}
        out.append({"held": held, "moves": moves})
        expected = after | held
    return out


def predict(s, before: list, later: list, who: dict, run) -> dict:
    """The model's prediction for scenario ``s`` (its ``model`` events) from the real
    rounds ``before`` the event, beside the real rounds ``later``; writes
    ``model.toml`` in the run's folder. ``{"toml", "real", "seed", "connect",
    "matches"}``: the rounds as text and shapes, and which model the real rounds
    match ("seed 000 (the model)", "Kafka Connect (connect-leader-state)", both, or
    neither)."""
    letters = _letters(run)
    worker_of = {v: k for k, v in letters.items()}
    last = before[-1]
    connectors = sorted({c for rs in last.outcome().values() for c, t in rs if t == -1})
    tasks = {c: 1 + max([t for rs in last.outcome().values() for cc, t in rs if cc == c], default=-1)
             for c in connectors}
    owned = {letters[who[m]]: sorted(_model_name(r, connectors) for r in rs)
             for m, rs in last.outcome().items() if who.get(m) in letters}
    leader_name = who[last.leader]
    deleting = [w for action, w, _ in s.model if action == "delete-connector"]  # R81: by the connector's name
    events = [(action, None if action == "delete-connector" else letters[leader_name if w == "leader" else w], timers)
              for action, w, timers in s.model]
    path = run.directory / "model.toml"
    path.write_text(scenario_toml(s.name, owned, letters[leader_name], tasks, events,
                                  [f"connector-{connectors.index(c)}" for c in deleting]))
    expected = set().union(*last.outcome().values())
    real = real_rounds(later, who, expected)
    out = {"toml": str(path), "real": {"rounds": [_text(r) for r in real], "shape": shape(real)}}
    for key, mutations in (("seed", ()), ("connect", ("connect-leader-state",))):
        report = replay.run(replay.load(str(path), mutations))
        rs = _model_rounds(report, owned, connectors, worker_of)
        out[key] = {"rounds": [_text(r) for r in rs], "shape": shape(rs), "verdict": report["verdict"]}
    matches = [label for key, label in (("seed", "seed 000 (the model)"),
                                        ("connect", "Kafka Connect (connect-leader-state)"))
               if out[key]["shape"] == out["real"]["shape"]]
    out["matches"] = " and ".join(matches) or "neither"
    return out
