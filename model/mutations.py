"""The mutation registry: known-bad behaviours, many of them Kafka's historical
rebalance bugs, each a named replacement of one rule of the model.

A handler calls a rule that a mutation replaces through model/config.py
``rule(cfg, correct)(...)``: ``correct`` is the rule's function as the model has
it (readable in its handler, e.g. model/coordinator.py ``_commit_fencing``, R9),
and ``rule`` returns it unless a mutation switched on in ``cfg`` replaces it. The
replacements are the functions below, each registered with
``@replaces(correct, "mutation-name")``, taking the same arguments and returning
the same shape.

``REGISTRY``: name -> ``Mutation`` (what it does, its source, the SPEC rules it
replaces, the protocols under which it changes anything, whether it is test-only,
and for a Kafka bug its JIRA and the Kafka versions that had it). The check
commands refuse an unknown name, a mutation that changes nothing under the chosen
protocol (``refuse_inapplicable``), and two mutations replacing one rule.

Lookup cost: ``cfg.rules`` (model/config.py) is built once per configuration; with
no mutation it is empty and ``rule`` is one dict lookup.
"""
from __future__ import annotations

from typing import NamedTuple

from .config import CLASSIC_PROTOCOLS as PROTOCOLS  # a mutation of the classic protocol's rules: every classic one
from .config import CONSUMER_PROTOCOLS, COOPERATIVE_PROTOCOLS, KIP848, MEMBER_PROTOCOLS, ConfigError
from .consumer_group.messages import STATIC_LEAVE_EPOCH, MemberState
from .protocol import NO_GENERATION, NO_MEMBER_ID, Error, Heartbeat, Phase, Subscription



class Mutation(NamedTuple):
    """One known-bad behaviour. ``does``: what it switches on; ``source``: where the
    behaviour comes from (a JIRA with its fix, a seed, a Kafka class), or why a
    test-only model is wrong; ``rules``: the SPEC.md rules (R..) it replaces;
    ``protocols``: those under which it changes anything (read off where the model
    calls the rule: an eager member revokes everything before it rejoins, R14, so a
    mutation of claims is a no-op there; the deferral is the deferred protocol's);
    ``jira`` and ``versions``: the Kafka bug it reintroduces, if it is one;
    ``assignors``: the leader's assignors under which it changes anything, where
    the rule it replaces belongs to some of them (empty: any; the eager
    StickyAssignor's user data is read as claims by both sticky assignors)."""

    name: str
    does: str
    source: str
    rules: str
    protocols: tuple
    test_only: bool = False
    jira: str = ""
    versions: str = ""
    assignors: tuple = ()


REGISTRY = {m.name: m for m in (
    Mutation("assign-before-revoke",
             "the cooperative assignor hands a moving partition to its new owner in the same round",
             "seed 000, Design I (the leader withholds revoked partitions); under streams seed 001 with "
             "StreamsPartitionAssignor's follow-up rebalance for tasks pending revocation (R48)", "R23",
             ("cooperative", "streams")),
    Mutation("contested-claims-unowned",
             "a partition claimed by several members tied at the highest generation counts as unclaimed: the "
             "cooperative assignors give it out in the same round (before both claimants have revoked it) and the "
             "deferred protocol holds it back as lost under a full delay",
             "this model before issue 15; against AbstractStickyAssignor.partitionsWithMultiplePreviousOwners with "
             "CooperativeStickyAssignor.adjustAssignment, and IncrementalCooperativeAssignor's duplicatedToRevoke",
             "R22, R23, R33", COOPERATIVE_PROTOCOLS),
    Mutation("ignore-owned-generation",
             "the sticky assignor ignores owned-partition claims from an older generation than the newest claim, "
             "instead of weighing them",
             "KAFKA-12984's generation filter in AbstractStickyAssignor (Kafka 3.0-3.4.0), replaced by KAFKA-14639",
             "R22", COOPERATIVE_PROTOCOLS, jira="KAFKA-12984", versions="3.0-3.4.0 (replaced by KAFKA-14639 in 3.4.1, 3.5)"),
    Mutation("generation-mod-4",
             "the sticky assignors compare owned-partition claims by generation modulo 4, so a claim from "
             "generation 4 ties with one from generation 0 and neither keeps the partition",
             "test-only: a deliberately wrong model, not a Kafka bug", "R22", COOPERATIVE_PROTOCOLS, test_only=True),
    Mutation("keep-owned-on-rebalance-in-progress",
             "a member answered REBALANCE_IN_PROGRESS on SyncGroup rejoins claiming its old partitions with the old "
             "generation (the one they were assigned in) instead of the generation it joined",
             "KAFKA-13419 (ConsumerCoordinator: onAssignment never ran for the failed round; the reset of "
             "KAFKA-13891 was reverted for KAFKA-14016)", "R17", MEMBER_PROTOCOLS,
             jira="KAFKA-13419", versions="every version of the Java consumer; before KIP-792 (3.4) the claim's "
             "generation is the one it was assigned in"),
    Mutation("leader-forgets-delay",
             "the deferral lives only in the leader's memory (seed 000, Design II as written): a new leader that "
             "detects the lost partitions starts the delay again for partitions already deferred, and lost "
             "partitions wait for the delay even when a member with nothing is there",
             "seed 000, Design II (its Discussion names the liveness problem); Kafka Connect's leader state is "
             "connect-leader-state", "R31-R33", ("deferred",)),
    Mutation("connect-leader-state",
             "Kafka Connect's leader state: the previous assignment and the running delay live in the leader's "
             "memory, kept only while it leads round after round; a new leader starts from an empty previous "
             "assignment (what the old one had counts as new work, given out at once), and a member with nothing "
             "does not end a running delay (Connect serves its candidate workers when the delay expires)",
             "IncrementalCooperativeAssignor.performTaskAssignment (previousAssignment reset when previousGenerationId "
             "!= lastCompletedGenerationId), handleLostAssignments; IncrementalCooperativeAssignorTest",
             "R31, R33", ("deferred",)),
    Mutation("no-fencing-on-duplicate-instance",
             "a known group.instance.id joining with an unknown member id is added as another member instead of "
             "replacing (and fencing) the old one",
             "KIP-345, GroupCoordinator.doStaticMemberJoinGroup", "R25", PROTOCOLS),
    Mutation("no-commit-fencing",
             "the coordinator accepts offset commits from stale member ids and generations",
             "GroupCoordinator.handleCommitOffsets; KIP-848: ConsumerGroup.validateOffsetCommit", "R9, K11",
             PROTOCOLS + (KIP848,)),
    Mutation("withhold-partition",
             "the leader's assignor never gives out the first partition once the group has 4 members or more",
             "test-only: a deliberately wrong assignor, not a Kafka bug (a group left unbalanced for good)",
             "R16", CONSUMER_PROTOCOLS, test_only=True),
    Mutation("keep-owned-on-unknown-member-id",
             "a member answered UNKNOWN_MEMBER_ID rejoins under a new member id still owning its partitions "
             "(onJoinPrepare skipped, so they are neither revoked nor lost)",
             "KAFKA-12983 (ConsumerCoordinator.onJoinPrepare skipped when the member id was reset; Kafka 2.4-3.0, "
             "fixed in 3.1)", "R15", PROTOCOLS, jira="KAFKA-12983", versions="2.4-3.0 (fixed in 3.1)"),
    Mutation("reset-generation-when-empty",
             "the coordinator starts the generation again at 0 when the group empties, instead of going on",
             "test-only: a deliberately wrong coordinator, not a Kafka bug (generations must only grow: "
             "GroupMetadata.initNextGeneration)", "R4, K1", PROTOCOLS + (KIP848,), test_only=True),
    Mutation("static-rejoin-rebalances",
             "a static member rejoining a Stable group under a new process triggers a rebalance, as a dynamic "
             "member's would, instead of getting its assignment back",
             "KIP-345 (before it: every restart rebalances); GroupCoordinator.updateStaticMemberAndRebalance",
             "R26", PROTOCOLS),
    Mutation("assign-twice",
             "the leader's assignor also gives the first partition to the last member (R29 order) once the group "
             "has 2 members or more",
             "test-only: a deliberately wrong assignor, not a Kafka bug (R16: every partition to exactly one member)",
             "R16", CONSUMER_PROTOCOLS, test_only=True),
    Mutation("overload-first-member",
             "the leader's assignor moves the last member's partitions (R29 order) to the first member once the "
             "group has 2 members or more",
             "test-only: a deliberately wrong assignor, not a Kafka bug (R16: loads within one)",
             "R16", CONSUMER_PROTOCOLS, test_only=True),
    Mutation("learners-to-anyone",
             "the Streams leader lets every member, not only new-comers, take learner tasks for balance: the "
             "seed's 'naive learner assignment' without the version 1.0 rule (R50)",
             "seed 001, Algorithm Iteration Plan, Version 1.0 (the endless resource shuffling it fears)", "R50",
             ("streams",), assignors=("streams",)),
    Mutation("promote-unready-learner",
             "the Streams leader gives an active task to a member learning it before that learner is ready, "
             "revoking it from the member that runs it (R48's first rule reads 'learning' for 'ready')",
             "seed 001, Assignment Algorithm (active tasks 'to instances with learner tasks that indicate "
             "ready'); KIP-441's acceptable.recovery.lag exists to prevent it", "R48", ("streams",),
             assignors=("streams",)),
    Mutation("max-moves-off-by-one",
             "a Design III round moves one resource of each kind more than max_moves pays for (R67's allowance "
             "counted from zero)",
             "test-only: a deliberately wrong model, not a Kafka bug (seed 000, Design III: at most max_moves "
             "partitions move per round)", "R34, R67", ("incremental",), test_only=True),
    Mutation("rejoin-after-every-assignment",
             "a member asks to rejoin after every assignment, as if the cooperative assignment it got always "
             "failed its validation: the group rebalances for ever, from its very first round",
             "test-only, in the manner of KAFKA-13406 (ConsumerCoordinator requested a rejoin whenever its "
             "validation of a cooperative assignment failed: endless rebalances); an initial state that never "
             "settles, reported as a violation of no_rebalance_storm", "R18", PROTOCOLS, test_only=True),
    Mutation("refuse-static-commits",
             "the coordinator refuses every OffsetCommit that carries a group.instance.id, a current static "
             "member's included (REBALANCE_IN_PROGRESS): a static member never commits",
             "test-only: against GroupCoordinator.handleCommitOffsets (a static member's commit is validated by "
             "validateCurrentMember, then accepted like any other); no property held it before issue 43: nothing "
             "required a commit to succeed", "R9, R24", PROTOCOLS, test_only=True),
    Mutation("refuse-commits-while-preparing",
             "the coordinator refuses OffsetCommits in PreparingRebalance (REBALANCE_IN_PROGRESS), though the "
             "member is current: a member cannot commit what it revokes while the group rejoins",
             "test-only: against GroupCoordinator.handleCommitOffsets, which accepts commits of the current "
             "generation in PreparingRebalance (R9; KIP-429's cooperative members commit before revoking)", "R9",
             PROTOCOLS, test_only=True),
    Mutation("commit-generation-after-reset",
             "a member once answered UNKNOWN_MEMBER_ID commits with generation -1 ever after, though it rejoined "
             "and is Stable again: every commit of it is refused",
             "test-only: against ConsumerCoordinator.sendOffsetCommitRequest (generationIfStable: the generation of "
             "the last successful join); the issue-43 report's 'always commits with generation -1 after "
             "UNKNOWN_MEMBER_ID'", "R41", PROTOCOLS, test_only=True),
    Mutation("heartbeat-ignores-generation",
             "the coordinator answers a Heartbeat of an older generation NONE instead of ILLEGAL_GENERATION, so a "
             "member that missed a generation never learns it and changes nothing (no transition: a stutter)",
             "test-only: against GroupCoordinator.handleHeartbeat (R10)", "R10", PROTOCOLS, test_only=True),
    Mutation("keep-silent-static-leader",
             "a JoinGroup barrier that completes without the old leader keeps it as the leader when it is static "
             "(R27 keeps it in the group): the members that rejoined wait in CompletingRebalance for an assignment "
             "the silent leader never sends, until the pending-sync timeout expels it",
             "test-only: against ClassicGroup.maybeElectNewJoinedLeader (Kafka 4.4: a leader that failed to join "
             "before the rebalance timeout is replaced by a member that joined); stalls each restart of a static "
             "leader for a whole rebalance timeout", "R5, R27", PROTOCOLS, test_only=True),
    Mutation("rebalance-timeout-removes-static",
             "the rebalance timeout removes the static members that did not rejoin, as it does the dynamic ones, "
             "so a static member restarting within session.timeout.ms rejoins as a new member and the group "
             "rebalances",
             "test-only: against KIP-345 and GroupMetadataManager.completeClassicGroupJoin (only dynamic members "
             "that have not rejoined are removed; seed 002, Server Behavior Changes)", "R27", PROTOCOLS,
             test_only=True),
    Mutation("static-rejoin-stale-generation",
             "a static member rejoining a Stable group under a new process is answered with the generation before "
             "the group's: its SyncGroup fails with ILLEGAL_GENERATION and it rejoins, so the group rebalances a few "
             "steps after the restart",
             "test-only: against GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin (the current "
             "generationId); the one-step static_restart_no_rebalance of before issue 43 held with it", "R26",
             PROTOCOLS, test_only=True),
    Mutation("heartbeat-keeps-no-session",
             "a Heartbeat does not restart its member's session timer (JoinGroup, SyncGroup and OffsetCommit still "
             "do): a live, idle member is expired one session.timeout.ms after its last other request",
             "test-only: against GroupCoordinator.completeAndScheduleNextHeartbeatExpiration on every Heartbeat "
             "(R11)", "R11", PROTOCOLS, test_only=True),
    Mutation("ready-on-assignment",
             "a Streams member reports every learner task ready as soon as it is assigned, before its restore has "
             "run (R55's 'restored to within the acceptable lag' read as 'assigned')",
             "test-only: a deliberately wrong member, not a Kafka bug (seed 001: a learner 'indicates ready' once "
             "restored; KIP-441's acceptable.recovery.lag)", "R55", ("streams",), test_only=True),
    Mutation("active-to-lagging-client",
             "KIP-441's assignor gives each stateful active task to its balanced owner whether or not that member "
             "is caught up on it: no task is kept on a caught-up member and no warmup replica is needed (R58's "
             "constraint dropped)",
             "KIP-441 (the stateful task assignment before it moved tasks to clients with no state: the downtime "
             "it exists to prevent); HighAvailabilityTaskAssignor, "
             "TaskMovement.taskIsCaughtUpOnClientOrNoCaughtUpClientsExist", "R58", ("streams",),
             assignors=("high-availability",)),
    Mutation("unbounded-warmups",
             "KIP-441's assignor gives a warmup replica to every balanced owner that lags, however many: "
             "max.warmup.replicas ignored (R58)",
             "KIP-441, max.warmup.replicas (StreamsConfig; it bounds the extra broker and disk load of restoring); "
             "TaskMovement.assignTaskMovements' remainingWarmupReplicas", "R58", ("streams",),
             assignors=("high-availability",)),
    Mutation("no-scale-down-timeout",
             "a leaving Streams member never shuts down on its scale-down timeout: only an assignment leaving it "
             "no active task ends it (R54)",
             "seed 001, Scale Down Timeout (version 1.0, before it: a leaving member whose tasks nobody learns "
             "waits for ever)", "R54", ("streams",)),
    Mutation("delete-non-empty-group",
             "DeleteGroups deletes a group whatever its state, members and all, instead of answering NON_EMPTY_GROUP "
             "unless it is Empty",
             "test-only: a deliberately wrong coordinator, not a Kafka bug (GroupCoordinator.handleDeleteGroups)",
             "R44", PROTOCOLS, test_only=True),
    Mutation("initial-delay-runs-once",
             "the initial rebalance delay completes the first generation when it first passes, although members "
             "joined during it",
             "this model before issue 38; Kafka 4.4.0 runs the delay again while new members arrive "
             "(GroupMetadataManager.tryCompleteInitialRebalanceElseSchedule, ClassicGroup.newMemberAdded); "
             "conform catches it on Kafka's trace tests/kafka_traces/initial_delay_extended_by_late_joiners.jsonl",
             "R30", PROTOCOLS, test_only=True),
    Mutation("initial-rebalance-completes-when-all-joined",
             "an Empty group's first rebalance completes as soon as every member that asked has joined, instead of "
             "waiting for the initial delay (of 0 ms too)",
             "this model and serve before issue 38 when group.initial.rebalance.delay.ms was 0; Kafka 4.4.0's "
             "GroupMetadataManager.maybeCompleteJoinPhase refuses an initial rebalance; conform catches it on "
             "tests/kafka_traces/scale_down_cooperative.jsonl", "R30", PROTOCOLS, test_only=True),
    Mutation("barrier-ignores-pending-members",
             "the JoinGroup barrier completes without waiting for member ids handed out with MEMBER_ID_REQUIRED",
             "this model before issue 38; Kafka 4.4.0's ClassicGroup.hasAllMembersJoined waits for "
             "pendingJoinMembers too (KIP-394)", "R4, R36", PROTOCOLS, test_only=True),
    Mutation("static-leader-told-it-leads-before-v9",
             "a restarted static leader is answered as the leader with skip_assignment whatever its JoinGroup "
             "version, instead of being named a follower (the previous leader's member id) before v9",
             "this model before issue 38; Kafka 4.4.0's GroupMetadataManager."
             "updateStaticMemberThenRebalanceOrCompleteJoin answers skip_assignment only to JoinGroup v9+ "
             "(KIP-814); conform catches it on tests/kafka_traces/static_restart_of_the_leader_joingroup_v5.jsonl "
             "(librdkafka sends v5)", "R26", PROTOCOLS, test_only=True),
    Mutation("unknown-member-id-not-echoed",
             "a JoinGroup refused UNKNOWN_MEMBER_ID is answered with an empty member.id instead of the one it asked "
             "with",
             "this model before issue 38; Kafka 4.4.0 echoes it (GroupMetadataManager.classicGroupJoinExistingMember); "
             "conform catches it on tests/kafka_traces/fenced_commit_and_a_stale_rejoin.jsonl",
             "R24", PROTOCOLS, test_only=True),
    Mutation("no-pending-sync-expiry",
             "a member that got its JoinGroup response and never sends SyncGroup is kept in the group for good: "
             "its heartbeats (the heartbeat thread lives on while the application thread is stuck: the pause "
             "fault) keep its session alive in CompletingRebalance, and no pending-sync timeout removes it, so "
             "a leader that never syncs leaves the group in CompletingRebalance",
             "KAFKA-12890: KAFKA-10134 (PR #8834) let members heartbeat in CompletingRebalance, which satisfied "
             "the DelayedHeartbeat that had caught a missing SyncGroup; fixed by GroupCoordinator.onExpirePendingSync "
             "(PR #10863)", "R11, R12", PROTOCOLS, jira="KAFKA-12890", versions="2.6-2.8.0 (fixed in 2.8.1, 3.0)"),
    Mutation("sticky-user-data-without-generation",
             "the eager StickyAssignor's user data: a member claims its last assignment (remembered across the "
             "revocation and a lost membership, with no generation), and the assignor keeps a partition claimed "
             "by two members with both; use with --assignor sticky",
             "KAFKA-7026: StickyAssignor before KIP-341 (Kafka 2.3) kept a stale consumer's previous assignment "
             "beside the new owner's; KIP-341 added the generation to the user data (ConsumerUserData) so the "
             "newer claim wins", "R13, R22", ("eager",), jira="KAFKA-7026", versions="0.11-2.2 (fixed in 2.3)",
             assignors=("sticky", "cooperative-sticky")),
    Mutation("static-rejoin-completing-no-rebalance",
             "a static member rejoining under a new member id while the group is in CompletingRebalance gets the "
             "current generation without a rebalance, as in Stable; the leader's assignment, keyed by the old "
             "member id, gives the new one nothing",
             "KAFKA-9801: GroupCoordinator.doStaticMemberJoinGroup answered a rejoin in CompletingRebalance from "
             "the current generation; fixed (PR #8405) by updateStaticMemberAndRebalance in that state",
             "R26", PROTOCOLS, jira="KAFKA-9801", versions="2.3-2.4 (fixed in 2.5.0)"),
    Mutation("skip-consecutive-revocation",
             "Design II rounds right after a revoking round revoke nothing and schedule nothing: the imbalance "
             "stays until something else rebalances the group",
             "KAFKA-12495: IncrementalCooperativeAssignor skipped a revocation when the previous round revoked "
             "(to avoid rebalance storms), so a worker joining during a rebalance stayed without work; fixed by "
             "an exponential backoff of consecutive revoking rounds (R40)", "R40", ("deferred",),
             jira="KAFKA-12495", versions="2.3-3.3 (fixed in 3.4.0)"),
    Mutation("replace-static-only-when-stable",
             "a known group.instance.id joining with an unknown member id replaces the old member id only while "
             "the group is Stable; in any other state it is added as another member",
             "KAFKA-8500: GroupCoordinator.doStaticMemberJoinGroup before PR #6899 replaced the member.id in Stable "
             "only, so two consumers could hold one instance id; fixed before 2.3.0 shipped",
             "R25", PROTOCOLS, jira="KAFKA-8500", versions="2.3.0 release candidates (fixed in 2.3.0)"),
    Mutation("reset-generation-on-rebalance-in-progress",
             "a member answered REBALANCE_IN_PROGRESS on SyncGroup resets its generation and rejoins claiming its "
             "partitions with no generation",
             "KAFKA-13891 (ConsumerCoordinator reset the generation on REBALANCE_IN_PROGRESS), reverted by "
             "KAFKA-14016 because with KAFKA-12984's generation filter the claims were dropped and the partitions "
             "revoked from their owner", "R17", COOPERATIVE_PROTOCOLS, jira="KAFKA-13891",
             versions="3.3 (reverted by KAFKA-14016)"),
    Mutation("one-bounce-upgrade",
             "the upgrade to cooperative rebalancing in one rolling bounce: each member goes from [range] "
             "straight to [cooperative-sticky]; the bounced member shares no protocol with the members still on "
             "[range] and is refused with INCONSISTENT_GROUP_PROTOCOL",
             "Kafka's docs/upgrade.html (KIP-429, \"upgrading to cooperative rebalancing\"): two rolling "
             "bounces, never one; GroupMetadata.supportsProtocols refuses a JoinGroup sharing no protocol with "
             "every member (GroupCoordinator.handleJoinGroup: INCONSISTENT_GROUP_PROTOCOL)", "R79, R80", ("eager",)),
    Mutation("incremental-reassigns-lost",
             "the incremental protocol gives a departed member's resources out at once: Design III without "
             "Design II's deferral",
             "this model before issue 21; against seed 000, Design III (\"an extension of the behavior of the "
             "deferred resolution\") and Connect's IncrementalCooperativeAssignor.handleLostAssignments",
             "R68", ("incremental",)),
    Mutation("moves-ignore-cost",
             "a Design III round moves max_moves resources of every kind, a connector's move costing what a "
             "task's does",
             "test-only: against seed 000, Design III (a heavy connector's flush stalls the light tasks moved with "
             "it, so the heavy kind moves fewer at a time; R67)", "R67", ("incremental",), test_only=True),
    Mutation("deleted-connector-kept",
             "the leader reads no deletion from its configuration: a deleted connector and its tasks stay with the "
             "workers that run them",
             "test-only: against IncrementalCooperativeAssignor.performTaskAssignment (deleted = the previous "
             "assignment less the configSnapshot's connectors and tasks, revoked from every worker, deletedToRevoke; "
             "R81)", "R81", ("deferred", "incremental"), test_only=True),
    Mutation("keep-revoked",
             "a member told to revoke partitions (owned - assigned) keeps owning them, though it rejoins as if it "
             "had revoked them",
             "test-only: a deliberately wrong member, not a Kafka bug (R18; a rebalance storm)", "R18",
             MEMBER_PROTOCOLS, test_only=True),
    Mutation("assign-unsubscribed",
             "the assignors ignore subscriptions: any member may be given any partition of an existing topic",
             "test-only: against AbstractPartitionAssignor.assign (partitions of each member's subscribed topics "
             "only) and AbstractStickyAssignor.generalAssign", "R61, R65", CONSUMER_PROTOCOLS, test_only=True),
    Mutation("defer-new-subscriptions",
             "a Design II leader counts every unclaimed partition as lost: those of a new topic, of a topic a "
             "member newly subscribes to and those a member released on dropping its topic are deferred",
             "seed 000, Design II case (a): lost partitions from new subscriptions are given out at once "
             "(against it)", "R64", ("deferred",)),
    Mutation("admin-removal-without-rebalance",
             "static members an admin client removes by group.instance.id (batch LeaveGroup) are dropped from "
             "the group without a rebalance: their partitions stay assigned to nobody",
             "test-only: a deliberately wrong coordinator (seed 002, KIP-345 admin removal exists so a scale-down "
             "moves the partitions at once; GroupCoordinator.handleLeaveGroup -> removeMemberAndUpdateGroup -> "
             "maybePrepareRebalance)", "R71", PROTOCOLS, test_only=True),
    Mutation("rejoin-before-revoking",
             "with the rejoin flag on, a member told to rejoin rejoins before it revokes: it keeps what it was "
             "told to give up and claims it again (use with group.rejoin_flag)",
             "test-only: a deliberately wrong member (seed 000, Design I: stop processing the revoked partitions, "
             "commit, then join again; the flag only spares the others the wait for a heartbeat)", "R74",
             COOPERATIVE_PROTOCOLS, test_only=True),
    Mutation("failover-stale-generation",
             "a coordinator taking over after a failover resumes the group one generation behind its stored "
             "record, so it hands out a generation already used",
             "test-only: a deliberately wrong coordinator (GroupMetadata.loadGroup resumes at the record's "
             "generationId; generation fencing, R9, needs generations never handed out twice)", "R72", PROTOCOLS,
             test_only=True),
    # --- KIP-848, the consumer group protocol (K rules in spec/KIP848.md) ---
    Mutation("partition-epoch-lost-on-reassign",
             "the coordinator's partition epochs are updated set by set (assigned, then pending revocation), so a "
             "partition pending revocation that is targeted to its member again loses its epoch: it counts as free",
             "KAFKA-16147: ConsumerGroup.maybeUpdatePartitionEpoch removed the old pending revocations after adding "
             "the new assignment (a partition assigned to two members); fixed by PR #15212 (2024-01)", "K6",
             (KIP848,), jira="KAFKA-16147", versions="3.7 early access (fixed in 3.8.0)"),
    Mutation("own-revocations-unreleased",
             "reconciliation counts a partition the member itself is revoking as held by another member: it waits in "
             "UNRELEASED_PARTITIONS for its own partition",
             "KAFKA-19449: CurrentAssignmentBuilder.computeNextAssignment's unreleased partitions included the member's "
             "own partitions pending revocation; fixed by PR #20781 (2025-10)", "K5", (KIP848,),
             jira="KAFKA-19449", versions="3.8-4.1 (fixed in 4.2)"),
    Mutation("keep-unsubscribed-partitions",
             "a member that changes its subscription keeps the partitions of the topics it dropped until a new "
             "target assignment is computed; a regular expression not resolved yet leaves them assigned",
             "KAFKA-19431: the assignment was not made consistent with a changed subscription "
             "(CurrentAssignmentBuilder.updateCurrentAssignment and the empty target of an unsubscribed topic); "
             "fixed by PR #20055 (2025-06)", "K5, K9", (KIP848,), jira="KAFKA-19431",
             versions="3.8-4.0 (fixed in 4.1)"),
    Mutation("bump-epoch-leaving-unrevoked",
             "a member leaving UNREVOKED_PARTITIONS is reconciled at its epoch + 1: one that revoked for a "
             "subscription change at the target epoch goes past the target assignment epoch",
             "KAFKA-19974: CurrentAssignmentBuilder.build reconciled UNREVOKED_PARTITIONS at memberEpoch + 1, which "
             "after KAFKA-19431 let a partition be owned by two members at one epoch; fixed by PR #21107 (2025-12)",
             "K5", (KIP848,), jira="KAFKA-19974", versions="4.1 (fixed in 4.2)"),
    Mutation("extras-to-first-members",
             "the uniform assignor gives the extra partitions (total mod members) to the first members in iteration "
             "order, taking them from members that already hold one: an already balanced assignment moves",
             "KAFKA-18688: UniformHomogeneousAssignmentBuilder.maybeRevokePartitions; fixed by PR #19677 (2025-05): "
             "any member may keep the extra partition", "K16", (KIP848,), jira="KAFKA-18688",
             versions="3.8-4.0 (fixed in 4.1)", assignors=("uniform",)),
    Mutation("same-assignment-not-acknowledged",
             "a client given an assignment equal to the partitions it owns does not reconcile it, so it never "
             "acknowledges it: a coordinator waiting for its revocation waits for good",
             "KAFKA-16185 and KAFKA-16312: the membership manager compared the target with the owned partitions "
             "(sameAssignmentReceived) and skipped the reconciliation and its acknowledgement; fixed by PR #15511 "
             "(2024-03, local epochs in reconciliation)", "K13", (KIP848,), jira="KAFKA-16185, KAFKA-16312",
             versions="3.7 early access (fixed in 3.8.0)"),
    Mutation("fetch-while-lost",
             "a client told it is fenced keeps fetching and processing its partitions until its onPartitionsLost "
             "callback completes",
             "KAFKA-20321: ConsumerMembershipManager.signalPartitionsLost invoked the callback before marking the "
             "partitions pending revocation; fixed by PR #21781 (2026-03)", "K14", (KIP848,), jira="KAFKA-20321",
             versions="3.8-4.2 (fixed by PR #21781)"),
    Mutation("empty-group-keeps-assignment-epoch",
             "fencing the last member bumps the group epoch but not the target assignment epoch: the empty group's "
             "epochs differ",
             "KAFKA-20442: consumerGroupFenceMember wrote no target assignment metadata record for an emptied group; "
             "fixed by PR #22045 (2026-04)", "K7", (KIP848,), jira="KAFKA-20442", versions="3.8-4.3 (fixed in 4.4)"),
    Mutation("preferred-assignor-unbumped",
             "a heartbeat that changes the server assignor most members prefer (a majority of them rejoined naming "
             "another) does not bump the group epoch: the target stays the old assignor's until something else "
             "bumps it",
             "KAFKA-20434: consumerGroupHeartbeat's bumpGroupEpoch read only the subscribed topic names and regex, "
             "not the preferred server assignor; fixed by PR #22036 (2026-04, "
             "GroupMetadataManager.hasPreferredServerAssignorChanged)", "K1", (KIP848,), jira="KAFKA-20434",
             versions="3.8-4.3 (fixed in 4.4)"),
    Mutation("epoch-zero-fenced",
             "a member rejoining at epoch 0 while the coordinator still has it at a later epoch is answered "
             "FENCED_MEMBER_EPOCH, again on every rejoin, until its session times out",
             "KAFKA-19233: throwIfConsumerGroupMemberEpochIsInvalid did not accept epoch 0 as a rejoin; fixed by "
             "PR #21305 (2026-01)", "K3", (KIP848,), jira="KAFKA-19233", versions="3.8-4.2 (fixed by PR #21305)"),
    Mutation("static-rejoin-unreleased",
             "a static member joining at epoch 0 under the member id that already holds its instance id (its join's "
             "response was lost, or it was fenced) is answered UNRELEASED_INSTANCE_ID, fatal for the Java consumer",
             "apache/kafka PR #23542 (open, 2026-09): GroupMetadataManager.getOrMaybeSubscribeStaticConsumerGroupMember "
             "treats the join as a replacement of the instance id's owner, itself; Kafka 4.4 behaves so", "K8",
             (KIP848,), versions="3.8-4.4 (PR #23542 open)"),
    # --- KIP-848's online migration (M rules in spec/SPEC.md, "Online migration") ---
    Mutation("classic-instance-unreleased",
             "a static member joining with the consumer protocol is refused UNRELEASED_INSTANCE_ID, fatal for the "
             "Java consumer, while a classic member holds its instance id: a classic static member never sends "
             "LeaveGroup, so a rolling upgrade's restarted process fails",
             "KAFKA-17228: getOrMaybeSubscribeStaticConsumerGroupMember threw UNRELEASED_INSTANCE_ID whatever "
             "protocol the holder spoke; fixed by PR #16800 (2024-08)", "M7", (KIP848,), jira="KAFKA-17228",
             versions="3.8.0 (fixed in 3.9.0)"),
    Mutation("empty-classic-group-kept",
             "a ConsumerGroupHeartbeat joining an empty classic group is refused GROUP_ID_NOT_FOUND, fatal for the "
             "Java consumer: the group is not converted",
             "KAFKA-16313: before the offline migration, getOrMaybeCreateConsumerGroup refused a group id held by a "
             "classic group, empty or not; added by PR #15546 (2024-03)", "M1", (KIP848,), jira="KAFKA-16313",
             versions="3.7 (fixed in 3.8.0)"),
    Mutation("prepare-clears-stored-assignments",
             "every rebalance clears the classic group's stored assignments, one started from Stable too: an online "
             "upgrade then gives a classic member nothing, and its partitions to others while it still owns them",
             "test-only (this model's R3 until 2026-11-28): GroupMetadataManager.prepareRebalance clears them only "
             "from CompletingRebalance (GroupMetadataManager.java:7806-7807, Kafka 4.4.0)", "R3", (KIP848,),
             test_only=True),
    Mutation("completing-keeps-stored-assignments",
             "a rebalance interrupting CompletingRebalance keeps the previous generation's stored assignments",
             "test-only: prepareRebalance calls resetAndPropagateAssignmentWithError in CompletingRebalance "
             "(GroupMetadataManager.java:7806-7807, Kafka 4.4.0)", "R3", PROTOCOLS, test_only=True),
    Mutation("upgrade-drops-assignment",
             "an upgraded classic group's members start with nothing assigned: the consumer group hands their "
             "partitions to others while their clients still own them",
             "test-only: ConsumerGroup.fromClassicGroup keeps each member's decoded assignment", "M1", (KIP848,),
             test_only=True),
    Mutation("downgrade-restarts-generation",
             "a downgraded group's generation restarts at 0 instead of the consumer group's epoch",
             "test-only: ClassicGroup.fromConsumerGroup starts at the group epoch", "M2", (KIP848,), test_only=True),
    Mutation("classic-member-not-told-to-rejoin",
             "a classic member's Heartbeat in a consumer group is answered NONE while its epoch is behind the target "
             "assignment or it has partitions to revoke or to take: it never rejoins to reconcile",
             "test-only: classicGroupHeartbeatToConsumerGroup answers REBALANCE_IN_PROGRESS then", "M5", (KIP848,),
             test_only=True),
    Mutation("upgrade-drops-user-data",
             "a classic group whose assignments carry an assignor's user data (librdkafka's cooperative-sticky) is "
             "upgraded, its user data lost",
             "test-only: ConsumerGroup.fromClassicGroup refuses it (ConsumerGroup.java:1240, Kafka 4.4.0); the model "
             "upgraded it until librdkafka's migration on Kafka showed it", "M1", (KIP848,), test_only=True),
    Mutation("classic-join-names-no-protocol",
             "a classic member's JoinGroup answered by a consumer group names no protocol",
             "test-only: classicGroupJoinToConsumerGroup names the member's first protocol "
             "(GroupMetadataManager.java:2902, Kafka 4.4.0); the model named none until the recorded Kafka "
             "migration showed it", "M3", (KIP848,), test_only=True),
    Mutation("report-current-assignment",
             "a heartbeat reports the client's current assignment only, not the partitions a reconciliation in "
             "progress or pending will still add: the coordinator takes a partition the report leaves out as "
             "revoked and may give it to another member, while the client goes on to add it",
             "the Java consumer 4.4 (ConsumerHeartbeatRequestManager.HeartbeatState.buildRequestData reports "
             "membershipManager.currentAssignment()), found by this model: docs/kip848.md", "K12", (KIP848,),
             versions="3.8-4.4"),
    Mutation("describe-omits-pending-revocation",
             "ConsumerGroupDescribe gives a member's assigned partitions only, without those pending revocation",
             "test-only: ConsumerGroupMember.asConsumerGroupDescribeMember gives both (ConsumerGroupMember.java:"
             "487-488, Kafka 4.4.0); serve and conform gave the assigned ones only until Kafka described a "
             "revoking member so", "K17", (KIP848,), test_only=True),
    Mutation("commit-at-member-epoch-only",
             "the coordinator accepts a member's OffsetCommit only at its current member epoch, refusing one at an "
             "older epoch for partitions the member has held since (no assignment epochs)",
             "KIP-1251 (KAFKA-20066): before it ConsumerGroup.validateOffsetCommit required the member's epoch "
             "(validateMemberEpoch); since Kafka 4.3.0 createAssignmentEpochValidator lets a commit at an older "
             "epoch through for partitions assigned at or before it", "K11",
             (KIP848,), versions="3.7-4.2 (KIP-1251 in 4.3.0)"),
    Mutation("grant-before-release",
             "reconciliation gives a member its target partitions whether or not another member still holds them",
             "test-only: against CurrentAssignmentBuilder's unreleased partitions (a partition is assigned only once "
             "its epoch is free)", "K5", (KIP848,), test_only=True),
    Mutation("unreleased-as-stable",
             "a member waiting for partitions other members hold is marked STABLE at the target epoch instead of "
             "UNRELEASED_PARTITIONS",
             "test-only: against CurrentAssignmentBuilder.computeNextAssignment's states", "K5", (KIP848,),
             test_only=True),
    Mutation("server-assignor-drops-partition",
             "the server assignor leaves the first partition unassigned once the group has 2 members or more",
             "test-only: a deliberately wrong assignor (ConsumerGroupPartitionAssignor: every subscribed partition "
             "to exactly one member)", "K16", (KIP848,), test_only=True),
)}

# mutation name -> ((correct rule, its replacement), ...), filled by ``replaces``
_REPLACEMENTS: dict = {}


def replaces(correct, mutation: str):
    """Register the decorated function as ``mutation``'s replacement of the rule
    ``correct`` (a function of model/). Raises KeyError for an unregistered name."""
    REGISTRY[mutation]  # noqa: B018 - a replacement belongs to a registered mutation

    def register(fn):
        _REPLACEMENTS.setdefault(mutation, []).append((correct, fn))
        return fn
    return register


def replacements(mutations) -> dict:
    """``{correct rule: replacement}`` for the named mutations (GroupConfig.rules).
    Raises ConfigError for an unknown name or two mutations replacing one rule."""
    by_rule: dict = {}
    for name in sorted(mutations):
        if name not in REGISTRY:
            raise ConfigError(f"unknown mutation {name!r} (expected one of {', '.join(REGISTRY)})")
        for correct, fn in _REPLACEMENTS.get(name, ()):
            if correct in by_rule:
                raise ConfigError(f"mutations {by_rule[correct][0]!r} and {name!r} replace the same rule "
                                  f"({correct.__name__}); switch on one of them")
            by_rule[correct] = (name, fn)
    return {correct: fn for correct, (_, fn) in by_rule.items()}


def refuse_inapplicable(protocol: str, mutations, assignor: str | None = None) -> None:
    """Raise ConfigError naming the first of ``mutations`` that changes nothing
    under ``protocol`` (``Mutation.protocols``) or, given one, under the leader's
    ``assignor`` (``Mutation.assignors``; your own assignor, ``module:function``,
    may read any rule's output, so none is refused for it): a check would hold
    vacuously."""
    for name in sorted(mutations):
        m = REGISTRY.get(name)
        if m is None:
            continue
        if protocol not in m.protocols:
            raise ConfigError(f"mutation {name!r} does not apply to the {protocol} protocol: it changes nothing "
                              f"there, so a check would hold vacuously (it applies to "
                              f"{', '.join(m.protocols)}; model/mutations.py REGISTRY)")
        if assignor is not None and ":" not in assignor and m.assignors and assignor not in m.assignors:
            raise ConfigError(f"mutation {name!r} does not apply to the {assignor} assignor: it replaces a rule of "
                              f"the {' and '.join(m.assignors)} assignor only, so a check would hold vacuously "
                              f"(use --assignor {m.assignors[0]}; model/mutations.py REGISTRY)")


# ---- the replacements, by the handler whose rule they replace ----------------------------------------------
from . import assignors, coordinator, failover, high_availability, member, streams, upgrade  # noqa: E402 - the rules replaced are theirs; they import `rule`
from .consumer_group import (  # noqa: E402
    assignors as cg_assignors, coordinator as cg_coordinator, group as cg_group, membership as cg_membership,
    classic_members as cg_classic_members, migration as cg_migration, reconciliation as cg_reconciliation,
)


@replaces(coordinator._clears_stored_assignments, "prepare-clears-stored-assignments")
def _prepare_clears_stored_assignments(group):
    return True


@replaces(coordinator._clears_stored_assignments, "completing-keeps-stored-assignments")
def _completing_keeps_stored_assignments(group):
    return False


@replaces(coordinator._initial_delay_extended, "initial-delay-runs-once")
def _initial_delay_not_extended(group) -> bool:
    return False


@replaces(coordinator._join_may_complete, "initial-rebalance-completes-when-all-joined")
def _join_completes_initial_rebalance(group) -> bool:
    return True


@replaces(coordinator._all_joined, "barrier-ignores-pending-members")
def _all_joined_ignoring_pending(group) -> bool:
    return coordinator._members_joined(group)


@replaces(coordinator._refused_join_member_id, "unknown-member-id-not-echoed")
def _unknown_member_id_empty(mid: int, error):
    return coordinator.NO_MEMBER_ID if error == coordinator.Error.UNKNOWN_MEMBER_ID else mid


@replaces(coordinator._skip_assignment_supported, "static-leader-told-it-leads-before-v9")
def _skip_assignment_always(req) -> bool:
    return True


@replaces(coordinator._commit_fencing, "no-commit-fencing")
def _accept_every_commit(group, mid: int, generation: int, iid: int) -> bool:
    return True


@replaces(member._rejoins_after_assignment, "rejoin-after-every-assignment")
def _always_rejoin(revoked: int) -> bool:
    return True


@replaces(coordinator._commit_fencing, "refuse-static-commits")
def _refuse_static_commits(group, mid: int, generation: int, iid: int) -> bool:
    return not iid and coordinator._commit_fencing(group, mid, generation, iid)


@replaces(coordinator._commit_fencing, "refuse-commits-while-preparing")
def _refuse_commits_while_preparing(group, mid: int, generation: int, iid: int) -> bool:
    return group.phase == Phase.STABLE and coordinator._commit_fencing(group, mid, generation, iid)


@replaces(member._on_unknown_member_id, "commit-generation-after-reset")
def _remember_the_reset(c, out: list):
    return member._on_unknown_member_id(c, out)._replace(reset=True)


@replaces(member._commit_generation, "commit-generation-after-reset")
def _commit_reset_generation(c) -> int:
    return NO_GENERATION if c.reset else c.generation


@replaces(coordinator._heartbeat_error, "heartbeat-ignores-generation")
def _stale_heartbeat_answered_none(group, req):
    error = coordinator._generation_error(group, req)
    return Error.NONE if error == Error.ILLEGAL_GENERATION else error


@replaces(coordinator._replaced_instance, "no-fencing-on-duplicate-instance")
def _replace_no_instance(group, iid: int):
    return None


@replaces(coordinator._static_rejoin_keeps_generation, "static-rejoin-rebalances")
def _static_rejoin_rebalances(group) -> bool:
    return False


@replaces(coordinator._static_rejoin_keeps_generation, "static-rejoin-completing-no-rebalance")
def _static_rejoin_keeps_generation_while_completing(group) -> bool:
    return (group.phase in (Phase.STABLE, Phase.COMPLETING_REBALANCE)
            and coordinator.select_protocol(group.members) == group.protocol)


@replaces(coordinator._replaced_instance, "replace-static-only-when-stable")
def _replace_instance_when_stable(group, iid: int):
    return coordinator._replaced_instance(group, iid) if group.phase == Phase.STABLE else None


@replaces(coordinator._next_generation, "reset-generation-when-empty")
def _restart_generation_when_empty(group) -> int:
    return group.generation + 1 if group.members else 0


@replaces(streams._promotable, "promote-unready-learner")
def _promote_learning() -> str:
    return "learning"


@replaces(assignors._move_allowance, "max-moves-off-by-one")
def _one_move_too_many(cfg, cost: int) -> int:
    return max(1, cfg.max_moves // cost) + 1


@replaces(coordinator._barrier_leader, "keep-silent-static-leader")
def _keep_static_leader(group, joined: list) -> int:
    old = coordinator.find(group, group.leader)
    if group.leader in joined or (old is not None and old.instance_id):
        return group.leader
    return group.first_joiner if group.first_joiner in joined else joined[0]


@replaces(coordinator._kept_at_rebalance_timeout, "rebalance-timeout-removes-static")
def _keep_only_rejoined(m) -> bool:
    return m.awaiting_join


@replaces(coordinator._static_rejoin_generation, "static-rejoin-stale-generation")
def _generation_before(group) -> int:
    return group.generation - 1


@replaces(coordinator._session_refreshed, "heartbeat-keeps-no-session")
def _heartbeat_refreshes_nothing(request) -> int:
    return NO_MEMBER_ID if type(request) is Heartbeat else coordinator._session_refreshed(request)


@replaces(member._ready_learners, "ready-on-assignment")
def _every_learner_ready(learning: int, ready: int, standby: int) -> int:
    return learning


@replaces(streams._learner_takers, "learners-to-anyone")
def _anyone_learns(memory, takers, quota: dict, stateful: int) -> tuple:
    # the naive rule: anyone under the mean, from anyone heavier
    return list(takers), 1, {v.mid: -(-stateful.bit_count() // len(takers)) for v in takers}


@replaces(high_availability._destination_caught_up, "active-to-lagging-client")
def _any_destination(v, bit: int, anyone_caught_up: bool) -> bool:
    return True


@replaces(high_availability._warmup_budget, "unbounded-warmups")
def _every_movement_warms_up(cfg) -> int:
    return cfg.num_partitions


@replaces(member._scale_down_timeout_ends, "no-scale-down-timeout")
def _scale_down_never_times_out() -> bool:
    return False


@replaces(coordinator._deletable, "delete-non-empty-group")
def _delete_any_live_group(group) -> bool:
    return group.phase != Phase.DEAD


@replaces(coordinator._kept_alive, "no-pending-sync-expiry")
def _kept_alive_owing_sync(m) -> bool:
    return m.awaiting_join or m.awaiting_sync or m.pending_sync  # its heartbeats satisfy the session timer


@replaces(coordinator._late_syncers, "no-pending-sync-expiry")
def _nobody_late(group) -> list:
    return []


@replaces(member._remembered, "sticky-user-data-without-generation")
def _sticky_user_data(c, assigned: int) -> int:
    return assigned  # StickyAssignor.onAssignment's memberAssignment: kept until the next assignment


@replaces(member.subscription, "sticky-user-data-without-generation")
def _claim_user_data(c):
    # an eager member has revoked everything: it claims its user data, with no generation
    sub = member.subscription(c)
    return sub if c.owned or not c.user_data else Subscription(c.user_data, NO_GENERATION)


@replaces(assignors._weighed, "sticky-user-data-without-generation")
def _keep_every_claim(members, claimants: list, weight) -> tuple:
    won = {mid: 0 for mid, _, _ in members}
    for mid, sub in claimants:
        won[mid] = sub.owned  # each claimant keeps its whole claim: a partition claimed twice stays with both
    return won, 0


@replaces(member._on_unknown_member_id, "keep-owned-on-unknown-member-id")
def _keep_owned_on_unknown_member_id(c, out: list):
    # KAFKA-12983: onJoinPrepare skipped, the partitions neither revoked nor lost
    return c._replace(member_id=NO_MEMBER_ID, generation=NO_GENERATION)


@replaces(member._claim_after_rebalance_in_progress, "keep-owned-on-rebalance-in-progress")
def _claim_with_assigned_generation(c):
    return c  # KAFKA-13419: onAssignment never ran for the failed round


@replaces(member._claim_after_rebalance_in_progress, "reset-generation-on-rebalance-in-progress")
def _claim_with_no_generation(c):
    return c._replace(owned_generation=NO_GENERATION, generation=NO_GENERATION)


@replaces(member._owned_after_sync, "keep-revoked")
def _keep_revoked(owned: int, assigned: int) -> int:
    return owned | assigned  # the revocation is announced, not done


@replaces(member._initial_memory, "connect-leader-state")
def _connect_initial_memory(leader: bool, group_assigned: int) -> tuple:
    return (group_assigned, 0) if leader else (0, 0)


@replaces(member._memory_after_assigning, "connect-leader-state")
def _connect_memory_after_assigning(memory: tuple, assignments) -> tuple:
    # Connect: the leader's state counts only if the last round it led completed (previousGenerationId ==
    # lastCompletedGenerationId); it is stored again when this round's SyncGroup succeeds
    return (0, 0)


@replaces(member._memory_after_sync, "connect-leader-state")
def _connect_memory_after_sync(c, assignment) -> tuple:
    if c.leader and assignment.echo:
        assigned_all, held = assignment.echo[:2]  # the round it led completed: its state counts (Connect)
        return (assigned_all | held, held)
    return c.memory


@replaces(member._memory_after_assigning, "leader-forgets-delay")
def _forgetful_memory_after_assigning(memory: tuple, assignments) -> tuple:
    return (0, assignments[0][1].echo[1]) if assignments else memory


@replaces(assignors._previous_round, "leader-forgets-delay")
def _forgetful_previous_round(memory: tuple, echo: tuple) -> tuple:
    return echo[1], echo[2], memory[1], False


@replaces(assignors._previous_round, "connect-leader-state")
def _connect_previous_round(memory: tuple, echo: tuple) -> tuple:
    return memory[0], memory[1], memory[1], False


@replaces(assignors._revoking_backoff, "skip-consecutive-revocation")
def _skip_consecutive_revocation(cfg, mids, claims, echo: tuple, left: int) -> tuple:
    out = assignors._cooperative_sticky(cfg, mids, claims)
    if not assignors._moving(claims.won, out):
        return out, 0, (0, 0)
    if echo[3]:  # the last round revoked: revoke nothing now, and schedule nothing
        return assignors._deferring(cfg, mids, claims.won, claims.contested), 0, (0, 0)
    return out, 0, (1, 0)


@replaces(assignors._claim_weight, "generation-mod-4")
def _claim_weight_mod_4(generation: int) -> int:
    return generation % 4


@replaces(assignors._counted_claims, "ignore-owned-generation")
def _newest_claims_only(claimants: list) -> list:
    # KAFKA-12984's filter: only claims of the newest generation count
    if not claimants:
        return claimants
    newest = max(sub.generation for _, sub in claimants)
    return [(mid, sub) for mid, sub in claimants if sub.generation == newest]


@replaces(assignors._contested, "contested-claims-unowned")
def _nothing_contested(contested: int) -> int:
    return 0


@replaces(assignors._withheld, "assign-before-revoke")
def _withhold_nothing(claims, out: dict) -> int:
    return 0


@replaces(streams._moving, "assign-before-revoke")
def _move_tasks_at_once(views, active: dict) -> int:
    return 0


@replaces(assignors._given, "withhold-partition")
def _withhold_first_partition(mids, out: dict) -> dict:
    return {m: mask & ~1 for m, mask in out.items()} if len(mids) >= 4 else out


@replaces(assignors._given, "assign-twice")
def _assign_first_partition_twice(mids, out: dict) -> dict:
    if len(mids) >= 2:
        out[mids[-1]] |= 1
    return out


@replaces(assignors._given, "overload-first-member")
def _overload_first_member(mids, out: dict) -> dict:
    if len(mids) >= 2:
        out[mids[0]], out[mids[-1]] = out[mids[0]] | out[mids[-1]], 0
    return out


@replaces(upgrade.rolling_upgrade, "one-bounce-upgrade")
def _one_bounce() -> tuple:
    return (upgrade.RANGE, upgrade.COOPERATIVE_ONLY)


@replaces(coordinator._remove_by_admin, "admin-removal-without-rebalance")
def _remove_without_rebalance(cfg, group, mids, out: list):
    return group._replace(members=tuple(m for m in group.members if m.member_id not in mids))


@replaces(failover._loaded_generation, "failover-stale-generation")
def _stale_generation(record):
    return max(record.generation - 1, 0)


@replaces(member._owned_when_told_to_rejoin, "rejoin-before-revoking")
def _rejoin_keeping_revoked(owned: int, assigned: int) -> int:
    return owned | assigned
@replaces(assignors._deferral, "incremental-reassigns-lost")
def _incremental_defers_nothing(cfg, *args) -> tuple:
    return (0, 0) if cfg.protocol == "incremental" else assignors._deferral(cfg, *args)


@replaces(assignors._deleted, "deleted-connector-kept")
def _nothing_deleted(cfg, metadata: int) -> int:
    return 0


@replaces(assignors._move_allowance, "moves-ignore-cost")
def _allowance_ignoring_cost(cfg, cost: int) -> int:
    return cfg.max_moves
@replaces(assignors._subscribers, "assign-unsubscribed")
def _everyone_subscribed(cfg, members, metadata: int) -> dict:
    return {mid: cfg.partitions_of_topics(metadata) for mid, _, _ in members}


@replaces(assignors._lost, "defer-new-subscriptions")
def _every_unclaimed_lost(previous: int, losable: int) -> int:
    return previous | losable


# ---- KIP-848 -------------------------------------------------------------------------------------------------
@replaces(cg_coordinator.commit_error, "no-commit-fencing")
def _accept_every_member_commit(group, mid: int, epoch: int, partitions: int):
    return Error.NONE


@replaces(cg_coordinator.commit_error, "commit-at-member-epoch-only")
def _commit_at_member_epoch_only(group, mid: int, epoch: int, partitions: int):
    member = cg_group.find(group, mid)
    if member is not None and member.epoch != epoch:
        return Error.STALE_MEMBER_EPOCH
    return cg_coordinator.commit_error(group, mid, epoch, partitions)


@replaces(cg_coordinator.bumped_epoch, "reset-generation-when-empty")
def _restart_epoch_when_empty(group, members: tuple) -> int:
    return group.epoch + 1 if members else 0


@replaces(cg_group.partition_epochs_after, "partition-epoch-lost-on-reassign")
def _epochs_set_by_set(epochs: tuple, old, new) -> tuple:
    # before KAFKA-16147: the assigned set's epochs, then the pending set's, each only if it changed; a removal
    # frees a partition whatever its epoch (so the pending set's removal frees one just reassigned)
    out = list(epochs)
    for field in ("assigned", "revoking"):
        before = getattr(old, field) if old is not None else 0
        after = getattr(new, field) if new is not None else 0
        if old is None or new is None or before != after:
            for p in range(len(out)):
                if before >> p & 1:
                    out[p] = -1
            for p in range(len(out)):
                if after >> p & 1:
                    out[p] = new.epoch
    return tuple(out)


@replaces(cg_reconciliation.unreleased, "own-revocations-unreleased")
def _own_revocations_unreleased(member, wanted: int, held: int) -> int:
    return wanted & held


@replaces(cg_reconciliation.unreleased, "grant-before-release")
def _nothing_unreleased(member, wanted: int, held: int) -> int:
    return 0


@replaces(cg_reconciliation.consistent_assignment, "keep-unsubscribed-partitions")
def _assignment_kept(member, owned, subscribed: int):
    return member


@replaces(cg_reconciliation.subscribed_target, "keep-unsubscribed-partitions")
def _target_as_assigned(target: int, subscribed: int) -> int:
    return target


@replaces(cg_reconciliation.revoking_epoch, "bump-epoch-leaving-unrevoked")
def _epoch_after_revoking(member) -> int:
    return member.epoch + 1


@replaces(cg_reconciliation.waiting_state, "unreleased-as-stable")
def _stable_while_waiting(blocked: int):
    return MemberState.STABLE


@replaces(cg_assignors._extras_to_holders, "extras-to-first-members")
def _extras_in_order(kept: list, counts: list, quota: int, extras: int) -> list:
    return [quota + 1 if i < extras else quota for i in range(len(counts))]


@replaces(cg_assignors.assign, "server-assignor-drops-partition")
def _assign_dropping_first(cfg, members, current: dict, existing: int, name=None) -> tuple:
    out = cg_assignors.assign(cfg, members, current, existing, name)
    return tuple((m, parts & ~1) for m, parts in out) if len(out) >= 2 else out


@replaces(cg_membership.received_target, "same-assignment-not-acknowledged")
def _same_as_owned_reconciled(c, assignment: int):
    return c._replace(target=assignment, reconciled=assignment == c.owned)


@replaces(cg_membership.fenced_ownership, "fetch-while-lost")
def _fetching_until_released(owned: int) -> int:
    return owned


@replaces(cg_membership.reported_ownership, "report-current-assignment")
def _current_only(c) -> int:
    return c.current if c.current != cg_membership.NONE else 0


@replaces(cg_group.described_assignment, "describe-omits-pending-revocation")
def _described_assigned_only(m) -> int:
    return m.assigned


@replaces(cg_coordinator.emptied_target_epoch, "empty-group-keeps-assignment-epoch")
def _target_epoch_kept(group) -> int:
    return group.target_epoch


@replaces(cg_coordinator.assignor_changed, "preferred-assignor-unbumped")
def _assignor_change_ignored(before: str, after: str) -> bool:
    return False


@replaces(cg_coordinator.epoch_error, "epoch-zero-fenced")
def _epoch_zero_checked(member, received: int, owned) -> object:
    # KAFKA-19233: no early return for 0; a join on a member known at a later epoch is fenced
    if received == 0 and member.epoch > 0:
        return Error.FENCED_MEMBER_EPOCH
    return cg_coordinator.epoch_error(member, received, owned)


@replaces(cg_coordinator.rejoining_static, "static-rejoin-unreleased")
def _rejoin_is_replacement(holder, mid: int):
    if holder.epoch != STATIC_LEAVE_EPOCH:
        raise cg_coordinator._Refused(Error.UNRELEASED_INSTANCE_ID)
    return cg_coordinator.rejoining_static(holder, mid)


@replaces(cg_coordinator.replaces_unreleased, "classic-instance-unreleased")
def _classic_holder_unreleased(holder) -> bool:
    return False  # KAFKA-17228: only a temporary leave (-2) releases the instance id


@replaces(cg_migration.offline_upgrade, "empty-classic-group-kept")
def _empty_classic_group_kept(cfg, group):
    return None


@replaces(cg_migration.converted_assignment, "upgrade-drops-assignment")
def _assignment_dropped(m) -> int:
    return 0


@replaces(cg_migration.downgraded_generation, "downgrade-restarts-generation")
def _generation_restarted(group) -> int:
    return 0


@replaces(cg_migration.upgradable, "upgrade-drops-user-data")
def _user_data_dropped(group) -> bool:
    return True


@replaces(cg_classic_members.joined_protocol, "classic-join-names-no-protocol")
def _no_protocol_named(sub) -> str:
    return ""


@replaces(cg_classic_members.must_rejoin, "classic-member-not-told-to-rejoin")
def _never_told_to_rejoin(group, m) -> bool:
    return False
