"""Issue 21 items 2 and 3: Kafka Connect's two resource kinds, connectors and tasks,
balanced separately (R66), Design III's moves capped per kind at a per-kind cost
(R67), and Design III built on Design II (R68). Each check arrives with the
mutation it catches."""
import json

import pytest

from conftest import EXAMPLES, run_cli
from rebalance.checker import replay
from rebalance.model.assignors import assign
from rebalance.model.config import ConfigError, GroupConfig
from rebalance.model.protocol import NO_INSTANCE_ID, Subscription, mask_of, partitions_of

TWO_KINDS = EXAMPLES / "connect" / "two_kinds_checked.toml"
DELETION = EXAMPLES / "connect" / "connector_deleted_checked.toml"


def play(name, *mutations):
    return replay.run(replay.load(str(EXAMPLES / name), mutations))


def revoked(round_, lane):
    return round_["members"][lane]["revoked"]


@pytest.mark.spec("R66")
def test_connectors_come_first_and_only_where_connect_rebalances():
    cfg = GroupConfig(protocol="deferred", topics=(("t", 4),), connectors=2)
    assert cfg.topics == (("connector", 2), ("t", 4)) and cfg.partition_name(1) == "connector-1"
    assert [(k, list(partitions_of(m)), c) for k, m, c in cfg.kinds] == [("connectors", [0, 1], 2),
                                                                        ("tasks", [2, 3, 4, 5], 1)]
    assert GroupConfig(protocol="deferred", topics=cfg.topics, connectors=2) == cfg  # given with its topic
    assert GroupConfig().kinds == (("partitions", 0b1111, 1),)  # the consumer protocols: one kind
    with pytest.raises(ConfigError, match="connectors .* not cooperative"):
        GroupConfig(connectors=2)
    with pytest.raises(ConfigError, match="connector_cost"):
        GroupConfig(protocol="incremental", connectors=2, connector_cost=0)
    code, out, err = run_cli("check", "--protocol", "eager", "--connectors", "2")
    assert code == 2 and "not eager" in err and "Traceback" not in err


@pytest.mark.spec("R66")
def test_each_kind_is_balanced_on_its_own():
    # A owns both connectors and one task, B the other two tasks: as one kind the loads (3, 2) are balanced;
    # per kind the connectors are (2, 0), so one is revoked for B (Connect's loadBalancingRevocations)
    cfg = GroupConfig(protocol="deferred", topics=(("t", 3),), connectors=2)
    a, b = mask_of([0, 1, 2]), mask_of([3, 4])
    members = ((1, NO_INSTANCE_ID, Subscription(a, 1)), (2, NO_INSTANCE_ID, Subscription(b, 1)))
    out = dict(assign(cfg, members))
    kept_by_a = [cfg.partition_name(p) for p in partitions_of(out[1].partitions)]
    assert kept_by_a == ["connector-0", "t-0"] and out[2].partitions == b  # connector-1 revoked, B's next round
    one_kind = GroupConfig(protocol="deferred", topics=(("connector", 2), ("t", 3)))
    assert dict(assign(one_kind, members))[1].partitions == a  # no move without the second kind


@pytest.mark.spec("R67")
def test_the_seeds_connect_scale_up_moves_one_connector_and_two_tasks_a_round():
    r = play("design3_connect_scale_up.toml")
    assert r["verdict"] == "holds" and not r["mismatches"] and r["rebalances"] == 3
    first, second, _ = r["rounds"]
    assert first.get("scheduled") and revoked(first, "A") == ["connector-2", "t-2"] and revoked(first, "B") == ["t-5"]
    assert revoked(second, "B") == ["connector-5"]
    # the mutation moves both connectors in the first round: the expected rounds do not replay
    wrong = play("design3_connect_scale_up.toml", "moves-ignore-cost")
    assert wrong["verdict"] == "violated" and revoked(wrong["rounds"][0], "B") == ["connector-5", "t-5"]
    assert any("round 1 (generation 2), member B, revoked" in m for m in wrong["mismatches"])


@pytest.mark.spec("R34")
def test_the_seeds_design3_example_replays_round_by_round():
    r = play("design3_member_joins.toml")
    assert r["verdict"] == "holds" and not r["mismatches"] and len(r["rounds"]) == 3


@pytest.mark.spec("R68")
def test_incremental_defers_a_departed_members_partitions_and_caps_owned_moves():
    r = play("design3_member_leaves.toml")
    assert r["verdict"] == "holds" and not r["mismatches"]
    left, spread, *joined = r["rounds"]
    assert left["deferred"] == ["t-6", "t-7"] and not any(m["revoked"] for m in left["members"].values())
    assert "deferred" not in spread
    assert [sum(len(m["revoked"]) for m in x["members"].values()) for x in joined] == [1, 1, 0]  # max_moves = 1
    # Design III without Design II (this model before issue 21): given out in the first round
    wrong = play("design3_member_leaves.toml", "incremental-reassigns-lost")
    assert "deferred" not in wrong["rounds"][0] and wrong["rounds"][0]["members"]["A"]["assigned"][-1] == "t-6"
    assert wrong["verdict"] == "violated" and wrong["mismatches"]


@pytest.mark.spec("R66", "R67", "R68")
def test_two_kinds_hold_under_every_interleaving(rebalance_check):
    code, s = rebalance_check(TWO_KINDS, "--require-covers")
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert code == 0 and set(status.values()) == {"holds"}
    assert {"moves_within_allowance", "bounded_deferral"} <= set(status)
    covers = {c["name"]: c["reached"] for c in s["covers"]}
    assert covers["moves_capped"] and covers["deferral_started"] and covers["returning_member_recognised"]


def test_replay_json_names_both_kinds():
    code, out, _ = run_cli("replay", EXAMPLES / "design3_connect_scale_up.toml", "--json")
    final = json.loads(out)["final"]["ownership"]
    assert code == 0 and final["C"] == ["connector-2", "connector-5", "t-2", "t-5"]


@pytest.mark.spec("R81")
def test_a_deleted_connector_and_its_tasks_are_revoked_held_back_nowhere_and_given_to_nobody():
    r = play("connect/connector_deleted.toml")
    assert r["verdict"] == "holds" and not r["mismatches"] and r["events"] == ["delete-connector"]
    deleted, after = r["rounds"]
    assert "scheduled" not in deleted and sorted(x for lane in "ABC" for x in revoked(deleted, lane)) == \
        ["connector-1", "seq2-0", "seq2-1", "seq2-2", "seq2-3"]
    assert not any(revoked(after, lane) for lane in "ABC")
    # the leader that reads no deletion leaves seq2 running: the rounds differ and Balanced is broken
    wrong = play("connect/connector_deleted.toml", "deleted-connector-kept")
    assert [v["property"] for v in wrong["violations"]] == ["quiescent_balance"]
    assert "connector-1, seq2-0, seq2-1, seq2-2, seq2-3 deleted but still run" in wrong["violations"][0]["reason"]


@pytest.mark.spec("R81")
def test_deletion_holds_under_every_interleaving_with_joins_and_crashes(rebalance_check):
    code, s = rebalance_check(DELETION)
    assert code == 0 and {p["status"] for p in s["properties"]} == {"holds"}
    assert {c["name"]: c["reached"] for c in s["covers"]}["deleted_connector_revoked"]


def test_deletable_connectors_are_refused_without_a_task_topic_each():
    with pytest.raises(ConfigError, match="one topic of tasks per connector"):
        GroupConfig(protocol="deferred", topics=(("t", 4),), connectors=2, deletable_connectors=0b10)
    with pytest.raises(ConfigError, match="needs connectors"):
        GroupConfig(protocol="deferred", deletable_connectors=1)
