"""The static configuration the handlers read: protocol, assignor, topics, mutations."""
from __future__ import annotations

from dataclasses import dataclass, field

CONSUMER_PROTOCOLS = ("eager", "cooperative", "deferred", "incremental")
PROTOCOLS = CONSUMER_PROTOCOLS + ("streams",)
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky", "streams")
STREAMS_VERSIONS = ("1.0", "2.0")  # seed 001, Algorithm Iteration Plan
REJOIN_MODES = ("conservative", "eager")  # seed 001, Eager Rebalance
# the assignor a protocol uses unless told otherwise (range: the Java consumer's default; cooperative-sticky: KIP-429)
DEFAULT_ASSIGNOR = {"eager": "range", "cooperative": "cooperative-sticky", "deferred": "cooperative-sticky",
                    "incremental": "cooperative-sticky", "streams": "streams"}

# name -> (what it switches on, source of the behaviour)
MUTATIONS = {
    "assign-before-revoke": (
        "the cooperative assignor hands a moving partition to its new owner in the same round",
        "seed 000, Design I (the leader withholds revoked partitions)",
    ),
    "contested-claims-unowned": (
        "a partition claimed by several members tied at the highest generation counts as unclaimed: the "
        "cooperative assignors give it out in the same round (before both claimants have revoked it) and the "
        "deferred protocol holds it back as lost under a full delay",
        "this model before issue 15; against AbstractStickyAssignor.partitionsWithMultiplePreviousOwners with "
        "CooperativeStickyAssignor.adjustAssignment, and IncrementalCooperativeAssignor's duplicatedToRevoke",
    ),
    "ignore-owned-generation": (
        "the sticky assignor ignores owned-partition claims from an older generation than "
        "the newest claim, instead of weighing them",
        "KAFKA-12984's generation filter in AbstractStickyAssignor (Kafka 3.0-3.4.0), replaced by KAFKA-14639",
    ),
    "generation-mod-4": (
        "the sticky assignors compare owned-partition claims by generation modulo 4, so a "
        "claim from generation 4 ties with one from generation 0 and neither keeps the partition",
        "test-only: a deliberately wrong model, not a Kafka bug",
    ),
    "keep-owned-on-rebalance-in-progress": (
        "a member answered REBALANCE_IN_PROGRESS on SyncGroup rejoins claiming its old partitions "
        "with the old generation (the one they were assigned in) instead of the generation it joined",
        "KAFKA-13419",
    ),
    "leader-forgets-delay": (
        "the deferral lives only in the leader's memory (seed 000, Design II as written): a new leader "
        "that detects the lost partitions starts the delay again for partitions already deferred, and lost "
        "partitions wait for the delay even when a member with nothing is there",
        "seed 000, Design II (its Discussion names the liveness problem); Kafka Connect's leader state is "
        "connect-leader-state",
    ),
    "connect-leader-state": (
        "Kafka Connect's leader state: the previous assignment and the running delay live in the leader's "
        "memory, kept only while it leads round after round; a new leader starts from an empty previous "
        "assignment (what the old one had counts as new work, given out at once), and a member with nothing "
        "does not end a running delay (Connect serves its candidate workers when the delay expires)",
        "IncrementalCooperativeAssignor.performTaskAssignment (previousAssignment reset when previousGenerationId "
        "!= lastCompletedGenerationId), handleLostAssignments; IncrementalCooperativeAssignorTest",
    ),
    "no-fencing-on-duplicate-instance": (
        "a known group.instance.id joining with an unknown member id is added as another "
        "member instead of replacing (and fencing) the old one",
        "KIP-345, GroupCoordinator.doStaticMemberJoinGroup",
    ),
    "no-commit-fencing": (
        "the coordinator accepts offset commits from stale member ids and generations",
        "GroupCoordinator.handleCommitOffsets",
    ),
    "withhold-partition": (
        "the leader's assignor never gives out the first partition once the group has 4 members or more",
        "test-only: a deliberately wrong assignor, not a Kafka bug (a group left unbalanced for good)",
    ),
    "keep-owned-on-unknown-member-id": (
        "a member answered UNKNOWN_MEMBER_ID rejoins under a new member id still owning its partitions "
        "(onJoinPrepare skipped, so they are neither revoked nor lost)",
        "KAFKA-12983 (Kafka 2.4-3.0; fixed in 3.1)",
    ),
    "reset-generation-when-empty": (
        "the coordinator starts the generation again at 0 when the group empties, instead of going on",
        "test-only: a deliberately wrong coordinator, not a Kafka bug (generations must only grow: "
        "GroupMetadata.initNextGeneration)",
    ),
    "static-rejoin-rebalances": (
        "a static member rejoining a Stable group under a new process triggers a rebalance, as a dynamic "
        "member's would, instead of getting its assignment back",
        "KIP-345 (before it: every restart rebalances); GroupCoordinator.updateStaticMemberAndRebalance",
    ),
    "assign-twice": (
        "the leader's assignor also gives the first partition to the last member (R29 order) once the group "
        "has 2 members or more",
        "test-only: a deliberately wrong assignor, not a Kafka bug (R16: every partition to exactly one member)",
    ),
    "overload-first-member": (
        "the leader's assignor moves the last member's partitions (R29 order) to the first member once the "
        "group has 2 members or more",
        "test-only: a deliberately wrong assignor, not a Kafka bug (R16: loads within one)",
    ),
    "keep-revoked": (
        "a member told to revoke partitions (owned - assigned) keeps owning them, though it rejoins as if "
        "it had revoked them",
        "test-only: a deliberately wrong member, not a Kafka bug (R18; a rebalance storm)",
    ),
    "learners-to-anyone": (
        "the Streams leader lets every member, not only new-comers, take learner tasks for balance: the "
        "seed's 'naive learner assignment' without the version 1.0 rule (R50)",
        "seed 001, Algorithm Iteration Plan, Version 1.0 (the endless resource shuffling it fears)",
    ),
    "promote-unready-learner": (
        "the Streams leader gives an active task to a member learning it before that learner is ready, "
        "revoking it from the member that runs it (R48's first rule reads 'learning' for 'ready')",
        "seed 001, Assignment Algorithm (active tasks 'to instances with learner tasks that indicate "
        "ready'); KIP-441's acceptable.recovery.lag exists to prevent it",
    ),
    "no-scale-down-timeout": (
        "a leaving Streams member never shuts down on its scale-down timeout: only an assignment leaving it "
        "no active task ends it (R54)",
        "seed 001, Scale Down Timeout (version 1.0, before it: a leaving member whose tasks nobody learns "
        "waits for ever)",
    ),
    "delete-non-empty-group": (
        "DeleteGroups deletes a group whatever its state, members and all, instead of answering NON_EMPTY_GROUP "
        "unless it is Empty",
        "test-only: a deliberately wrong coordinator, not a Kafka bug (GroupCoordinator.handleDeleteGroups)",
    ),
}


COOPERATIVE_PROTOCOLS = ("cooperative", "deferred", "incremental")
MEMBER_PROTOCOLS = COOPERATIVE_PROTOCOLS + ("streams",)  # a cooperative member's rules: Streams members too
# mutation -> the protocols under which it changes anything, read off where model/ tests it: an eager member
# revokes everything before it rejoins (member._rejoin, R14), so it claims nothing and revokes nothing at
# SyncGroup: a mutation of claims (assignors._weigh_claims, contested_claims), of the owned partitions a
# member keeps or revokes (member._sync_response, _on_membership_error's rejoin claim) or of the cooperative
# adjustment (assignors._cooperative_sticky, the cooperative protocol's branch of assign) is a no-op there;
# the deferral lives in the deferred protocol only (assignors._design2, member._join_response); the
# coordinator's and the final assignment's mutations (assign's last lines) apply to every protocol.
MUTATION_PROTOCOLS = {
    "assign-before-revoke": ("cooperative",),
    "contested-claims-unowned": COOPERATIVE_PROTOCOLS,
    "ignore-owned-generation": COOPERATIVE_PROTOCOLS,
    "generation-mod-4": COOPERATIVE_PROTOCOLS,
    "keep-owned-on-rebalance-in-progress": MEMBER_PROTOCOLS,
    "leader-forgets-delay": ("deferred",),
    "connect-leader-state": ("deferred",),
    "no-fencing-on-duplicate-instance": PROTOCOLS,
    "no-commit-fencing": PROTOCOLS,
    "withhold-partition": CONSUMER_PROTOCOLS,
    "keep-owned-on-unknown-member-id": PROTOCOLS,
    "reset-generation-when-empty": PROTOCOLS,
    "static-rejoin-rebalances": PROTOCOLS,
    "assign-twice": CONSUMER_PROTOCOLS,
    "overload-first-member": CONSUMER_PROTOCOLS,
    "keep-revoked": MEMBER_PROTOCOLS,
    "learners-to-anyone": ("streams",),
    "promote-unready-learner": ("streams",),
    "no-scale-down-timeout": ("streams",),
    "delete-non-empty-group": PROTOCOLS,
}
assert MUTATION_PROTOCOLS.keys() == MUTATIONS.keys(), "every mutation names the protocols it applies to"


def refuse_inapplicable(protocol: str, mutations) -> None:
    """Raise ConfigError naming the first of ``mutations`` that changes nothing
    under ``protocol`` (MUTATION_PROTOCOLS): a check would hold vacuously."""
    for name in sorted(mutations):
        if name in MUTATION_PROTOCOLS and protocol not in MUTATION_PROTOCOLS[name]:
            raise ConfigError(f"mutation {name!r} does not apply to the {protocol} protocol: it changes nothing "
                              f"there, so a check would hold vacuously (it applies to "
                              f"{', '.join(MUTATION_PROTOCOLS[name])}; model/config.py MUTATION_PROTOCOLS)")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names it."""


@dataclass(frozen=True)
class GroupConfig:
    """What the pure handlers need to know about the group.

    ``topics``: ((name, partition count), ...); the group's partitions are numbered
    0..P-1 in this order. ``protocol``: "eager" or "cooperative" (the
    RebalanceProtocol the members use). ``assignor``: the leader's partition
    assignor. ``mutations``: known-bad behaviours switched on (see MUTATIONS).
    ``initial_rebalance_delay``: whether group.initial.rebalance.delay.ms is
    positive (KIP-134; the broker's default is 3000 ms). ``max_moves``: how many
    owned partitions the incremental protocol moves per round (Design III).
    Time is in ticks (a check configuration maps ms to ticks, checker/settings):
    ``scheduled_delay_ticks``: scheduled.rebalance.max.delay.ms, how long Design II
    holds lost partitions back (0: not at all, Connect's maxDelay == 0, R33);
    ``rejoin_ticks``: how long after an incremental
    round the group rejoins to move more (Design III); ``revoking_backoff_ticks``:
    the delay before the n-th revoking round in a row (n = 1, 2, ...; the last
    repeats; 0: revoke at once), KAFKA-12495's exponential backoff (Design II).
    ``require_known_member_id``: members join with JoinGroup v4+ (KIP-394), so a new
    dynamic member is first handed its member id with MEMBER_ID_REQUIRED (R36);
    off in the checker's bound (it adds a round trip to every join), on in some
    test vectors.

    Streams (seed 001; ``protocol`` "streams", assignor "streams"): the topics'
    partitions are its tasks; ``stateless``: the bitmask of stateless tasks (R47);
    ``standby_replicas``: num.standby.replicas; ``streams_version``: "1.0" (only
    new-comers take learners) or "2.0" (members take the tasks of leaving ones,
    R50, R51); ``rejoin_mode``: "conservative" (rejoin once every learner is ready)
    or "eager" (as each is, R55); ``scale_down_ticks``: the scale-down timeout (R54).

    Raises ConfigError for an unknown protocol, assignor or mutation, an assignor
    that does not support the protocol, a mutation the protocol has no use for, or
    a topic without partitions.
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
    stateless: int = 0
    standby_replicas: int = 0
    streams_version: str = "2.0"
    rejoin_mode: str = "conservative"
    scale_down_ticks: int = 2

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"unknown protocol {self.protocol!r} (expected one of {', '.join(PROTOCOLS)})")
        if self.assignor not in ASSIGNORS:
            raise ConfigError(f"unknown assignor {self.assignor!r} (expected one of {', '.join(ASSIGNORS)})")
        if (self.protocol == "streams") != (self.assignor == "streams"):
            raise ConfigError(f"assignor {self.assignor!r} does not go with the {self.protocol} protocol "
                              "(the streams protocol and the streams assignor go together)")
        if self.protocol in ("cooperative", "deferred", "incremental") and self.assignor != "cooperative-sticky":
            raise ConfigError(f"assignor {self.assignor!r} does not support the cooperative protocol "
                              "(only cooperative-sticky does)")
        for name in self.mutations:
            if name not in MUTATIONS:
                raise ConfigError(f"unknown mutation {name!r} (expected one of {', '.join(MUTATIONS)})")
        # the deferral's mutations mean nothing without one, even to an assignor called alone (checker/prove.py
        # calls the sticky assignors under the eager protocol with claims); the whole table: refuse_inapplicable
        refuse_inapplicable(self.protocol, (m for m in self.mutations if MUTATION_PROTOCOLS[m] == ("deferred",)))
        for name, least in (("max_moves", 1), ("scheduled_delay_ticks", 0), ("rejoin_ticks", 1)):
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
        if not self.topics:
            raise ConfigError("no topics: the group needs at least one topic")
        for name, count in self.topics:
            if not isinstance(count, int) or count < 1:
                raise ConfigError(f"topic {name!r} needs a positive partition count, got {count!r}")

    @property
    def num_partitions(self) -> int:
        return sum(count for _, count in self.topics)

    @property
    def all_partitions(self) -> int:
        """The bitmask of every partition."""
        return (1 << self.num_partitions) - 1

    @property
    def cooperative(self) -> bool:
        """Members keep what they own while rejoining (Design I, and Design II on top)."""
        return self.protocol in MEMBER_PROTOCOLS

    @property
    def deferred(self) -> bool:
        return self.protocol == "deferred"

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
