"""`rebalance check --protocol consumer`: KIP-848 explored by the same engines, and its
mutation matrix: every mutation that applies to the consumer protocol, checked with
--continue, breaks exactly the properties listed (every property of
checker/consumer_properties.py is seen to fail; spec/KIP848.md)."""
import json
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli

from rebalance.checker.consumer_properties import PROPERTIES
from rebalance.checker.migration_properties import PROPERTIES as MIGRATION_PROPERTIES
from rebalance.checker.engines.explore import explore
from rebalance.checker.properties import applicable
from rebalance.checker.settings import load_toml, resolve
from rebalance.model.mutations import REGISTRY

CONSUMER = ("--protocol", "consumer")
SMALL = CONSUMER + ("--members", "2", "--partitions", "2", "--faults", "join,leave,crash", "--max-faults", "2")
THREE = CONSUMER + ("--members", "2", "--partitions", "3", "--faults", "join,leave,crash", "--max-faults", "2")
STICKY = CONSUMER + ("--members", "2", "--partitions", "3", "--faults", "join,leave", "--max-faults", "2")
EMPTYING = CONSUMER + ("--members", "1", "--partitions", "1", "--faults", "leave,join", "--max-faults", "1")
ZOMBIE = CONSUMER + ("--members", "2", "--partitions", "1", "--faults", "pause", "--max-faults", "1")
LOST_RESPONSE = CONSUMER + ("--members", "2", "--partitions", "2", "--faults", "join,pause", "--max-faults", "2")
STATIC = CONSUMER + ("--members", "2", "--partitions", "2", "--faults", "pause,crash,restart", "--max-faults", "2",
                     "--static")
REGEX = (str(EXAMPLES / "kip848" / "regex.toml"),)
# KIP-848's online migration (spec/KIP848.md M1-M7): classic and consumer-protocol members in one group
MIGRATION = (str(EXAMPLES / "kip848" / "migration.toml"),)
MIGRATION_OFFLINE = (str(EXAMPLES / "kip848" / "migration_offline.toml"),)
MIGRATION_STATIC = (str(EXAMPLES / "kip848" / "migration_static.toml"),)
MIGRATION_ZOMBIE = MIGRATION + ("--faults", "join,leave,crash,restart,pause")
TLC_BOUNDS = (str(EXAMPLES / "kip848" / "tlc_bounds.toml"),)  # Vanlightly's TLA+ bounds: benchmarks/tlc_kip848.py
TIMED = (str(EXAMPLES / "kip848" / "timed.toml"),)  # the timed mode (docs/timed.md): a member and a joiner, pauses

# (mutations, configuration, the properties violated; every other one holds), fast ones first
FAST = [
    ((), SMALL, set()),
    (("empty-group-keeps-assignment-epoch",), EMPTYING, {"epochs_ordered"}),  # KAFKA-20442
    (("reset-generation-when-empty",), EMPTYING, {"epochs_monotonic", "refinement"}),
    (("fetch-while-lost",), ZOMBIE, {"exclusive_processing", "lost_means_stopped"}),  # KAFKA-20321
    (("no-commit-fencing",), ZOMBIE, {"exclusive_processing", "exclusive_commits"}),
    # Kafka 3.7-4.2's stricter rule breaks no property: conform catches it on Kafka 4.4.0's trace
    # (tests/test_conform_kafka_traces.py, tests/test_conform_kip848.py)
    (("commit-at-member-epoch-only",), LOST_RESPONSE, {"exclusive_processing"}),
    ((), TLC_BOUNDS, {"exclusive_processing"}),  # its live-member expiry is a pause here: a zombie
    ((), MIGRATION_OFFLINE, set()),
    ((), MIGRATION_STATIC, set()),
    (("empty-classic-group-kept",), MIGRATION_OFFLINE, {"joins_admitted"}),  # KAFKA-16313
    (("classic-instance-unreleased",), MIGRATION_STATIC, {"joins_admitted"}),  # KAFKA-17228
    (("classic-member-not-told-to-rejoin",), MIGRATION_OFFLINE, {"converges"}),
    (("downgrade-restarts-generation",), MIGRATION_OFFLINE, {"epochs_carried"}),
    # a response field no property reads: conform catches it on Kafka's migration trace (test_conform_kafka_traces)
    (("classic-join-names-no-protocol",), MIGRATION_OFFLINE, set()),
    # the checker's classic members use an assignor without user data: conform catches it on librdkafka's trace
    (("upgrade-drops-user-data",), MIGRATION_OFFLINE, set()),
    # a describe answer no property reads: serve and conform catch it on Kafka's conversation (K17)
    (("describe-omits-pending-revocation",), SMALL, set()),
    # the checker's clients name no server assignor (K16): tests/test_kip848_model.py catches it on the
    # coordinator, members switching to range (KAFKA-20434)
    (("preferred-assignor-unbumped",), SMALL, set()),
    # the classic model's R3 until 2026-11-28: stored assignments cleared on every rebalance, read by an upgrade
    (("prepare-clears-stored-assignments",), MIGRATION, {"exclusive_ownership", "exclusive_commits"}),
    (("upgrade-drops-assignment",), MIGRATION_STATIC,
     {"exclusive_ownership", "exclusive_commits", "legal_target", "converges"}),
    # timed, a paused member is a zombie as untimed; KAFKA-19233 keeps a rejoining member out until its session
    # ends (joins_in_time), and its rejoins refused over and over within one tick are a cycle weak fairness allows
    ((), TIMED, {"exclusive_processing"}),
    (("epoch-zero-fenced",), TIMED, {"exclusive_processing", "joins_in_time", "converges"}),
]
SLOW = [
    (("partition-epoch-lost-on-reassign",), THREE, {"valid_partition_epochs", "refinement"}),  # KAFKA-16147
    (("own-revocations-unreleased",), THREE, {"unreleased_justified"}),  # KAFKA-19449
    (("grant-before-release",), SMALL, {"valid_partition_epochs", "grant_after_release", "no_double_ownership",
                                        "exclusive_ownership", "exclusive_commits", "refinement"}),
    (("unreleased-as-stable",), SMALL, {"valid_stable_group", "converges"}),
    (("server-assignor-drops-partition",), SMALL, {"legal_target", "sticky_target"}),
    (("same-assignment-not-acknowledged",), SMALL, {"converges"}),  # KAFKA-16185, KAFKA-16312
    (("extras-to-first-members",), STICKY, {"sticky_target"}),  # KAFKA-18688
    (("keep-unsubscribed-partitions",), REGEX, {"subscribed_only", "valid_stable_group", "unreleased_justified"}),
    ((), REGEX, set()),
    ((), ZOMBIE, {"exclusive_processing"}),  # zombies process; member epochs keep commits exclusive
    (("static-rejoin-unreleased",), STATIC, {"exclusive_processing", "not_fenced_by_own_instance"}),  # PR #23542
    (("report-current-assignment",), LOST_RESPONSE,  # finding K-F1
     {"exclusive_processing", "valid_member_epoch", "no_double_ownership", "exclusive_ownership",
      "exclusive_commits", "refinement"}),
    # not caught untimed: a rejoin refused until the session times out is a delay (caught timed, TIMED above), and
    # KAFKA-19974's epoch + 1 breaks a history property (one owner per partition per epoch) the checker keeps not
    (("epoch-zero-fenced",), LOST_RESPONSE, {"exclusive_processing"}),
    (("bump-epoch-leaving-unrevoked",), REGEX, set()),
    ((), MIGRATION, set()),
    ((), MIGRATION_ZOMBIE, {"exclusive_processing"}),  # a paused classic member is a zombie across an upgrade
]


def row_id(mutations, config) -> str:
    """A matrix row's test id: its mutations, or "none" and, for a configuration file, the file's
    name and any flags beside it (ids .ci/slow can name whatever rows come before)."""
    if mutations:
        return ",".join(mutations)
    files = [a for a in config if a.endswith(".toml")]
    if not files:
        return "none"
    rest = [a.replace(",", "-") for a in config if not a.endswith(".toml") and not a.startswith("--")]
    return "-".join(["none", Path(files[0]).stem, *rest])


def check(args, tmp_path) -> dict:
    code, out, err = run_cli("check", *args, "--continue", "--json", "--out", tmp_path)
    assert code in (0, 1), err[-2000:]
    return json.loads(out)


def settings_of(mutations, config, spec_mutations=()):
    """The CheckSettings of ``config`` (command-line arguments) with ``mutations`` switched on
    (also benchmarks/kip848_history.py's)."""
    files = [a for a in config if a.endswith(".toml")]
    rest = [a for a in config if not a.endswith(".toml")]
    flags = dict(zip(rest[::2], rest[1::2]))
    return resolve(load_toml(files[0]) if files else {}, mutations=mutations, spec_mutations=spec_mutations,
                   protocol=flags.get("--protocol"), static=True if "--static" in config else None,
                   members=int(flags["--members"]) if "--members" in flags else None,
                   partitions=int(flags["--partitions"]) if "--partitions" in flags else None,
                   faults=flags["--faults"].split(",") if "--faults" in flags else None,
                   budget=int(flags["--max-faults"]) if "--max-faults" in flags else None)


def _violated(mutations, config, tmp_path) -> set:
    """The properties a --continue check of ``config`` with ``mutations`` violates, explored in
    process (the command line is held to the same verdicts by the checks below)."""
    system = settings_of(mutations, config).system()
    result = explore(system, applicable(system))
    return {name for name, status in result.statuses.items() if status == "violated"}


@pytest.mark.parametrize("mutations,config,violated", FAST, ids=[row_id(m, c) for m, c, _ in FAST])
def test_kip848_mutation_matrix(mutations, config, violated, tmp_path):
    assert _violated(mutations, config, tmp_path) == violated


@pytest.mark.slow
@pytest.mark.parametrize("mutations,config,violated", SLOW, ids=[row_id(m, c) for m, c, _ in SLOW])
def test_kip848_mutation_matrix_slow(mutations, config, violated, tmp_path):
    assert _violated(mutations, config, tmp_path) == violated


def test_every_consumer_mutation_is_in_the_matrix_and_every_property_is_seen_to_fail():
    consumer = {name for name, m in REGISTRY.items() if "consumer" in m.protocols}
    listed = {m for muts, _, _ in FAST + SLOW for m in muts}
    assert consumer == listed
    caught = set().union(*(v for _, _, v in FAST + SLOW))
    assert {p.name for p in PROPERTIES} | {p.name for p in MIGRATION_PROPERTIES} == caught
    migration = set().union(*(v for _, config, v in FAST + SLOW if config[0] in (*MIGRATION, *MIGRATION_OFFLINE,
                                                                             *MIGRATION_STATIC)))
    # the migration's own properties, each seen to fail there (the reused consumer group invariants failed above)
    assert {"exclusive_ownership", "exclusive_commits", "exclusive_processing", "epochs_carried", "joins_admitted",
            "converges"} <= migration


def test_refinement_fails_under_a_wrong_spec_action():
    """The model refines spec/consumer_actions.py on every step (the matrix's unmutated rows);
    a deliberately wrong post-condition (a reconciliation takes nothing) is seen to fail."""
    system = settings_of((), SMALL, ("reconcile-takes-nothing",)).system()
    result = explore(system, applicable(system))
    assert {n for n, status in result.statuses.items() if status == "violated"} == {"refinement"}
    why = next(v.reason for v in result.violations if v.property == "refinement")
    assert why.startswith("reconcile by ") and why.endswith("takes nothing"), why


def test_the_small_configuration_holds_and_reaches_its_covers(tmp_path):
    d = check(SMALL, tmp_path)
    assert d["verdict"] == "holds"
    reached = {c["name"] for c in d["covers"] if c["reached"]}
    assert {"unrevoked_partitions", "unreleased_partitions", "session_timeout_fenced"} <= reached


@pytest.mark.slow
def test_a_lost_response_is_tolerated_and_a_zombie_fenced_by_its_rebalance_timeout(tmp_path):
    d = check(LOST_RESPONSE, tmp_path)
    reached = {c["name"] for c in d["covers"] if c["reached"]}
    assert {"previous_epoch_tolerated", "rebalance_timeout_fenced", "zombie_commit_refused", "fenced_rejoined"} <= reached


def _prove(*mutations) -> tuple:
    code, out, err = run_cli("prove", "--protocol", "consumer", "--max-members", "3", "--max-partitions", "4",
                             "--json", *(a for m in mutations for a in ("--mutation", m)))
    obligations = json.loads(out)["obligations"]
    return code, [o["name"].split(":")[0] for o in obligations if o["status"] == "counterexample"]


@pytest.mark.spec("K5", "K16")
def test_prove_consumer_obligations_hold():
    assert _prove() == (0, [])


@pytest.mark.slow
@pytest.mark.parametrize("mutation,failing", [
    ("extras-to-first-members", ["uniform"]), ("server-assignor-drops-partition", ["uniform", "range"]),
    ("grant-before-release", ["reconciliation"]), ("bump-epoch-leaving-unrevoked", ["reconciliation"]),  # KAFKA-19974
    ("own-revocations-unreleased", ["reconciliation"]), ("unreleased-as-stable", ["reconciliation"]),
])
def test_prove_consumer_obligations_catch(mutation, failing):
    assert _prove(mutation) == (1, failing)
