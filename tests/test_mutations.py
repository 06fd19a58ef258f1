"""The mutation matrix: every registered mutation (model/mutations.py REGISTRY), a
deliberately wrong model, checked with --continue so every property gets a
verdict: what it breaks and what it leaves holding. Every property is caught by
at least one mutation, so no "holds" is a verdict nobody has seen fail."""
import pytest
from conftest import EXAMPLES
from rebalance.checker.properties import PROPERTIES
from rebalance.model.mutations import REGISTRY as MUTATIONS

# The standard bounds (issue 43, item 4): the group's shape (members at the start, joiners, partitions,
# fault budget) each row is checked at, named in its row; the row's configuration gives the rest (protocol,
# fault kinds, tasks). Beyond the main job's: two joiners, more members than partitions, budget 3 on a
# two-member group: what the main job's bound cannot reach. OWN: the row's configuration gives its shape too,
# where no standard bound catches the mutation or one that does costs ten times as much.
BOUNDS = {
    "default": ("--members", "3", "--joiners", "1", "--partitions", "4", "--max-faults", "2"),
    "two joiners": ("--members", "1", "--joiners", "2", "--partitions", "2", "--max-faults", "2"),
    "members > partitions": ("--members", "3", "--joiners", "1", "--partitions", "2", "--max-faults", "2"),
    "budget 3": ("--members", "2", "--joiners", "1", "--partitions", "2", "--max-faults", "3"),
}
DEFAULT, TWO_JOINERS, MORE_MEMBERS, BUDGET_3 = BOUNDS
OWN = "own"

COOP = ("--faults", "join,leave,crash")
ZOMBIES = ("--faults", "pause,crash,join")
STATIC = ("--static", "--faults", "restart,crash,leave")
STATIC_RESTARTS = ("--static", "--faults", "join,crash,restart")
STATIC_ALL = ("--static", "--faults", "join,leave,crash,restart")
DEFERRED = ("--protocol", "deferred", "--faults", "join,leave,crash,restart")
STREAMS = ("--protocol", "streams", "--standby", "0")
SUBSCRIPTIONS = (str(EXAMPLES / "subscriptions.toml"),)
SMALL = ("--faults", "join,crash")
REMOVAL, FAILOVER = (("--static", "--faults", f"crash,restart,{kind},downgrade") for kind in ("remove", "failover"))
TIMED = (str(EXAMPLES / "static_timed.toml"),)

# (mutations, configuration, bound, the properties violated; every other one holds)
MATRIX = [
    # the correct model at each standard bound: a bug that needs one of them changes one of these verdicts
    ((), COOP, DEFAULT, set()),
    ((), COOP, TWO_JOINERS, set()),
    ((), COOP, MORE_MEMBERS, set()),
    ((), COOP, BUDGET_3, set()),
    ((), STATIC_ALL, TWO_JOINERS, set()),
    ((), STATIC_RESTARTS, MORE_MEMBERS, set()),
    ((), STATIC_ALL, BUDGET_3, set()),  # F1 reached, expected (SPEC 11)
    (("assign-before-revoke",), COOP, TWO_JOINERS, {"revoke_before_assign", "exclusive_processing", "refinement"}),
    # KAFKA-14639: neither half alone breaks anything; both together do
    (("ignore-owned-generation",), COOP, TWO_JOINERS, set()),
    (("keep-owned-on-rebalance-in-progress",), COOP, TWO_JOINERS, set()),
    (("keep-owned-on-rebalance-in-progress", "ignore-owned-generation"), COOP, BUDGET_3,
     {"revoke_before_assign", "exclusive_processing", "refinement"}),
    (("leader-forgets-delay",), DEFERRED, TWO_JOINERS, {"bounded_deferral"}),
    # Kafka Connect's leader state: a new leader reassigns at once, so leader churn cannot extend a delay;
    # it differs from the seed in outcomes (tests/test_replay.py), and breaks nothing checked here
    (("connect-leader-state",), DEFERRED, TWO_JOINERS, set()),
    (("no-fencing-on-duplicate-instance",), STATIC, TWO_JOINERS, {"unique_instance", "static_restart_no_rebalance",
                                                                 "quiescent_balance", "eventual_balance"}),
    (("static-rejoin-rebalances",), STATIC, TWO_JOINERS, {"static_restart_no_rebalance"}),
    # KAFKA-12890: a leader that never syncs (paused, its heartbeats kept on) holds the group in CompletingRebalance
    (("no-pending-sync-expiry",), ("--faults", "pause"), BUDGET_3,
     {"exclusive_processing", "quiescent_balance", "eventual_balance"}),
    ((), ZOMBIES, TWO_JOINERS, {"exclusive_processing"}),  # zombies process; fencing keeps commits exclusive
    # a stale commit accepted: the commits' history shows it; who can commit at one instant (R9's conditions) is
    # unchanged
    (("no-commit-fencing",), ZOMBIES, TWO_JOINERS, {"exclusive_processing", "exclusive_commits"}),
    # KAFKA-12983: a member told UNKNOWN_MEMBER_ID rejoins still owning what it gave up
    (("keep-owned-on-unknown-member-id",), ZOMBIES, TWO_JOINERS,
     {"exclusive_processing", "revoke_before_assign", "refinement"}),
    # KAFKA-7026: the eager StickyAssignor's user data claims a zombie's old assignment, kept beside the new owner's
    (("sticky-user-data-without-generation",), ("--protocol", "eager", "--assignor", "sticky") + ZOMBIES, TWO_JOINERS,
     {"exclusive_processing", "exclusive_ownership", "exclusive_commits", "refinement", "quiescent_balance",
      "eventual_balance"}),
    # KAFKA-9801: a static member restarting in CompletingRebalance gets the generation and nothing assigned
    (("static-rejoin-completing-no-rebalance",), STATIC_RESTARTS, BUDGET_3, {"quiescent_balance", "eventual_balance"}),
    # KAFKA-8500: a static member's new process added beside its old member id while the group rebalances
    (("replace-static-only-when-stable",), STATIC_RESTARTS, BUDGET_3,
     {"unique_instance", "quiescent_balance", "eventual_balance"}),
    # KAFKA-12495: Connect skipped a revocation right after a revoking round: a joining worker stays idle; it needs
    # four tasks on two workers and three faults
    (("skip-consecutive-revocation",),
     ("--protocol", "deferred", "--members", "2", "--partitions", "4", "--faults", "join,leave", "--max-faults", "3"),
     OWN, {"quiescent_balance", "eventual_balance"}),
    # KAFKA-14016: KAFKA-13891's reset of the generation on REBALANCE_IN_PROGRESS, alone and with the filter
    (("reset-generation-on-rebalance-in-progress",), COOP, TWO_JOINERS, set()),
    (("reset-generation-on-rebalance-in-progress", "ignore-owned-generation"), COOP, BUDGET_3,
     {"revoke_before_assign", "exclusive_processing", "refinement"}),
    (("withhold-partition",), SMALL, MORE_MEMBERS, {"quiescent_balance", "eventual_balance"}),
    (("keep-revoked",), COOP, TWO_JOINERS, {"refinement", "eventual_balance", "no_rebalance_storm"}),
    # test-only assignors that break the assignor vectors' exclusive and balanced checks (tests/test_vectors.py)
    (("assign-twice",), SMALL, TWO_JOINERS, {"exclusive_ownership", "exclusive_commits", "exclusive_processing",
                                             "revoke_before_assign", "refinement", "quiescent_balance",
                                             "eventual_balance"}),
    (("overload-first-member",), SMALL, TWO_JOINERS, {"quiescent_balance", "eventual_balance"}),
    (("reset-generation-when-empty",), ("--faults", "leave,join"), TWO_JOINERS, {"single_leader", "refinement"}),
    # its claims only reach generation 4 beyond this bound: `rebalance prove` catches it (tests/test_prove.py)
    (("generation-mod-4",), COOP, TWO_JOINERS, set()),
    # no two members claim a partition at one generation here: `rebalance prove` catches it (tests/test_prove.py)
    (("contested-claims-unowned",), COOP, TWO_JOINERS, set()),
    # Streams (seed 001)
    # a task handed to its ready learner in the round its owner revokes it: the commit fence keeps exclusive_active
    (("assign-before-revoke",), STREAMS + ("--tasks", "4", "--faults", "join"), BUDGET_3,
     {"revoke_before_assign", "exclusive_processing", "refinement"}),
    (("promote-unready-learner",), STREAMS + ("--tasks", "4", "--faults", "join"), BUDGET_3,
     {"learner_ready_before_active"}),
    # the seed's naive learner assignment: an endless shuffle when tasks are fewer than the members' capacity
    (("learners-to-anyone",), STREAMS + ("--tasks", "2", "--stateless", "0", "--faults", "join"), BUDGET_3,
     {"no_endless_shuffle", "learner_progress", "no_rebalance_storm", "eventual_balance"}),
    (("no-scale-down-timeout",), STREAMS + ("--tasks", "3", "--streams-version", "1.0", "--faults", "leave"),
     TWO_JOINERS, {"bounded_scale_down"}),
    (("no-commit-fencing",), STREAMS + ("--tasks", "2", "--faults", "pause,crash,join"), TWO_JOINERS,
     {"exclusive_processing", "exclusive_active"}),
    # the upgrade to cooperative in one rolling bounce (R79, R80): the bounced member is refused and consumes nothing
    (("one-bounce-upgrade",), ("--example", "upgrade", "--faults", "crash,restart"), TWO_JOINERS,
     {"upgrade_compatible", "quiescent_balance", "eventual_balance"}),
    # KIP-345's faults (R71, R72): a live static member an admin removes processes until its next heartbeat; a
    # failover that fences a static member is finding F4, expected (spec/SPEC.md section 11)
    ((), REMOVAL, BUDGET_3, {"exclusive_processing"}),
    ((), FAILOVER, BUDGET_3, set()),
    (("admin-removal-without-rebalance",), REMOVAL, TWO_JOINERS, {"quiescent_balance", "eventual_balance"}),
    (("failover-stale-generation",), FAILOVER, TWO_JOINERS, {"single_leader", "refinement"}),
    # R74: a member told to rejoin at once rejoins before it revokes, claiming what it gave up: rounds without end
    (("rejoin-before-revoking",), (str(EXAMPLES / "rejoin_flag.toml"),), TWO_JOINERS,
     {"refinement", "eventual_balance", "no_rebalance_storm"}),
    # Connect's two kinds (R66-R68): a round moving both connectors at once; lost resources given out at once
    # under incremental, which breaks nothing checked (tests/test_kinds.py replays the rounds that differ)
    (("moves-ignore-cost",), (str(EXAMPLES / "connect" / "two_kinds_checked.toml"),), TWO_JOINERS,
     {"moves_within_allowance"}),
    # one joiner and four partitions on one member: the allowance's off-by-one needs more partitions than members
    (("max-moves-off-by-one",), ("--protocol", "incremental", "--members", "1", "--partitions", "4", "--faults", "join",
                                 "--max-faults", "1"), OWN, {"moves_within_allowance"}),
    (("incremental-reassigns-lost",), (str(EXAMPLES / "connect" / "two_kinds_checked.toml"),), OWN, set()),
    # a connector deleted (R81) that the leader never reads as deleted runs on where it ran
    (("deleted-connector-kept",), (str(EXAMPLES / "connect" / "connector_deleted_checked.toml"),), OWN,
     {"quiescent_balance", "eventual_balance"}),
    # differing subscriptions and a topic created mid-run (R61-R65): the example's topics are its own
    (("assign-unsubscribed",), SUBSCRIPTIONS, OWN, {"subscribed_only"}),
    (("defer-new-subscriptions",), SUBSCRIPTIONS + ("--protocol", "deferred"), OWN, {"new_partitions_at_once"}),
    # KIP-441's assignor without its caught-up constraint (R58): the balanced owner takes a task it has no state of
    (("active-to-lagging-client",), STREAMS + ("--assignor", "high-availability", "--tasks", "4", "--stateless", "0",
                                               "--faults", "join"), BUDGET_3, {"learner_ready_before_active"}),
    # a learner reported ready before its restore ran: the leader promotes it (judged by the restores that finished)
    (("ready-on-assignment",), STREAMS + ("--tasks", "4", "--faults", "join"), BUDGET_3,
     {"learner_ready_before_active"}),
    (("unbounded-warmups",), STREAMS + ("--assignor", "high-availability", "--tasks", "6", "--stateless", "0",
                                        "--max-warmup", "1", "--faults", "join"), BUDGET_3, {"bounded_warmups"}),
    # progress (issue 43): every commit and Heartbeat a Stable member could send is judged against R9, R10
    (("refuse-static-commits",), STATIC, TWO_JOINERS, {"commit_accepted", "commit_progress"}),
    (("refuse-commits-while-preparing",), COOP, TWO_JOINERS, {"commit_accepted", "commit_progress"}),
    (("commit-generation-after-reset",), ZOMBIES, TWO_JOINERS, {"commit_progress", "exclusive_processing"}),
    # budget 3 catches it too, at 93,428 states against 8,000 here
    (("heartbeat-ignores-generation",), ("--static", "--members", "2", "--partitions", "2", "--faults",
                                         "pause,crash,restart"), OWN,
     {"heartbeat_answered", "exclusive_processing", "revoke_before_assign", "quiescent_balance",
      "eventual_balance"}),
    # the timed mode (docs/timed.md): each coordinator timer fires at its deadline
    (("keep-silent-static-leader",), TIMED, TWO_JOINERS, {"bounded_rebalance"}),
    (("rebalance-timeout-removes-static",), TIMED, BUDGET_3, {"static_restart_no_rebalance"}),
    (("static-rejoin-stale-generation",), TIMED, TWO_JOINERS, {"static_restart_no_rebalance"}),
    # fires too early: a live member's session lapses although it heartbeats; no fault needed (the standard
    # bounds' faults cost 146,066 states and more)
    (("heartbeat-keeps-no-session",), TIMED + ("--max-faults", "0"), OWN,
     {"timers_in_window", "exclusive_processing", "eventual_balance", "no_rebalance_storm"}),
    # the checker's clients send no DeleteGroups: `rebalance serve` catches it (tests/test_admin.py)
    (("delete-non-empty-group",), SMALL, TWO_JOINERS, set()),
    # issue 38's timed and versioned rules, caught by conform on Kafka's traces (tests/test_conform_kafka_traces.py)
    # and by tests/test_coordinator.py: untimed, with v9 members and no KIP-394 round trip, the checker cannot
    (("initial-delay-runs-once",), SMALL, TWO_JOINERS, set()),
    (("initial-rebalance-completes-when-all-joined",), SMALL, TWO_JOINERS, set()),
    (("barrier-ignores-pending-members",), SMALL, TWO_JOINERS, set()),
    (("static-leader-told-it-leads-before-v9",), SMALL, TWO_JOINERS, set()),
    (("unknown-member-id-not-echoed",), SMALL, TWO_JOINERS, set()),
    # kept stored assignments are read only by DescribeGroups and an upgrade (KIP848 M1); the spec's R3 catches it
    (("completing-keeps-stored-assignments",), COOP, TWO_JOINERS, {"refinement"}),
    # the initial group never settles: no_rebalance_storm with its lasso, nothing else explored (tests/test_storm.py)
    (("rejoin-after-every-assignment",), (), TWO_JOINERS, {"no_rebalance_storm"}),
]


def _args(mutations):
    return [x for m in mutations for x in ("--mutation", m)]


def bound_args(config, bound) -> tuple:
    """``check`` options for ``bound`` (a name of BOUNDS, or OWN: none); Streams counts
    tasks, not partitions, so its rows give their tasks and the bound the rest."""
    args = BOUNDS.get(bound, ())
    if "streams" in config and "--partitions" in args:
        i = args.index("--partitions")
        args = args[:i] + args[i + 2:]
    return args


def row_id(mutations, bound) -> str:
    return f"{' + '.join(mutations) or 'none'} @ {bound}"


# The heaviest rows (up to 19 s each on CI's 2 cores): in the slow suite, and in CI by its subset (.ci/slow), so
# that the default suite stays under 10 minutes
SLOW_ROWS = {"defer-new-subscriptions @ own", "skip-consecutive-revocation @ own", "leader-forgets-delay @ two joiners",
             # 4 to 6 s each on an idle 2-core machine (the three correct-model rows at budget 3 among them)
             "none @ budget 3", "incremental-reassigns-lost @ own", "learners-to-anyone @ budget 3",
             "rebalance-timeout-removes-static @ budget 3", "moves-ignore-cost @ two joiners"}


@pytest.mark.parametrize("mutations,config,bound,violated", [
    pytest.param(*row, marks=[pytest.mark.slow] if row_id(row[0], row[2]) in SLOW_ROWS else []) for row in MATRIX],
    ids=[row_id(m, b) for m, _, b, _ in MATRIX])
def test_what_each_mutation_breaks_and_leaves_holding(rebalance_check, mutations, config, bound, violated):
    code, s = rebalance_check(*config, *bound_args(config, bound), *_args(mutations), "--continue")
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert {n for n, st in status.items() if st == "violated"} == violated
    storm = (s.get("counterexample") or {}).get("reason", "").startswith("the initial group never settles")
    assert all(st == ("incomplete" if storm else "holds") for n, st in status.items() if n not in violated)
    kinds = set(config[config.index("--faults") + 1].split(",")) if "--faults" in config else set()
    expected = {"exclusive_processing"} if {"pause", "remove"} & kinds else set()
    assert code == (1 if violated - expected else 0)
    for v in s["counterexamples"]:
        assert v["property"] in violated and v["length"] >= 0 and v["files"]  # 0: the settled group breaks it
    if "keep-owned-on-rebalance-in-progress" in mutations:  # the half of KAFKA-14639 is exercised
        assert {c["name"]: c["reached"] for c in s["covers"]}["sync_rebalance_in_progress"]


def test_each_row_names_its_bound_and_own_shapes_are_the_exception():
    """Issue 43 item 4: every row is checked at a standard bound, named in it, or at
    its own shape (OWN); the correct model is checked at every standard bound."""
    assert {b for _, _, b, _ in MATRIX} <= set(BOUNDS) | {OWN}
    assert {b for m, c, b, _ in MATRIX if not m and c == COOP} == set(BOUNDS)
    own = [m for m, _, b, _ in MATRIX if b == OWN]
    assert len(own) <= len(MATRIX) // 6, own


def test_every_mutation_is_in_the_matrix_and_every_property_is_caught():
    # the consumer protocol's own (KIP-848) are tests/test_kip848_check.py's
    assert {m for ms, _, _, _ in MATRIX for m in ms} == {n for n, m in MUTATIONS.items() if m.protocols != ("consumer",)}
    caught = {p for ms, _, _, violated in MATRIX if ms for p in violated}
    assert {p.name for p in PROPERTIES} <= caught


def test_every_mutation_replaces_a_rule_and_two_replacing_one_rule_are_refused():
    """model/mutations.py: each registered mutation is a named replacement of at least
    one rule, and switching on two that replace the same rule is bad input, not a
    silent choice of one."""
    from rebalance.model.config import ConfigError, GroupConfig
    from rebalance.model.mutations import _REPLACEMENTS
    assert all(_REPLACEMENTS.get(name) for name in MUTATIONS)
    with pytest.raises(ConfigError, match="replace the same rule"):
        GroupConfig(mutations=frozenset({"withhold-partition", "assign-twice"}))
