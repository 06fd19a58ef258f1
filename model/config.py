"""The static configuration the handlers read: protocol, assignor, topics, mutations."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable
from functools import cached_property

from .protocol import ALL_TOPICS

CONSUMER_PROTOCOLS = ("eager", "cooperative", "deferred", "incremental")
KIP848 = "consumer"  # KIP-848's consumer group protocol (group.protocol=consumer): the coordinator assigns
CLASSIC_PROTOCOLS = CONSUMER_PROTOCOLS + ("streams",)  # the classic group membership protocol's
PROTOCOLS = CLASSIC_PROTOCOLS + (KIP848,)
COOPERATIVE_PROTOCOLS = ("cooperative", "deferred", "incremental")
MEMBER_PROTOCOLS = COOPERATIVE_PROTOCOLS + ("streams",)  # a cooperative member's rules: Streams members too
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky", "streams", "high-availability", "uniform")
SERVER_ASSIGNORS = ("uniform", "range")  # KIP-848's server-side assignors (group.consumer.assignors)
STREAMS_ASSIGNORS = ("streams", "high-availability")  # the seed's learner assignor; KIP-441's (R57-R60)
STREAMS_VERSIONS = ("1.0", "2.0")  # seed 001, Algorithm Iteration Plan
REJOIN_MODES = ("conservative", "eager")  # seed 001, Eager Rebalance
PLUGIN_PROTOCOLS = ("eager", "cooperative")
# Connect's two resource kinds (seed 000, Motivation; IncrementalCooperativeAssignor): the protocols that balance
# connectors and tasks separately (R66), and the topic whose partitions stand for the connectors
KIND_PROTOCOLS = ("deferred", "incremental")
CONNECTOR_TOPIC = "connector"  # where a plug-in assignor is the leader's whole decision
# the assignor a protocol uses unless told otherwise (range: the Java consumer's default; cooperative-sticky: KIP-429)
DEFAULT_ASSIGNOR = {"eager": "range", "cooperative": "cooperative-sticky", "deferred": "cooperative-sticky",
                    "incremental": "cooperative-sticky", "streams": "streams", KIP848: "uniform"}

def rule(cfg: "GroupConfig", correct):
    """The rule a handler runs in place of ``correct`` (a function of model/, the
    rule as the model has it): the replacement a mutation switched on in ``cfg``
    registered for it (model/mutations.py REGISTRY), else ``correct`` itself."""
    return cfg.rules.get(correct, correct)


class ConfigError(ValueError):
    """A configuration value is invalid; the message names it."""


@dataclass(frozen=True)
class GroupConfig:
    """What the pure handlers need to know about the group.

    ``topics``: ((name, partition count), ...); the group's partitions are numbered
    0..P-1 in this order. ``protocol``: "eager" or "cooperative" (the
    RebalanceProtocol the members use). ``assignor``: the leader's partition
    assignor. ``mutations``: known-bad behaviours switched on (model/mutations.py REGISTRY;
    each replaces rules the handlers call through ``rule``).
    ``initial_rebalance_delay``: whether the broker delays a group's initial
    rebalance (KIP-134, Kafka 0.11+, which does so at group.initial.rebalance.delay.ms
    0 too: R30); False models an older broker, or a unit test of the barrier alone. ``max_moves``: how many
    owned partitions the incremental protocol moves per round (Design III), per
    resource kind, a move costing its kind's cost (R67). ``connectors``: Kafka
    Connect's connectors, a second resource kind before the topics' partitions
    (the tasks), deferred and incremental protocols only (R66); ``connector_cost``:
    a connector move's cost against ``max_moves`` (a task's is 1).
    ``deletable_connectors``: the connectors (a bitmask of connector indices) a
    ``delete-connector`` fault may delete (R81); each connector's tasks are then the
    partitions of its own topic, ``topics[1 + i]`` for connector i, and the members'
    metadata (a topic bitmask) stands for Connect's config topic: connector i is
    configured while its task topic is there. ``removed``: the resources (a
    partition bitmask) deleted as one round's leader reads them, set by
    model/assignors.py ``configured`` for that round, never by a configuration.
    Time is in ticks (a check configuration maps ms to ticks, checker/settings):
    ``scheduled_delay_ticks``: scheduled.rebalance.max.delay.ms, how long Design II
    holds lost partitions back (0: not at all, Connect's maxDelay == 0, R33);
    ``rejoin_ticks``: how long after an incremental
    round the group rejoins to move more (Design III); ``revoking_backoff_ticks``:
    the delay before the n-th revoking round in a row (n = 1, 2, ...; the last
    repeats; 0: revoke at once), KAFKA-12495's exponential backoff (Design II).
    ``plugin``: a plug-in assignor (model/assignors.py ``assign_plugin`` gives its
    signature), resolved once from ``assignor`` = "module:function" by
    checker/settings.py; the leader runs it instead of a built-in one, under the
    eager or cooperative protocol (PLUGIN_PROTOCOLS). ``require_known_member_id``: members join with JoinGroup v4+ (KIP-394), so a new
    dynamic member is first handed its member id with MEMBER_ID_REQUIRED (R36);
    off in the checker's bound (it adds a round trip to every join), on in some
    test vectors.

    Streams (seed 001; ``protocol`` "streams", assignor "streams"): the topics'
    partitions are its tasks; ``stateless``: the bitmask of stateless tasks (R47);
    ``standby_replicas``: num.standby.replicas; ``streams_version``: "1.0" (only
    new-comers take learners) or "2.0" (members take the tasks of leaving ones,
    R50, R51); ``rejoin_mode``: "conservative" (rejoin once every learner is ready)
    or "eager" (as each is, R55); ``scale_down_ticks``: the scale-down timeout (R54).
    KIP-441 (assignor "high-availability", R57-R60): ``max_warmup_replicas``:
    max.warmup.replicas (StreamsConfig, default 2, at least 1); ``probing_ticks``:
    probing.rebalance.interval.ms in ticks (default 600000 ms there; at least 1).

    ``upgrade``: the members start on [range] (eager) and rolling bounces move them to
    [cooperative-sticky] (R77-R80, model/upgrade.py); ``protocol`` and ``assignor``
    are then "eager" and "range", where the group starts.
    Subscriptions (R61-R63): ``subscriptions``, per client slot the topics its
    processes subscribe to (a bitmask of indices into ``topics``; a slot beyond the
    tuple subscribes to every topic); ``resubscriptions``: the topic bitmasks a
    ``subscribe`` fault may switch a member to; ``created_topics``: the topics
    (a bitmask) that do not exist at the start, each created by a ``create-topic``
    fault. All empty: every member subscribes to every topic, which exists.

    ``regex``: under the consumer protocol (KIP-848), the members subscribe by regular
    expression (SubscribedTopicRegex): the coordinator resolves a new one asynchronously,
    and until it has, it matches nothing.

    ``migration``: under the consumer protocol, KIP-848's online migration: client slots
    ``0..migration-1`` start processes that speak the classic protocol (JoinGroup, SyncGroup;
    the cooperative-sticky assignor), the group starting classic; a restarted process
    switches its slot's protocol (a rolling upgrade, or its rollback); the others speak the
    consumer protocol (model/consumer_group/migration.py).

    ``rejoin_flag``: the leader's assignment tells every member to rejoin at once
    when the round owes a second one (R74, seed 000's Design I discussion); for the
    cooperative protocols only.

    Raises ConfigError for an unknown protocol, assignor or mutation, an assignor
    that does not support the protocol, a mutation the protocol has no use for, two
    mutations replacing one rule, or a topic without partitions.
    """

    topics: tuple = (("t", 4),)
    protocol: str = "cooperative"
    assignor: str = "cooperative-sticky"
    mutations: frozenset = field(default_factory=frozenset)
    initial_rebalance_delay: bool = True
    max_moves: int = 1
    scheduled_delay_ticks: int = 2
    rejoin_ticks: int = 1
    revoking_backoff_ticks: tuple = (1, 1, 1, 2)
    require_known_member_id: bool = False
    plugin: Callable | None = None
    stateless: int = 0
    standby_replicas: int = 0
    streams_version: str = "2.0"
    rejoin_mode: str = "conservative"
    scale_down_ticks: int = 2
    upgrade: bool = False  # R79: the members move from [range] to [cooperative-sticky] by rolling bounces
    rejoin_flag: bool = False
    connectors: int = 0
    connector_cost: int = 2
    deletable_connectors: int = 0
    removed: int = 0
    subscriptions: tuple = ()
    resubscriptions: tuple = ()
    created_topics: int = 0
    max_warmup_replicas: int = 2
    probing_ticks: int = 1
    regex: bool = False
    migration: int = 0  # KIP-848's online migration: the client slots whose first processes speak the classic protocol

    def __post_init__(self):
        if self.connectors:
            self._two_kinds()
        elif self.deletable_connectors:
            raise ConfigError("deletable_connectors needs connectors (R81): only Connect's connectors are deleted")
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"unknown protocol {self.protocol!r} (expected one of {', '.join(PROTOCOLS)})")
        if self.plugin is not None:
            if self.protocol not in PLUGIN_PROTOCOLS:
                raise ConfigError(f"a plug-in assignor ({self.assignor}) runs under the "
                                  f"{' or '.join(PLUGIN_PROTOCOLS)} protocol: the {self.protocol} protocol's "
                                  "assignor also schedules rebalances (seed 000, Designs II and III)")
        elif self.assignor not in ASSIGNORS:
            raise ConfigError(f"unknown assignor {self.assignor!r} (expected one of {', '.join(ASSIGNORS)}, "
                              "or your own as module:function)")
        elif self.protocol == KIP848:
            if self.assignor not in SERVER_ASSIGNORS:
                raise ConfigError(f"assignor {self.assignor!r} is not a server-side assignor of the consumer protocol "
                                  f"(expected one of {', '.join(SERVER_ASSIGNORS)})")
        elif self.assignor == "uniform":
            raise ConfigError("assignor 'uniform' is KIP-848's server-side assignor: use it with --protocol consumer")
        elif (self.protocol == "streams") != (self.assignor in STREAMS_ASSIGNORS):
            raise ConfigError(f"assignor {self.assignor!r} does not go with the {self.protocol} protocol "
                              f"(the streams protocol goes with the {' or '.join(STREAMS_ASSIGNORS)} assignor)")
        elif self.protocol in COOPERATIVE_PROTOCOLS and self.assignor != "cooperative-sticky":
            raise ConfigError(f"assignor {self.assignor!r} does not support the cooperative protocol "
                              "(only cooperative-sticky does)")
        if self.mutations:
            from .mutations import REGISTRY, refuse_inapplicable
            self.rules  # noqa: B018 - unknown names and two mutations replacing one rule are refused here
            # the deferral's mutations mean nothing without one, even to an assignor called alone (checker/prove.py
            # calls the sticky assignors under the eager protocol with claims); the whole table: refuse_inapplicable
            refuse_inapplicable(self.protocol, (m for m in self.mutations if REGISTRY[m].protocols == ("deferred",)))
        for name, least in (("max_moves", 1), ("scheduled_delay_ticks", 0), ("rejoin_ticks", 1),
                            ("max_warmup_replicas", 1), ("probing_ticks", 1)):  # the last two: R58, R60
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigError(f"{name} must be a whole number of at least {least}, got {value!r}")
        backoff = self.revoking_backoff_ticks
        if not backoff or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in backoff):
            raise ConfigError(f"revoking_backoff_ticks must be whole numbers, none negative, got {backoff!r}")
        if self.streams_version not in STREAMS_VERSIONS:
            raise ConfigError(f"unknown Streams version {self.streams_version!r} (expected one of "
                              f"{', '.join(STREAMS_VERSIONS)})")
        if self.rejoin_mode not in REJOIN_MODES:
            raise ConfigError(f"unknown rejoin mode {self.rejoin_mode!r} (expected one of {', '.join(REJOIN_MODES)})")
        for name in ("standby_replicas", "scale_down_ticks"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (name == "scale_down_ticks"):
                raise ConfigError(f"{name} must be a whole number of at least {int(name == 'scale_down_ticks')}, "
                                  f"got {value!r}")
        if self.upgrade or "one-bounce-upgrade" in self.mutations:
            from .upgrade import validate
            validate(self)
        if self.migration and self.protocol != KIP848:
            raise ConfigError("group.migration starts classic members in a consumer group protocol configuration "
                              "(KIP-848's online migration): it needs protocol consumer")
        if self.regex and self.protocol != KIP848:
            raise ConfigError("regex subscriptions are the consumer protocol's (KIP-848), not the "
                              f"{self.protocol} protocol's")
        if self.rejoin_flag and self.protocol not in COOPERATIVE_PROTOCOLS:
            raise ConfigError(f"the rejoin flag is for the cooperative protocols ({', '.join(COOPERATIVE_PROTOCOLS)}), "
                              f"not {self.protocol}: an eager round owes no second one")
        if not self.topics:
            raise ConfigError("no topics: the group needs at least one topic")
        for name, count in self.topics:
            if not isinstance(count, int) or count < 1:
                raise ConfigError(f"topic {name!r} needs a positive partition count, got {count!r}")
        every = (1 << len(self.topics)) - 1
        for name, masks in (("subscriptions", self.subscriptions), ("resubscriptions", self.resubscriptions),
                            ("created_topics", (self.created_topics,))):
            for mask in masks:
                if mask == ALL_TOPICS and name == "subscriptions":
                    continue
                if not isinstance(mask, int) or mask & ~every or (mask == 0 and name != "created_topics"):
                    raise ConfigError(f"{name}: {mask!r} is not a non-empty set of the group's topics")

    def _two_kinds(self):
        """R66: ``connectors`` > 0 makes the group's first resources connectors, the
        partitions of a topic ``connector`` put before the others (added here when
        ``topics`` does not start with it), the rest tasks; only the deferred and
        incremental protocols have two kinds (the consumer protocols keep partitions).
        ``connector_cost``: what a connector move costs in Design III's per-round
        budget ``max_moves``, a task move costing 1 (R67). Raises ConfigError."""
        if self.protocol not in KIND_PROTOCOLS:
            raise ConfigError(f"connectors (Kafka Connect's second resource kind) are for the "
                              f"{' and '.join(KIND_PROTOCOLS)} protocols, not {self.protocol}")
        if not isinstance(self.connectors, int) or isinstance(self.connectors, bool) or self.connectors < 0:
            raise ConfigError(f"connectors must be a whole number, got {self.connectors!r}")
        if not isinstance(self.connector_cost, int) or isinstance(self.connector_cost, bool) or self.connector_cost < 1:
            raise ConfigError(f"connector_cost must be a whole number of at least 1, got {self.connector_cost!r}")
        if self.topics and self.topics[0][0] != CONNECTOR_TOPIC:
            if any(name == CONNECTOR_TOPIC for name, _ in self.topics):
                raise ConfigError(f"topic {CONNECTOR_TOPIC!r} holds the connectors: name the task topics otherwise")
            object.__setattr__(self, "topics", ((CONNECTOR_TOPIC, self.connectors),) + tuple(self.topics))
        elif self.topics[0][1] != self.connectors:
            raise ConfigError(f"topic {CONNECTOR_TOPIC!r} has {self.topics[0][1]} partitions but connectors is "
                              f"{self.connectors}")
        if len(self.topics) < 2:
            raise ConfigError("connectors need tasks too: give a topic of tasks besides the connectors")
        deletable = self.deletable_connectors
        if not isinstance(deletable, int) or isinstance(deletable, bool) or deletable & ~((1 << self.connectors) - 1) \
                or deletable < 0:
            raise ConfigError(f"deletable_connectors: {deletable!r} is not a set of the group's "
                              f"{self.connectors} connectors")
        if deletable and len(self.topics) != self.connectors + 1:
            raise ConfigError(f"deletable connectors need one topic of tasks per connector (R81): {self.connectors} "
                              f"connectors but {len(self.topics) - 1} task topics")

    @cached_property
    def kinds(self) -> tuple:
        """The resource kinds, each balanced on its own (R66; Connect's
        IncrementalCooperativeAssignor.performLoadBalancingRevocations): ``((name,
        bitmask, cost of a move), ...)``: ``(("connectors", ...), ("tasks", ...))``
        with connectors, else one kind, ``(("partitions", all, 1),)``."""
        if not self.connectors:
            return (("partitions", self.all_partitions, 1),)
        connectors = (1 << self.connectors) - 1
        configured = self.all_partitions & ~self.removed  # R81: a deleted connector's resources are no kind's
        return (("connectors", connectors & configured, self.connector_cost),
                ("tasks", configured & ~connectors, 1))

    def deleted(self, metadata: int) -> int:
        """R81: the resources (a partition bitmask) of the deletable connectors whose
        task topic ``metadata`` (a topic bitmask, Connect's config topic as a member
        read it) no longer shows: each such connector and its tasks."""
        out = 0
        for i in range(self.connectors):
            if self.deletable_connectors >> i & 1 and not metadata >> (i + 1) & 1:
                out |= 1 << i | self.partitions_of_topics(1 << (i + 1))
        return out

    @cached_property
    def rules(self) -> dict:
        """``{correct rule: replacement}`` for the mutations switched on (model/mutations.py), built once."""
        if not self.mutations:
            return {}
        from .mutations import replacements
        return replacements(self.mutations)

    @property
    def num_partitions(self) -> int:
        return sum(count for _, count in self.topics)

    @property
    def all_partitions(self) -> int:
        """The bitmask of every partition."""
        return (1 << self.num_partitions) - 1

    def subscription_of(self, slot: int) -> int:
        """The topics (a bitmask) client ``slot`` subscribes to at the start (R61)."""
        return self.subscriptions[slot] if slot < len(self.subscriptions) else ALL_TOPICS

    @cached_property
    def _topic_masks(self) -> tuple:
        """Per topic index, the bitmask of its partitions."""
        out, start = [], 0
        for _, count in self.topics:
            out.append(((1 << count) - 1) << start)
            start += count
        return tuple(out)

    def partitions_of_topics(self, topics: int) -> int:
        """The bitmask of the partitions of the topics in ``topics`` (a topic bitmask;
        -1: every topic)."""
        if topics == ALL_TOPICS:
            return self.all_partitions
        out = 0
        for i, mask in enumerate(self._topic_masks):
            if topics >> i & 1:
                out |= mask
        return out

    @property
    def uniform(self) -> bool:
        """Every member subscribes to every topic, and all exist: no subscription
        mechanism is in play (R61-R64)."""
        return not (self.subscriptions or self.resubscriptions or self.created_topics)

    @property
    def cooperative(self) -> bool:
        """Members keep what they own while rejoining (Design I, and Design II on top)."""
        return self.protocol in MEMBER_PROTOCOLS

    @property
    def deferred(self) -> bool:
        """Design II's deferral of lost resources runs: the deferred protocol, and the
        incremental one built on it (seed 000, Design III "an extension of the
        behavior of the deferred resolution"; R68)."""
        return self.protocol in KIND_PROTOCOLS

    @property
    def streams(self) -> bool:
        return self.protocol == "streams"

    def partition_name(self, index: int) -> str:
        """``topic-partition`` for a partition index, e.g. ``t-3``; a Streams task's
        name, e.g. ``T4`` (seed 001's notation)."""
        if self.streams:
            return f"T{index + 1}"
        for name, count in self.topics:
            if index < count:
                return f"{name}-{index}"
            index -= count
        raise IndexError(index)
