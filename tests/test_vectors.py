"""`rebalance vectors` (issue 15, Build 4): golden cases generated from the model,
valid against spec/vectors.schema.json, replayed against the model's own handlers;
a deliberately wrong model fails some of them."""
import json

import jsonschema
import pytest

from conftest import ROOT, run_cli
from rebalance.checker import vectors
from rebalance.checker.kafka_json import Codec, config_of
from rebalance.checker.vectors_run import coordinator_handler, run_case

SCHEMA = json.loads((ROOT / "spec" / "vectors.schema.json").read_text())


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The CLI's output: (exit code, --json summary, out dir, [case, ...])."""
    out = tmp_path_factory.mktemp("v") / "v"
    code, stdout, stderr = run_cli("vectors", "--out", out, "--json")
    index = json.loads((out / "index.json").read_text()) if code == 0 else None
    cases = [json.loads((out / c["file"]).read_text()) for c in index["cases"]] if index else []
    return code, stdout, stderr, out, index, cases


def test_cli_writes_at_least_200_cases_valid_against_the_schema(written):
    code, stdout, stderr, out, index, cases = written
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["total"] == len(cases) >= 200
    assert index["counts"]["coordinator"] >= 100 and index["counts"]["assignor"] >= 100
    assert index["from_seed_examples"] == len(vectors.scenario_files()) >= 15
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert json.loads((out / "vectors.schema.json").read_text()) == SCHEMA
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for case in cases:
        errors = list(validator.iter_errors(case))
        assert not errors, (case["id"], errors[0].message)
        assert case["rules"] and case["source"] and case["description"]
    index_schema = {k: v for k, v in SCHEMA.items() if k != "oneOf"} | {"$ref": "#/$defs/index"}
    jsonschema.validate(index, index_schema, cls=jsonschema.Draft202012Validator)
    assert len({c["id"] for c in cases}) == len(cases)


def test_output_is_the_same_bytes_every_run(written, tmp_path):
    out = written[3]
    again = tmp_path / "again"
    vectors.write(again)
    first = sorted(p.relative_to(out) for p in out.rglob("*.json"))
    assert first == sorted(p.relative_to(again) for p in again.rglob("*.json"))
    assert all((out / p).read_bytes() == (again / p).read_bytes() for p in first)


@pytest.mark.spec("R2", "R3", "R4", "R8", "R10", "R11", "R22", "R23", "R25")
def test_every_case_passes_against_the_model(written):
    cases = written[-1]
    failures = {c["id"]: f for c in cases if (f := run_case(c))}
    assert not failures
    rules = {r for c in cases for r in c["rules"]}
    assert {"R2", "R3", "R4", "R7", "R8", "R10", "R11", "R16", "R22", "R23", "R25", "R29", "R31", "R34"} <= rules


def test_the_kafka_vocabulary_round_trips(written):
    """Decoding a case's group and inputs and encoding them again gives the same JSON:
    the vectors carry everything the handler reads."""
    for case in written[-1]:
        if case["kind"] == "assignor":
            continue
        codec = Codec(config_of(case["config"]))
        assert codec.group(codec.group_of(case["initial_group"])) == case["initial_group"]
        for step in case["steps"]:
            assert codec.encode(codec.decode(step["input"])) == step["input"]


@pytest.mark.parametrize("mutation, kind, check", [
    ("assign-before-revoke", "assignor", "cooperative"),
    ("assign-twice", "assignor", "exclusive"),
    ("overload-first-member", "assignor", "balanced"),
    ("no-fencing-on-duplicate-instance", "coordinator", "step"),
    ("reset-generation-when-empty", ("coordinator", "consumer"), "step"),
    ("no-commit-fencing", ("coordinator", "consumer"), "step"),
])
def test_a_wrong_model_fails_some_vectors(written, mutation, kind, check):
    failing = {c["id"]: f for c in written[-1] if (f := run_case(c, {mutation}))}
    kinds = (kind,) if isinstance(kind, str) else kind
    assert failing and all(i.split("/")[0] in kinds for i in failing), failing
    assert any(x.startswith(check) for f in failing.values() for x in f)
    if mutation == "overload-first-member":  # it moves partitions, it never assigns one twice
        assert not any(x.startswith("exclusive") for f in failing.values() for x in f)


@pytest.mark.spec("R1", "R9", "R36", "R41")
def test_commits_pending_member_ids_and_deletes_are_exercised(written):
    """Every input spec/VECTORS.md lists occurs; a zombie's OffsetCommit is fenced
    (no-commit-fencing fails exactly those), commits are accepted, MEMBER_ID_REQUIRED
    hands out ids (KIP-394), a deleted group refuses JoinGroups."""
    seen, errors = set(), set()
    for case in written[-1]:
        for step in case.get("steps", ()):
            event = step["input"]
            seen.add(event["request"]["type"] if event["type"] == "Receive" else event["type"])
            errors |= {(r["response"]["type"], r["response"]["error"]) for r in step["expect"]["responses"]}
    assert {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "SessionTimeout",
            "RebalanceTimeout", "SyncTimeout", "InitialRebalanceDelay", "PendingMemberTimeout", "DeleteGroup"} <= seen
    assert {("OffsetCommitResponse", "NONE"), ("OffsetCommitResponse", "UNKNOWN_MEMBER_ID"),
            ("JoinGroupResponse", "MEMBER_ID_REQUIRED"), ("JoinGroupResponse", "COORDINATOR_NOT_AVAILABLE")} <= errors
    fenced = [c["id"] for c in written[-1] if run_case(c, {"no-commit-fencing"})]
    assert fenced and all(i.startswith(("coordinator/zombie-commit-", "consumer/")) for i in fenced)
    assert {"consumer/zombie-commit-uniform", "consumer/zombie-commit-range"} <= set(fenced)


def test_assignor_properties_name_what_breaks():
    case = next(c for c in vectors.assignor_cases() if c["id"] == "assignor/cooperative-sticky-40")
    assert run_case(case) == []
    got = run_case(case, {"assign-before-revoke"})
    assert any(f.startswith("cooperative:") for f in got), got


def test_out_pointing_at_a_file_exits_2(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    code, stdout, stderr = run_cli("vectors", "--out", target, "--json")
    assert code == 2
    assert "is a file" in json.loads(stdout)["error"]["message"] and "Traceback" not in stderr


@pytest.mark.spec("R33", "R38")
def test_a_zero_scheduled_delay_is_a_vector_too(written):
    # scheduled.rebalance.max.delay.ms = 0 (examples/connect/worker_leaves_no_delay.toml) end to end
    (case,) = [c for c in written[-1] if c["id"] == "coordinator/seed-connect-worker-leaves-no-delay"]
    assert case["config"]["scheduled_delay_ticks"] == 0 and case["config"]["revoking_backoff_ticks"] == [0]
    assert config_of(case["config"]).scheduled_delay_ticks == 0 and not run_case(case)


# -- KIP-848 (issue 39, Build 6: `vectors` emits KIP-848 cases) ----------------------------------------------


def consumer_cases(written) -> list:
    return [c for c in written[-1] if c["kind"] == "consumer"]


@pytest.mark.spec("K2", "K3", "K5", "K7", "K8", "K11", "M1", "M2")
def test_kip848_cases_cover_the_consumer_protocol(written):
    """The consumer cases exercise what KIP-848's coordinator does: joins, leaves at -1 and
    -2, fencing by the session timeout, UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID, a heartbeat
    at the member's previous epoch accepted (a lost response), OffsetCommit with member epochs,
    members reconciling through UNREVOKED_PARTITIONS and UNRELEASED_PARTITIONS, the uniform and
    range assignors, and the online migration both ways; and they pass against the model."""
    cases = consumer_cases(written)
    assert written[4]["counts"]["consumer"] == len(cases) >= 60
    assert not {c["id"]: f for c in cases if (f := run_case(c))}
    assert {c["config"]["assignor"] for c in cases} == {"uniform", "range"}
    epochs, errors, states, inputs, tolerated = set(), set(), set(), set(), 0
    for case in cases:
        codec = Codec(config_of(case["config"]))
        group = codec.group_of(case["initial_group"])
        for step in case["steps"]:
            event = step["input"]
            request = event.get("request", {})
            inputs.add(request.get("type", event["type"]))
            if request.get("type") == "ConsumerGroupHeartbeat":
                epochs.add(min(request["member_epoch"], 1))
                member = next((m for m in case_members(codec, group) if m["member_id"] == request["member_id"]), None)
                tolerated += bool(member and 0 < request["member_epoch"] == member["previous_member_epoch"]
                                  < member["member_epoch"] and step["expect"]["responses"][0]["response"]["error"] == "NONE")
            errors |= {(r["response"]["type"], r["response"]["error"]) for r in step["expect"]["responses"]}
            states |= {m["state"] for m in step["expect"]["group"]["members"] if "state" in m}
            group = codec.group_of(replayed_group(case, codec, step, group))
    assert epochs == {-2, -1, 0, 1} and tolerated
    assert {"ConsumerGroupHeartbeat", "OffsetCommit", "SessionTimeout", "MemberRebalanceTimeout", "JoinGroup",
            "SyncGroup", "Heartbeat", "LeaveGroup"} <= inputs
    assert {("ConsumerGroupHeartbeatResponse", "UNKNOWN_MEMBER_ID"),
            ("ConsumerGroupHeartbeatResponse", "UNRELEASED_INSTANCE_ID"), ("OffsetCommitResponse", "NONE"),
            ("OffsetCommitResponse", "UNKNOWN_MEMBER_ID"), ("JoinGroupResponse", "NONE")} <= errors
    assert {"UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"} <= states
    rules = {r for c in cases for r in c["rules"]}
    assert {"K1", "K2", "K3", "K4", "K5", "K6", "K7", "K8", "K10", "K11", "M1", "M2"} <= rules


def case_members(codec, group) -> list:
    """A consumer group's member records as the vectors spell them (none for a classic group)."""
    return codec.group(group)["members"] if "group_epoch" in codec.group(group) else []


def replayed_group(case, codec, step, group) -> dict:
    """The whole group after ``step``, by the model's handler (the case expects only a summary)."""
    cfg = config_of(case["config"])
    return codec.group(coordinator_handler(cfg)(cfg, group, codec.decode(step["input"]))[0])


@pytest.mark.parametrize("mutation", ["grant-before-release", "server-assignor-drops-partition", "epoch-zero-fenced",
                                      "static-rejoin-unreleased", "bump-epoch-leaving-unrevoked",
                                      "upgrade-drops-assignment", "downgrade-restarts-generation"])
def test_a_wrong_kip848_model_fails_some_consumer_cases(written, mutation):
    """Each KIP-848 coordinator mutation (model/mutations.py) fails some consumer case and no
    classic one: the consumer cases' verdicts are seen to fail."""
    failing = {c["id"]: f for c in written[-1] if (f := run_case(c, {mutation}))}
    assert failing and all(i.startswith("consumer/") for i in failing), failing
    assert all(f[0].startswith("step ") for f in failing.values())
