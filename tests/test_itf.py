"""ITF traces (Apalache ADR-015): counterexamples (`rebalance check`, always beside
the JSON) and coordinator vectors (`rebalance vectors --itf`) validate against
spec/itf.schema.json, and a driver that knows only the file (its configuration in
#meta, each state's mbt::actionTaken and mbt::nondetPicks) replays them against the
model and reaches the same states, the violating one last."""
import json

import jsonschema
import pytest

from conftest import ROOT, run_cli
from rebalance.checker import itf, vectors
from rebalance.checker.kafka_json import Codec, config_of
from rebalance.checker.properties import applicable
from rebalance.checker.render import slot_named
from rebalance.checker.engines.renaming import Renamer
from rebalance.checker.system import System
from rebalance.model import coordinator
from rebalance.model.protocol import Receive

SCHEMA = json.loads((ROOT / "spec" / "itf.schema.json").read_text())
ZOMBIES = ("--members", "2", "--partitions", "2", "--faults", "pause,crash,join", "--mutation", "no-commit-fencing")
STORM = ("--mutation", "keep-revoked", "--continue", "--members", "2", "--partitions", "3", "--faults", "join",
         "--max-faults", "1")


def validator(definition: str):
    return jsonschema.Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{definition}"})


def plain(expr):
    """An ITF expression back in the Codec's JSON (what a driver decodes)."""
    if isinstance(expr, list):
        return [plain(e) for e in expr]
    if not isinstance(expr, dict):
        return expr
    if "#bigint" in expr:
        return int(expr["#bigint"])
    if "#set" in expr:
        return [plain(e) for e in expr["#set"]]
    if "#map" in expr:
        return {k: plain(v) for k, v in expr["#map"]}
    if set(expr) == {"tag", "value"}:
        if expr["tag"] in ("None", "Some"):
            return None if expr["tag"] == "None" else plain(expr["value"])
        return {"type": expr["tag"], **plain(expr["value"])}
    return {k: plain(v) for k, v in expr.items()}


def system_of(meta: dict) -> System:
    """The checker's system from an ITF counterexample's #meta alone."""
    c = meta["check"]
    return System(config_of(meta["config"]), c["members"], c["joiners"], c["faults"], c["budget"],
                  [slot_named(x) for x in c["static"]], c["spec_mutations"])


def replay(trace: dict) -> list:
    """Drive the model by the trace: from the initial state, take at each step the one
    successor whose action and picks are the state's; returns the model's states."""
    system = system_of(trace["#meta"])
    codec = Codec(system.cfg)
    state = system.initial()
    strip = lambda s: {k: v for k, v in s.items() if k != "#meta"}  # noqa: E731
    assert itf.system_state(codec, state, "init", itf.picks()) == strip(trace["states"][0])
    states = [state]
    for i, want in enumerate(trace["states"][1:], 1):
        chosen = [(a, n) for a, n in system.successors(state) + system.churn_successors(state)
                  if a.kind == want[itf.ACTION] and itf.action_picks(codec, state, a) == want[itf.PICKS]]
        assert len(chosen) == 1, (i, want[itf.ACTION], len(chosen))
        action, state = chosen[0]
        assert itf.system_state(codec, state, action.kind, want[itf.PICKS]) == strip(want), i
        states.append(state)
    return states


@pytest.fixture(scope="module")
def counterexamples(tmp_path_factory):
    out = {}
    for name, args in (("zombies", ZOMBIES), ("storm", STORM)):
        d = tmp_path_factory.mktemp(name)
        code, stdout, stderr = run_cli("check", *args, "--json", "--out", d, cwd=d)
        assert code == 1, stderr
        summary = json.loads(stdout)
        out[name] = summary, {c["property"]: json.loads(open(c["files"]["itf"]).read())
                              for c in summary["counterexamples"]}
    return out


def test_the_schema_is_valid_and_refuses_what_adr_015_refuses():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    ok = {"vars": ["x"], "states": [{"#meta": {"index": 0}, "x": {"#set": [{"#bigint": "1"}]}}], "loop": 0}
    assert validator("trace").is_valid(ok)
    for bad in ({"vars": ["x"], "states": [{"#meta": {"index": 0}, "x": {"#bigint": "1.5"}}]},
                {"vars": ["x"], "states": [{"#meta": {"index": 0}, "x": 1.5}]},
                {"vars": ["x"], "states": [{"#meta": {"index": 0}, "x": {"#map": [[1]]}}]},
                {**ok, "loop": -1}, {"vars": ["x"], "states": [{"x": True}]}):
        assert not validator("trace").is_valid(bad), bad


@pytest.mark.spec("R9", "R41")
def test_a_safety_counterexample_replays_to_the_same_violating_state(counterexamples):
    summary, traces = counterexamples["zombies"]
    trace = traces["exclusive_commits"]
    assert not list(validator("counterexample").iter_errors(trace))
    assert [s["#meta"]["index"] for s in trace["states"]] == list(range(len(trace["states"])))
    assert len(trace["states"]) == summary["counterexample"]["length"] + 1 and "loop" not in trace
    states = replay(trace)
    system = system_of(trace["#meta"])
    prop = next(p for p in applicable(system) if p.name == "exclusive_commits")
    assert prop.check(system, states[-1]) and not any(prop.check(system, s) for s in states[:-1])
    # the choices are Kafka's: the last step delivers a stale OffsetCommit on a zombie's connection
    last = trace["states"][-1][itf.PICKS]
    assert trace["states"][-1][itf.ACTION] == "deliver" and last["message"]["value"]["tag"] == "OffsetCommit"
    assert last["connection"]["value"].split("/")[0] == last["client"]["value"]
    assert any(s[itf.PICKS]["fault"] == {"tag": "Some", "value": "pause"} for s in trace["states"])


def test_a_lasso_carries_its_loop_and_replays(counterexamples):
    summary, traces = counterexamples["storm"]
    trace = traces["eventual_balance"]
    assert not list(validator("counterexample").iter_errors(trace))
    cx = next(c for c in summary["counterexamples"] if c["property"] == "eventual_balance")
    assert trace["loop"] == json.loads(open(cx["files"]["json"]).read())["loop_start"] < len(trace["states"]) - 1
    states = replay(trace)
    renamer = Renamer()  # the loop closes up to renaming of generations and member ids
    assert renamer.canonical(states[trace["loop"]]) == renamer.canonical(states[-1])


@pytest.mark.slow  # about 30-60 s: the default suite stays under 20 minutes
def test_vectors_itf_replays_against_the_coordinator(tmp_path):
    out = tmp_path / "v"
    code, stdout, stderr = run_cli("vectors", "--out", out, "--itf", "--json")
    assert code == 0, stderr
    index = json.loads((out / "index.json").read_text())
    with_itf = [c for c in index["cases"] if "itf" in c]
    assert with_itf and all(c["kind"] == "coordinator" for c in with_itf)
    assert len(with_itf) == index["counts"]["coordinator"]
    assert json.loads((out / "itf.schema.json").read_text()) == SCHEMA
    check = validator("vector")
    for entry in with_itf:
        trace = json.loads((out / entry["itf"]).read_text())
        assert not list(check.iter_errors(trace)), entry["id"]
        case = json.loads((out / entry["file"]).read_text())
        cfg = config_of(trace["#meta"]["config"])
        codec = Codec(cfg)
        group = codec.group_of(plain(trace["states"][0]["group"]))
        assert codec.group(group) == case["initial_group"]
        for i, state in enumerate(trace["states"][1:], 1):
            picks = {k: plain(v) for k, v in state[itf.PICKS].items()}
            action = state[itf.ACTION]
            event = (Receive(codec.conn_of(picks["connection"]), codec.decode(picks["message"]))
                     if action == "deliver" else codec.decode(picks["message" if action == "admin" else "timer"]))
            group, replies = coordinator.handle(cfg, group, event)
            assert plain(state["responses"]) == [codec.encode(r) for r in replies], (entry["id"], i)
            assert plain(state["group"]) == codec.group(group), (entry["id"], i)
    again = tmp_path / "again"  # the same bytes every run
    vectors.write(again, with_itf=True)
    assert all((out / e["itf"]).read_bytes() == (again / e["itf"]).read_bytes() for e in with_itf)
    # without --itf, a later run removes them: the directory is what the run wrote
    assert run_cli("vectors", "--out", out)[0] == 0
    assert not list(out.rglob("*.itf.json")) and not (out / "itf.schema.json").exists()
