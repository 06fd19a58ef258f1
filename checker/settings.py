"""Check configuration: a TOML file (examples/default.toml documents every key)
overridden by command-line options, validated into ``CheckSettings``.

Errors raise ``ConfigError`` with a message naming the key and the problem.
"""
from __future__ import annotations

import importlib
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from rebalance.model.assignors import assign
from rebalance.model.protocol import ALL_TOPICS, EMPTY_SUBSCRIPTION, NO_INSTANCE_ID, Error, member_id
from rebalance.model.config import DEFAULT_ASSIGNOR, KIP848, PROTOCOLS, REJOIN_MODES, STREAMS_VERSIONS, ConfigError, GroupConfig
from rebalance.model.mutations import refuse_inapplicable
from rebalance.model.timing import SessionBounds, Timeouts, session_timeout_error
from rebalance.spec.actions import SPEC_MUTATIONS
from rebalance.spec.consumer_actions import SPEC_MUTATIONS as KIP848_SPEC_MUTATIONS

from .engines.guards import MAX_CHECK_SLOTS
from .situations import (Initial, initial_state, member_slot, parse_initial, parse_steps, play_prefix, slots_of,
                         static_slots)
from .system import FAILOVER, FAULT_KINDS, FAULTS, System, build
from .timed import Timing

ALL_PROTOCOLS = PROTOCOLS
ENGINES = ("local", "spark")

# top-level keys that are not tables: a situation's name and source (strings), the mutations of a
# scenario (a list), the scripted steps and expectations (arrays of tables: checker/situations.py, replay.py)
SCALARS = {"name": str, "source": str, "mutations": list, "prefix": list, "events": list, "expect": list}
# key -> allowed keys, for unknown-key errors ([initial]'s keys: checker/situations.py parse_initial)
SCHEMA = {
    "initial": {"owned", "generation", "leader", "static", "subscriptions"},
    "group": {"protocol", "assignor", "topics", "initial_rebalance_delay", "max_moves", "rejoin_flag", "connectors", "regex",
              "connector_cost", "deletable_connectors", "upgrade", "created_topics", "migration"},
    "members": {"initial", "joiners", "static", "subscriptions"},
    "faults": {"kinds", "budget", "resubscriptions"},
    "time": {"tick_ms", "scheduled_rebalance_max_delay_ms", "rejoin_interval_ms", "timed", "session_timeout_ms",
             "rebalance_timeout_ms", "initial_rebalance_delay_ms", "heartbeat_interval_ms"},
    "check": {"max_states", "max_depth", "expect_violated", "expect_findings", "mutations", "continue",
              "timer_fairness"},
    "streams": {"tasks", "stateless", "standby_replicas", "version", "rejoin", "scale_down_ticks",
                "max_warmup_replicas", "probing_ticks"},
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
    workers: int = 1  # owner processes of the local engine (checker/engines/workers.py)
    timer_fairness: bool = True
    spec_mutations: frozenset = field(default_factory=frozenset)
    initial: Initial | None = None  # [initial]: the group's state to start from (checker/situations.py)
    prefix: tuple = ()  # [[prefix]]: steps played from it first, (action, slot, table) each
    timing: Timing | None = None  # [time] timed: the timed mode's durations (checker/timed.py), else untimed (R21)
    findings: tuple | None = None  # [check] expect_findings: known findings expected (checker/findings.py); None: default

    def system(self) -> System:
        """The System to explore. With ``initial``: its Stable group, then ``prefix``
        played exactly (ConfigError naming a step that is not enabled), is where
        every engine starts (``System(start=...)``), with the whole fault budget."""
        args = (self.group, self.members, self.joiners, self.faults, self.budget, self.static, self.spec_mutations)
        if self.initial is None:
            return build(*args, timing=self.timing)
        untimed = build(*args)  # the prefix is played untimed; timed, the clock starts where it ends
        return build(*args, start=play_prefix(untimed, initial_state(untimed, self.initial), self.prefix),
                     timing=self.timing)


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
        if section in SCALARS:
            if not isinstance(values, SCALARS[section]):
                kind = {str: "a string", list: "an array"}[SCALARS[section]]
                raise ConfigError(f"{where}: {section} must be {kind}, got {values!r}")
            continue
        if section not in SCHEMA:
            raise ConfigError(f"{where}: unknown section [{section}] (expected {', '.join(SCHEMA)}, "
                              f"{', '.join(SCALARS)})")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
        for key in values:
            if key not in SCHEMA[section]:
                raise ConfigError(f"{where}: unknown key {section}.{key} "
                                  f"(expected {', '.join(sorted(SCHEMA[section]))})")
    return data


def load_toml(path: str | Path) -> dict:
    """Parse and validate a check configuration. Raises ConfigError naming the file if it is
    not one, a scripted scenario (``[[events]]`` or Streams' ``[[rounds]]``) included."""
    data = parse_toml(path)
    if {"events", "rounds"} & data.keys():
        raise ConfigError(f"{path} is a scripted scenario ([[events]] or [[rounds]], each step followed by the settled "
                          f"schedule), which `rebalance replay {path}` runs; check and explore take a configuration "
                          f"and explore every interleaving from its [initial] after the steps of its [[prefix]] "
                          f"(examples/default.toml)")
    return validate(data, str(path))


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


def names_in(name: str, value, allowed) -> tuple:
    """``value`` (a list of names, or one comma-separated string) as a tuple without
    repeats; ConfigError naming ``name`` for one not in ``allowed``."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{name} must be a list of names, got {value!r}")
    for v in value:
        if v not in allowed:
            raise ConfigError(f"{name}: unknown name {v!r} (expected one of {', '.join(allowed)})")
    return tuple(dict.fromkeys(value))


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


def timing_settings(t: dict, timed: bool | None, faults, protocol: str, group=None) -> Timing | None:
    """The timed mode's durations (checker/timed.py) from the ``[time]`` table, or
    None when it is off (``time.timed``, overridden by ``--timed``): ``tick_ms``, the
    members' ``session_timeout_ms`` and ``rebalance_timeout_ms`` (max.poll.interval.ms;
    the Java consumer's 45 s and 300 s by default) and
    ``initial_rebalance_delay_ms`` (group.initial.rebalance.delay.ms, Kafka's 3 s).
    ConfigError for a value that is not a whole number of ms, a session timeout
    the broker would refuse (R42) or a failover fault (a loaded group's deadlines
    are not modelled). Under the consumer protocol (KIP-848, ``group`` its GroupConfig),
    ``session_timeout_ms`` is the broker's group.consumer.session.timeout.ms and
    ``heartbeat_interval_ms`` its group.consumer.heartbeat.interval.ms (5 s); an online
    migration or members subscribing by regular expression are not timed (ConfigError)."""
    on = t.get("timed", False) if timed is None else timed
    if not isinstance(on, bool):
        raise ConfigError(f"time.timed must be true or false, got {on!r}")
    if not on:
        return None
    if protocol == KIP848 and group is not None and (group.migration or group.regex):
        raise ConfigError("the timed mode times the consumer group coordinator's session and rebalance timeouts; an "
                          "online migration's classic timers and a regular expression's resolution are not timed: "
                          "drop time.timed or --timed")
    if FAILOVER in faults:
        raise ConfigError("the timed mode does not explore coordinator failover (a loaded group's deadlines are "
                          "not modelled): drop the failover fault or time.timed")
    defaults = Timing(tick_ms=TIME_DEFAULTS["tick_ms"])
    session = _count("time.session_timeout_ms", t.get("session_timeout_ms", defaults.timeouts.session_ms), 1)
    if protocol != KIP848 and session_timeout_error(session) != Error.NONE:
        bounds = SessionBounds()
        raise ConfigError(f"time.session_timeout_ms {session} lies outside the broker's group.min.session.timeout.ms "
                          f"{bounds.min_ms} and group.max.session.timeout.ms {bounds.max_ms} (R42)")
    return Timing(tick_ms=_count("time.tick_ms", t.get("tick_ms", defaults.tick_ms), 1),
                  timeouts=Timeouts(session, _count("time.rebalance_timeout_ms",
                                                    t.get("rebalance_timeout_ms", defaults.timeouts.rebalance_ms), 1)),
                  initial_delay_ms=_count("time.initial_rebalance_delay_ms",
                                          t.get("initial_rebalance_delay_ms", defaults.initial_delay_ms), 0),
                  heartbeat_interval_ms=_count("time.heartbeat_interval_ms",
                                               t.get("heartbeat_interval_ms", defaults.heartbeat_interval_ms), 1))


def load_plugin(spec: str):
    """The callable ``spec`` names, ``module:function`` (a module importable from the
    working directory or the installed packages, e.g.
    ``rebalance.examples.assignors.sticky:assign``): a plug-in assignor (model/assignors.py
    ``assign_plugin`` gives the signature). ConfigError naming the problem: a
    malformed spec, a module that cannot be imported, a missing attribute, one
    that is not callable."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"assignor {spec!r}: a plug-in assignor is named module:function")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` does: the user's own modules
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any failure while importing the user's module is bad input
        raise ConfigError(f"assignor {spec!r}: module {module_name!r} cannot be imported "
                          f"({type(e).__name__}: {e})") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise ConfigError(f"assignor {spec!r}: module {module_name!r} has no {attr!r}")
    if not callable(fn):
        raise ConfigError(f"assignor {spec!r}: {attr!r} is a {type(fn).__name__}, not callable")
    return fn


def probe_plugin(group: GroupConfig) -> None:
    """Call ``group``'s plug-in assignor once, on one member claiming nothing, so a
    wrong signature or return shape is bad input before any exploration
    (AssignorError, a ConfigError)."""
    assign(group, ((member_id(0, 1), NO_INSTANCE_ID, EMPTY_SUBSCRIPTION),))


def streams_settings(values: dict, members: int) -> tuple:
    """The Streams keys (seed 001) as ``(topics, GroupConfig keywords)``: ``tasks``
    (default 4, the last ``stateless`` of them stateless, default 1),
    ``standby_replicas`` (default 1, at most the member count), ``version``
    ("1.0" or "2.0"), ``rejoin`` ("conservative" or "eager"),
    ``scale_down_ticks`` (default 2); KIP-441's assignor (R58, R60):
    ``max_warmup_replicas`` (default 2, at least 1) and ``probing_ticks`` (default 1,
    at least 1). ConfigError naming the key otherwise."""
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
                 scale_down_ticks=_count("streams.scale_down_ticks", values.get("scale_down_ticks", 2), 1),
                 max_warmup_replicas=_count("--max-warmup", values.get("max_warmup_replicas", 2), 1),
                 probing_ticks=_count("streams.probing_ticks", values.get("probing_ticks", 1), 1))
    return (("task", tasks),), extra


def _kinds(g: dict, connectors) -> dict:
    """GroupConfig's resource-kind fields (R66, R67) from [group] ``connectors`` and
    ``connector_cost`` and ``--connectors`` (None: not given); nothing when neither
    gives connectors, so the one-kind configurations stay as they were."""
    count = _count("--connectors" if connectors is not None else "group.connectors",
                   connectors if connectors is not None else g.get("connectors", 0), 0)
    if not count:
        if "deletable_connectors" in g:
            raise ConfigError("group.deletable_connectors needs group.connectors (R81)")
        return {}
    deletable = g.get("deletable_connectors", [])
    names = [f"connector-{i}" for i in range(count)]
    if not isinstance(deletable, list) or any(n not in names for n in deletable):
        raise ConfigError(f"group.deletable_connectors: expected a list of the connectors ({', '.join(names)}), "
                          f"got {deletable!r}")
    return {"connectors": count, "connector_cost": _count("group.connector_cost", g.get("connector_cost", 2), 1),
            "deletable_connectors": sum(1 << names.index(n) for n in set(deletable))}
def subscription_settings(topics: tuple, group: dict, members: dict, faults: dict, initial=None) -> dict:
    """R61-R63: the subscription keys as GroupConfig keywords (topic bitmasks):
    ``members.subscriptions``, per client slot in order, the topic names it
    subscribes to (later slots: every topic), or ``initial.subscriptions``, per
    member letter (``{ A = ["t"], ... }``; members not named: every topic);
    ``faults.resubscriptions``, the
    topic lists a ``subscribe`` fault may switch a member to;
    ``group.created_topics``, the topics that do not exist until a
    ``create-topic`` fault creates them. ConfigError naming the key and the
    unknown topic or the wrong shape otherwise."""
    index = {name: i for i, (name, _) in enumerate(topics)}

    def mask(key: str, names) -> int:
        if not isinstance(names, list) or not names:
            raise ConfigError(f"{key}: expected a non-empty list of topic names, got {names!r}")
        for n in names:
            if n not in index:
                raise ConfigError(f"{key}: unknown topic {n!r} (the group's topics: {', '.join(index)})")
        return sum(1 << index[n] for n in set(names))

    def masks(key: str, lists) -> tuple:
        if not isinstance(lists, list):
            raise ConfigError(f"{key}: expected a list of topic lists, e.g. [['t'], ['t', 'u']]")
        return tuple(mask(f"{key}[{k}]", names) for k, names in enumerate(lists))

    out = {"subscriptions": masks("members.subscriptions", members.get("subscriptions", [])),
           "resubscriptions": masks("faults.resubscriptions", faults.get("resubscriptions", []))}
    named = initial.get("subscriptions") if isinstance(initial, dict) else None
    if named is not None:
        if out["subscriptions"]:
            raise ConfigError("give members.subscriptions or initial.subscriptions, not both")
        if not isinstance(named, dict):
            raise ConfigError("initial.subscriptions must be a table of member = topic list, e.g. { A = ['t'] }")
        slots = {member_slot(k): mask(f"initial.subscriptions.{k}", v) for k, v in named.items()}
        out["subscriptions"] = tuple(slots.get(k, ALL_TOPICS) for k in range(max(slots, default=-1) + 1))
    if "created_topics" in group:
        out["created_topics"] = mask("group.created_topics", group["created_topics"])
    return out


def resolve(data: dict, *, protocol=None, assignor=None, members=None, partitions=None,
            faults=None, budget=None, mutations=(), engine=None, workers=None, max_states=None,
            max_depth=None, keep_going=None, timer_fairness=None, static=None,
            spec_mutations=(), streams=None, connectors=None, joiners=None, timed=None,
            findings=None) -> CheckSettings:
    """Merge a validated file (``data``, see ``validate``) with command-line overrides
    (None = not given); ``streams``: the [streams] keys given on the command line;
    ``connectors``: Connect's connectors beside the tasks (R66), over group.connectors;
    ``joiners``: over members.joiners; ``timed``: the timed mode, over time.timed;
    ``findings``: the known findings expected (``("none",)``: none), over check.expect_findings."""
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
    muts = tuple(data.get("mutations", ())) + tuple(c.get("mutations", ())) + tuple(mutations)
    delay = g.get("initial_rebalance_delay", True)
    if not isinstance(delay, bool):
        raise ConfigError(f"group.initial_rebalance_delay must be true or false, got {delay!r}")
    refuse_inapplicable(proto, muts, assignor)
    regex = g.get("regex", False)  # KIP-848: subscriptions by regular expression
    if not isinstance(regex, bool):
        raise ConfigError(f"group.regex must be true or false, got {regex!r}")
    rejoin_flag = g.get("rejoin_flag", False)
    if not isinstance(rejoin_flag, bool):
        raise ConfigError(f"group.rejoin_flag must be true or false, got {rejoin_flag!r}")
    extra = {}
    if g.get("migration", 0):  # KIP-848's online migration: the slots that start on the classic protocol
        extra["migration"] = _count("group.migration", g["migration"], 1)
    if g.get("upgrade", False) is not False:  # R79: a rolling upgrade from [range] to [cooperative-sticky]
        if g["upgrade"] is not True:
            raise ConfigError(f"group.upgrade must be true or false, got {g['upgrade']!r}")
        extra["upgrade"] = True
    if proto == "streams":
        # the member count a standby replica needs (R46..): [initial]'s members, else --members / members.initial
        provisional = (len(data["initial"].get("owned", {})) if isinstance(data.get("initial"), dict) else
                       _count("members", members if members is not None else m.get("initial", 3), 1))
        topics, extra = streams_settings({**data.get("streams", {}), **(streams or {})}, provisional)
    elif streams or data.get("streams"):
        raise ConfigError(f"--tasks, --standby, --streams-version, --rejoin, --max-warmup and [streams] are for the streams "
                          f"protocol, not {proto}")
    plugin = load_plugin(assignor) if ":" in assignor else None
    extra.update(subscription_settings(topics, g, m, f, data.get("initial")))
    group = GroupConfig(topics=topics, protocol=proto, assignor=assignor, mutations=frozenset(muts),
                        initial_rebalance_delay=delay, max_moves=g.get("max_moves", 1), plugin=plugin, **ticks(t),
                        rejoin_flag=rejoin_flag, **extra, **_kinds(g, connectors), **({"regex": True} if regex else {}))
    if plugin is not None:
        probe_plugin(group)
    engine = engine or "local"
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    workers = _count("--workers", 1 if workers is None else workers, 1)
    if workers > 1 and engine != "local":
        raise ConfigError(f"--workers {workers} runs the local engine on {workers} processes; --engine {engine} "
                          f"places its partition owners on the Spark master's cores instead (--spark-master)")
    from .consumer_properties import PROPERTIES as KIP848_PROPERTIES
    from .migration_properties import PROPERTIES as MIGRATION_PROPERTIES
    from .properties import PROPERTIES
    names = tuple(p.name for p in (MIGRATION_PROPERTIES if group.migration else
                                   KIP848_PROPERTIES if proto == KIP848 else PROPERTIES))
    fault_kinds = names_in("faults", faults if faults is not None else f.get("kinds", list(FAULTS)), FAULT_KINDS)
    # a paused member is a zombie that keeps processing: exclusive_processing is
    # expected to break (generation fencing keeps exclusive_ownership; the design brief);
    # so is a live static member an admin client removes (R71): it processes until its next heartbeat
    zombie_default = ["exclusive_processing"] if {"pause", "remove"} & set(fault_kinds) else []
    initial, prefix = None, ()
    if "initial" in data and proto == KIP848:
        raise ConfigError("[initial] and [[prefix]] describe a classic group; the consumer protocol (KIP-848) starts "
                          "from its members joining an empty group")
    if "initial" in data:
        if members is not None or "initial" in m or "static" in m:
            raise ConfigError("[initial] names the running members and initial.static the static ones: "
                              "give neither --members, members.initial nor members.static with it")
        initial = parse_initial(group, data["initial"], "[initial]")
        prefix = tuple(parse_steps(data.get("prefix", []), "prefix", "[[prefix]]"))
        n_members = len(initial.owned)
        n_joiners = slots_of(initial, prefix) - n_members + _count(
            "members.joiners", joiners if joiners is not None else m.get("joiners", 0), 0)
        static = static_slots(True if static else initial.static, n_members + n_joiners)
    elif "prefix" in data:
        raise ConfigError("[[prefix]] needs [initial]: the group's state the steps start from")
    else:
        n_members = _count("members", members if members is not None else m.get("initial", 3), 1)
        n_joiners = _count("members.joiners", joiners if joiners is not None else m.get("joiners", 1), 0)
    if n_members + n_joiners > MAX_CHECK_SLOTS:
        raise ConfigError(f"{n_members} members + {n_joiners} joiner(s) is beyond what a check can hold: at most "
                          f"{MAX_CHECK_SLOTS} client slots (settling the initial state alone grows as slots^3; "
                          f"checker/engines/guards.py MAX_CHECK_SLOTS)")
    return CheckSettings(
        group=group,
        members=n_members,
        joiners=n_joiners,
        static=static if initial else static_slots(static if static else m.get("static", False),
                                                   n_members + n_joiners),
        faults=fault_kinds,
        budget=_budget(budget if budget is not None else f.get("budget", 2)),
        max_states=_limit("max_states", max_states if max_states is not None else c.get("max_states")),
        max_depth=_limit("max_depth", max_depth if max_depth is not None else c.get("max_depth")),
        expect_violated=frozenset(names_in("check.expect_violated", c.get("expect_violated", zombie_default), names)),
        keep_going=bool(keep_going if keep_going is not None else c.get("continue", False)),
        engine=engine,
        workers=workers,
        timer_fairness=bool(timer_fairness if timer_fairness is not None else c.get("timer_fairness", True)),
        spec_mutations=frozenset(names_in("--spec-mutation", list(spec_mutations),
                                          tuple(KIP848_SPEC_MUTATIONS if proto == KIP848 else SPEC_MUTATIONS))),
        initial=initial,
        prefix=prefix,
        timing=timing_settings(t, timed, fault_kinds, proto, group),
        findings=expected_findings(findings if findings else c.get("expect_findings")),
    )


def expected_findings(names) -> tuple | None:
    """The known findings a configuration expects (checker/findings.py): None (not
    given: those that apply), ``()`` for ``["none"]``, else the names. ConfigError for
    an unknown name."""
    from .findings import FINDINGS
    if names is None:
        return None
    names = names_in("check.expect_findings", list(names), tuple(FINDINGS) + ("none",))
    if "none" in names:
        if len(names) > 1:
            raise ConfigError("check.expect_findings: none cannot be given with findings")
        return ()
    return names
