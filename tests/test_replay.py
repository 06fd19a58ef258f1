"""The seeds' worked examples, replayed as the seeds describe them."""
import pytest
import json

from conftest import EXAMPLES, run_cli
from rebalance.checker import replay


def play(name):
    return replay.run(replay.load(str(EXAMPLES / name)))


def member(round_, lane):
    return round_["members"][lane]


def test_design1_member_joins():
    # seed 000, Design I: A(T1,T4) B(T2) C(T3), D joins
    r = play("design1_member_joins.toml")
    first, second = r["rounds"]
    assert member(first, "A")["revoked"] == ["T-3"] and member(first, "A")["assigned"] == ["T-0"]
    assert member(first, "D")["assigned"] == []
    assert member(second, "D")["assigned"] == ["T-3"]
    for lane in "BC":  # B and C never stop
        assert all(member(x, lane)["revoked"] == [] for x in r["rounds"])
    assert r["rebalances"] == 2
    assert r["final"]["ownership"] == {"A": ["T-0"], "B": ["T-1"], "C": ["T-2"], "D": ["T-3"]}


def test_design1_member_leaves():
    r = play("design1_member_leaves.toml")
    (only,) = r["rounds"]
    assert member(only, "A")["assigned"] == ["T-0", "T-3"] and r["rebalances"] == 1
    assert all(m["revoked"] == [] for m in only["members"].values())


def test_design1_member_bounces():
    # one rebalance when D leaves, two when it comes back
    r = play("design1_member_bounces.toml")
    assert r["rebalances"] == 3
    assert member(r["rounds"][1], "A")["revoked"] == ["T-3"]
    assert member(r["rounds"][2], "D")["assigned"] == ["T-3"]


def test_eager_member_joins_stops_the_world():
    r = play("eager_member_joins.toml")
    (only,) = r["rounds"]
    assert r["rebalances"] == 1
    for lane, owned in (("A", ["T-0", "T-3"]), ("B", ["T-1"]), ("C", ["T-2"])):
        assert member(only, lane)["revoked"] == owned  # everyone revokes everything


def test_replay_cli_json_and_text():
    code, out, err = run_cli("replay", EXAMPLES / "design1_member_joins.toml", "--json")
    assert code == 0, err
    assert json.loads(out)["rebalances"] == 2
    code, out, _ = run_cli("replay", EXAMPLES / "design1_member_joins.toml")
    assert code == 0 and "revoked [T-3]" in out and "rebalances: 2" in out


def test_replay_bad_scenario(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[initial]\nowned = { A = ["X-9"] }\n')
    code, _, err = run_cli("replay", bad)
    assert code == 2 and "unknown partition 'X-9'" in err


def test_replay_rejects_malformed_scenarios(tmp_path):
    cases = [
        ('[initial]\nowned = { A = "t-0" }\n', "owned = { A = [...]"),
        ('[group]\nprotcol = "eager"\n[initial]\nowned = { A = ["t-0"] }\n', "unknown key group.protcol"),
        ('events = [1]\n[initial]\nowned = { A = ["t-0"] }\n', "events[0] must be a table"),
        ('[initial]\nowned = { A = ["t-0"] }\n[[events]]\naction = "explode"\nmember = "A"\n', "action must be"),
    ]
    for text, message in cases:
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        code, _, err = run_cli("replay", bad)
        assert code == 2 and message in err, (text, err)


@pytest.mark.spec("R31", "R32", "R33")
def test_design2_member_leaves_defers_then_assigns():
    # seed 000, Design II: empty assignments with a delay, the lost partition after it
    r = play("design2_member_leaves.toml")
    first, second = r["rounds"]
    assert first["deferred"] == ["T-3"] and all(m["assigned"] == [p] for m, p in zip(
        (member(first, x) for x in "ABC"), ("T-0", "T-1", "T-2")))
    assert all(m["revoked"] == [] for m in first["members"].values())
    assert "deferred" not in second and member(second, "A")["assigned"] == ["T-0", "T-3"]


@pytest.mark.spec("R33")
def test_design2_member_bounces_gets_its_partition_back():
    # D' back before the delay ends gets T4 (T-3 here) at once
    r = play("design2_member_bounces.toml")
    first, second = r["rounds"]
    assert first["deferred"] == ["T-3"]
    assert member(second, "D")["assigned"] == ["T-3"] and r["rebalances"] == 2


@pytest.mark.spec("R34")
def test_design3_moves_one_partition_per_round():
    r = play("design3_member_joins.toml")
    moves = [sum(len(m["revoked"]) for m in x["members"].values()) for x in r["rounds"]]
    assert moves == [1, 1, 0] and r["rounds"][0].get("scheduled")
    assert sorted(len(v) for v in r["final"]["ownership"].values()) == [2, 2, 2, 2]


def connect(name):
    return play(f"connect/{name}.toml")


def per_kind(ownership):
    """Each member's load per resource kind, sorted: ``([connectors, ...], [tasks, ...])`` (R66)."""
    connectors = [sum(p.startswith("connector-") for p in ps) for ps in ownership.values()]
    tasks = [sum(not p.startswith("connector-") for p in ps) for ps in ownership.values()]
    return sorted(connectors), sorted(tasks)


@pytest.mark.spec("R31", "R33")
def test_connect_situations_on_the_deferred_protocol():
    # after Kafka Connect's IncrementalCooperativeAssignorTest
    joins = connect("worker_joins")
    assert member(joins["rounds"][0], "C")["revoked"] == ["t-5"] and member(joins["rounds"][1], "D")["assigned"] == ["t-5"]
    for name, back in (("worker_bounces", "C"), ("leader_bounces", "A")):
        r = connect(name)  # the delay, then the returning worker gets its own back at once
        assert r["rounds"][0]["deferred"] and r["rebalances"] == 2
        assert r["final"]["ownership"] == r["initial"]["ownership"]
    for name, gone in (("worker_leaves", "C"), ("leader_leaves", "A")):
        r = connect(name)  # deferred, then spread over the others once the delay passed
        first, second = r["rounds"]
        assert first["deferred"] and "deferred" not in second
        assert gone not in r["final"]["ownership"]
        assert per_kind(r["final"]["ownership"]) == ([1, 2], [3, 3])  # connectors and tasks balanced apart
    r = connect("worker_joins_during_delay")
    assert member(r["rounds"][1], "D")["assigned"] == ["connector-2", "t-4", "t-5"]
    assert connect("leader_leaves")["rounds"][0]["leader"] == "B1"  # a new leader ran the deferral


def connect_flavoured(name):
    return replay.run(replay.load(str(EXAMPLES / f"connect/{name}.toml"), ("connect-leader-state",)))


@pytest.mark.spec("R31", "R33")
@pytest.mark.parametrize("name", ["worker_joins", "worker_leaves", "worker_leaves_no_delay"])
def test_connect_and_the_seed_agree(name):
    # the example's source names both; the Connect-flavoured replay ends where the seed's does
    seed, connect_ = connect(name), connect_flavoured(name)
    assert "agree" in seed["source"] or "Connect" in seed["source"]
    assert connect_["final"] == seed["final"] and connect_["rebalances"] == seed["rebalances"]


@pytest.mark.spec("R31", "R33")
def test_where_connect_differs_the_example_says_so_and_the_mutation_replays_connects_test():
    for name in ("worker_bounces", "worker_joins_during_delay", "leader_leaves", "leader_bounces"):
        assert "Kafka Connect differs" in connect(name)["source"] and "connect-leader-state" in connect(name)["source"]
    # IncrementalCooperativeAssignorTest.testTaskAssignmentWhenWorkerBounces: the worker back before the delay
    # expires gets nothing (assertEmptyAssignment) until it expires, then its work back, no revocations
    for name, back in (("worker_bounces", "C"), ("worker_joins_during_delay", "D")):
        r = connect_flavoured(name)
        held, waiting, served = r["rounds"]
        assert held["deferred"] and waiting["deferred"] and member(waiting, back)["assigned"] == []
        assert "deferred" not in served and member(served, back)["assigned"] == ["connector-2", "t-4", "t-5"]
        assert not any(m["revoked"] for m in served["members"].values())
    # testTaskAssignmentWhenLeaderLeavesPermanently: the new leader starts from a clean slate, assertDelay(0),
    # balanced at once; the seed's (with R31) holds the leader's partitions back for the delay
    r = connect_flavoured("leader_leaves")
    (only,) = r["rounds"]
    assert "scheduled" not in only and only["leader"] == "B1"
    assert per_kind(r["final"]["ownership"]) == ([1, 2], [3, 3])
    assert connect("leader_leaves")["rounds"][0]["deferred"] == ["connector-0", "t-0", "t-1"]
    # testTaskAssignmentWhenLeaderBounces: reassigned at once; the old leader returns as a new worker, a
    # revoking round, then the follow-up round with no revocations, balanced (the seed: it gets its own back)
    r = connect_flavoured("leader_bounces")
    first, revoking, follow_up = r["rounds"]
    assert not any("scheduled" in x for x in r["rounds"])
    assert member(revoking, "A")["assigned"] == [] and sum(len(m["revoked"]) for m in revoking["members"].values()) == 3
    assert not any(m["revoked"] for m in follow_up["members"].values())
    assert per_kind(r["final"]["ownership"]) == ([1, 1, 1], [2, 2, 2])
    assert r["final"]["ownership"] != connect("leader_bounces")["final"]["ownership"]


def test_replay_prints_the_mutation_and_its_source(tmp_path):
    code, out, _ = run_cli("replay", str(EXAMPLES / "connect/leader_leaves.toml"), "--mutation", "connect-leader-state",
                           cwd=tmp_path)
    assert code == 0 and "mutation connect-leader-state:" in out and "IncrementalCooperativeAssignor" in out
    code, _, err = run_cli("replay", str(EXAMPLES / "connect/leader_leaves.toml"), "--mutation", "nope", cwd=tmp_path)
    assert code == 2 and "nope" in err
