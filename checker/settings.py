"""Check configuration: a TOML file (examples/default.toml documents every key)
overridden by command-line options, validated into ``CheckSettings``.

Errors raise ``ConfigError`` with a message naming the key and the problem.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from rebalance.model.config import (
    DEFAULT_ASSIGNOR, PROTOCOLS, REJOIN_MODES, STREAMS_VERSIONS, ConfigError, GroupConfig, refuse_inapplicable,
)
from rebalance.spec.actions import SPEC_MUTATIONS

from .engines.guards import MAX_CHECK_SLOTS
from .render import slot_named
from .system import FAULTS

ALL_PROTOCOLS = PROTOCOLS
ENGINES = ("local", "spark")

# key -> allowed keys, for unknown-key errors
SCHEMA = {
    "group": {"protocol", "assignor", "topics", "initial_rebalance_delay", "max_moves"},
    "members": {"initial", "joiners", "static"},
    "faults": {"kinds", "budget"},
    "time": {"tick_ms", "scheduled_rebalance_max_delay_ms", "rejoin_interval_ms"},
    "check": {"max_states", "max_depth", "expect_violated", "mutations", "continue", "timer_fairness"},
    "streams": {"tasks", "stateless", "standby_replicas", "version", "rejoin", "scale_down_ticks"},
}


@dataclass(frozen=True)
class CheckSettings:
    """Everything one ``rebalance check`` run needs. ``max_states`` / ``max_depth``:
    None = unbounded. ``expect_violated``: properties documented as broken in this
    configuration (they do not fail the run); by default exclusive_processing when
    the ``pause`` fault (zombies) is enabled. ``timer_fairness``: whether the
    coordinator's timers are under weak fairness for eventual_balance.
    ``spec_mutations``: deliberately wrong specification actions for the refinement
    check (spec/actions.py, SPEC_MUTATIONS)."""

    group: GroupConfig
    members: int = 3
    joiners: int = 1
    static: frozenset = field(default_factory=frozenset)  # client slots with a group.instance.id
    faults: tuple = FAULTS
    budget: int = 2
    max_states: int | None = None
    max_depth: int | None = None
    expect_violated: frozenset = field(default_factory=frozenset)
    keep_going: bool = False
    engine: str = "local"
    timer_fairness: bool = True
    spec_mutations: frozenset = field(default_factory=frozenset)


def parse_toml(path: str | Path, what: str = "configuration file") -> dict:
    """Parse a TOML file. Raises ConfigError naming the file and the TOML error."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (FileNotFoundError, IsADirectoryError):
        raise ConfigError(f"{what} {path} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: malformed TOML: {e}") from None


def validate(data: dict, where: str) -> dict:
    """Reject unknown sections and keys, and sections that are not tables (ConfigError
    naming ``where``, the file)."""
    for section, values in data.items():
        if section not in SCHEMA:
            raise ConfigError(f"{where}: unknown section [{section}] (expected {', '.join(SCHEMA)})")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
        for key in values:
            if key not in SCHEMA[section]:
                raise ConfigError(f"{where}: unknown key {section}.{key} "
                                  f"(expected {', '.join(sorted(SCHEMA[section]))})")
    return data


def load_toml(path: str | Path) -> dict:
    """Parse and validate a check configuration."""
    return validate(parse_toml(path), str(path))


def _count(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


MAX_BUDGET = 200  # keeps process epochs and member-id counters far below ID_BITS (model/protocol.py)


def _budget(value) -> int:
    value = _count("faults.budget", value, 0)
    if value > MAX_BUDGET:
        raise ConfigError(f"faults.budget must be at most {MAX_BUDGET}, got {value}")
    return value


def _limit(name: str, value) -> int | None:
    """0 or absent means unbounded."""
    if value is None:
        return None
    value = _count(name, value, 0)
    return value or None


def _names(name: str, value, allowed) -> tuple:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{name} must be a list of names, got {value!r}")
    for v in value:
        if v not in allowed:
            raise ConfigError(f"{name}: unknown name {v!r} (expected one of {', '.join(allowed)})")
    return tuple(dict.fromkeys(value))


def static_slots(value, slots: int) -> frozenset:
    """``true``: every client is static; a list of letters: those clients; ``false``: none."""
    if value is True:
        return frozenset(range(slots))
    if value is False:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) == 1 and "A" <= v <= "Z"
                                              for v in value):
        raise ConfigError(f"members.static must be true, false or a list of client letters, got {value!r}")
    out = frozenset(slot_named(v) for v in value)
    if max(out, default=0) >= slots:
        raise ConfigError(f"members.static names a client beyond the {slots} configured")
    return out


# [time] defaults, ms: a tick of 150 s; Kafka Connect's scheduled.rebalance.max.delay.ms (300 s)
TIME_DEFAULTS = {"tick_ms": 150_000, "scheduled_rebalance_max_delay_ms": 300_000, "rejoin_interval_ms": 150_000}


def ticks(t: dict) -> dict:
    """R38: the ``[time]`` table's durations in ticks (rounded up, at least one; a
    scheduled.rebalance.max.delay.ms of 0 is 0 ticks, Connect's "no delay"):
    ``{"scheduled_delay_ticks": n, "rejoin_ticks": n, "revoking_backoff_ticks": (n,
    ...)}``. The backoff (R40) is Kafka Connect's ExponentialBackoff(1 ms, x40,
    scheduled.rebalance.max.delay.ms, no jitter) for the 1st, 2nd, ... revoking round
    in a row, up to the first that reaches the maximum; (0,) when the maximum is 0
    (ExponentialBackoff(0, ...): revoke at once). ConfigError for a value that is
    not a whole number of ms, positive (the delay: not negative)."""
    ms = {k: _count(f"time.{k}", t.get(k, v), 0 if k == "scheduled_rebalance_max_delay_ms" else 1)
          for k, v in TIME_DEFAULTS.items()}
    tick, most = ms["tick_ms"], ms["scheduled_rebalance_max_delay_ms"]
    backoff, n = [], 1
    while not backoff or 40 ** (n - 1) < most:
        backoff.append(-(-min(40 ** n, most) // tick))
        n += 1
    return {"scheduled_delay_ticks": -(-most // tick), "rejoin_ticks": -(-ms["rejoin_interval_ms"] // tick),
            "revoking_backoff_ticks": tuple(backoff)}


def streams_settings(values: dict, members: int) -> tuple:
    """The Streams keys (seed 001) as ``(topics, GroupConfig keywords)``: ``tasks``
    (default 4, the last ``stateless`` of them stateless, default 1),
    ``standby_replicas`` (default 1, at most the member count), ``version``
    ("1.0" or "2.0"), ``rejoin`` ("conservative" or "eager"),
    ``scale_down_ticks`` (default 2). ConfigError naming the key otherwise."""
    tasks = _count("--tasks", values.get("tasks", 4), 1)
    stateless = _count("streams.stateless", values.get("stateless", 1), 0)
    if stateless > tasks:
        raise ConfigError(f"streams.stateless must be at most the {tasks} tasks, got {stateless}")
    standby = _count("--standby", values.get("standby_replicas", 1), 0)
    if standby > members:
        raise ConfigError(f"--standby {standby} is above the member count {members}: each standby replica of a "
                          f"task needs a member of its own")
    for key, allowed in (("version", STREAMS_VERSIONS), ("rejoin", REJOIN_MODES)):
        if key in values and values[key] not in allowed:
            raise ConfigError(f"unknown Streams {key} {values[key]!r} (expected one of {', '.join(allowed)})")
    extra = dict(stateless=((1 << tasks) - 1) & ~((1 << (tasks - stateless)) - 1), standby_replicas=standby,
                 streams_version=values.get("version", "2.0"), rejoin_mode=values.get("rejoin", "conservative"),
                 scale_down_ticks=_count("streams.scale_down_ticks", values.get("scale_down_ticks", 2), 1))
    return (("task", tasks),), extra


def resolve(data: dict, *, protocol=None, assignor=None, members=None, partitions=None,
            faults=None, budget=None, mutations=(), engine=None, max_states=None,
            max_depth=None, keep_going=None, timer_fairness=None, static=None,
            spec_mutations=(), streams=None) -> CheckSettings:
    """Merge a validated file (``data``, see ``validate``) with command-line overrides
    (None = not given); ``streams``: the [streams] keys given on the command line."""
    g, m, f, c, t = (data.get(k, {}) for k in ("group", "members", "faults", "check", "time"))
    proto = protocol or g.get("protocol", "cooperative")
    if proto not in ALL_PROTOCOLS:
        raise ConfigError(f"unknown protocol {proto!r} (expected one of {', '.join(ALL_PROTOCOLS)})")
    # a protocol given on the command line brings its own default assignor
    assignor = assignor or (g.get("assignor") if protocol is None else None) or DEFAULT_ASSIGNOR[proto]
    if partitions is not None:
        topics = (("t", _count("--partitions", partitions, 1)),)
    else:
        raw = g.get("topics", {"t": 4})
        if not isinstance(raw, dict) or not raw:
            raise ConfigError("group.topics must be a table of topic = partition count, e.g. { t = 4 }")
        topics = tuple((str(k), _count(f"group.topics.{k}", v, 1)) for k, v in raw.items())
    muts = tuple(c.get("mutations", ())) + tuple(mutations)
    delay = g.get("initial_rebalance_delay", True)
    if not isinstance(delay, bool):
        raise ConfigError(f"group.initial_rebalance_delay must be true or false, got {delay!r}")
    refuse_inapplicable(proto, muts)
    n_members = _count("members", members if members is not None else m.get("initial", 3), 1)
    extra = {}
    if proto == "streams":
        topics, extra = streams_settings({**data.get("streams", {}), **(streams or {})}, n_members)
    elif streams or data.get("streams"):
        raise ConfigError(f"--tasks, --standby, --streams-version, --rejoin and [streams] are for the streams "
                          f"protocol, not {proto}")
    group = GroupConfig(topics=topics, protocol=proto, assignor=assignor, mutations=frozenset(muts),
                        initial_rebalance_delay=delay, max_moves=g.get("max_moves", 1), **ticks(t), **extra)
    engine = engine or "local"
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    from .properties import PROPERTIES
    names = tuple(p.name for p in PROPERTIES)
    fault_kinds = _names("faults", faults if faults is not None else f.get("kinds", list(FAULTS)), FAULTS)
    # a paused member is a zombie that keeps processing: exclusive_processing is
    # expected to break (generation fencing keeps exclusive_ownership; the design brief)
    zombie_default = ["exclusive_processing"] if "pause" in fault_kinds else []
    n_joiners = _count("members.joiners", m.get("joiners", 1), 0)
    if n_members + n_joiners > MAX_CHECK_SLOTS:
        raise ConfigError(f"{n_members} members + {n_joiners} joiner(s) is beyond what a check can hold: at most "
                          f"{MAX_CHECK_SLOTS} client slots (settling the initial state alone grows as slots^3; "
                          f"checker/engines/guards.py MAX_CHECK_SLOTS)")
    return CheckSettings(
        group=group,
        members=n_members,
        joiners=n_joiners,
        static=static_slots(static if static else m.get("static", False), n_members + n_joiners),
        faults=fault_kinds,
        budget=_budget(budget if budget is not None else f.get("budget", 2)),
        max_states=_limit("max_states", max_states if max_states is not None else c.get("max_states")),
        max_depth=_limit("max_depth", max_depth if max_depth is not None else c.get("max_depth")),
        expect_violated=frozenset(_names("check.expect_violated", c.get("expect_violated", zombie_default), names)),
        keep_going=bool(keep_going if keep_going is not None else c.get("continue", False)),
        engine=engine,
        timer_fairness=bool(timer_fairness if timer_fairness is not None else c.get("timer_fairness", True)),
        spec_mutations=frozenset(_names("--spec-mutation", list(spec_mutations), tuple(SPEC_MUTATIONS))),
    )
