"""What exhaustive exploration finds in Kafka's own protocol (spec/SPEC.md section 11):
violations on the model *without* a mutation, each traced to the Kafka code the model
follows, and each shown to depend on the rule named (the same situation without it
holds)."""
import json

import pytest

F1 = ("--members", "1", "--partitions", "2", "--static", "--faults", "join,crash,restart", "--max-faults", "3")


def _steps(tmp_path, prop):
    doc = json.loads((tmp_path / "out" / f"{prop}.json").read_text())
    return doc, [s["action"]["text"] for s in doc["steps"][1:]]


def test_f1_a_static_leader_restarting_between_cooperative_rounds_strands_a_partition(rebalance_check, tmp_path):
    """F1: a second static member joins; the leader withholds t-1 (revoke first,
    KIP-429), crashes before reading its SyncGroup response and restarts within
    session.timeout.ms: KIP-345 gives it its stored assignment back without a
    rebalance (GroupCoordinator.updateStaticMemberAndRebalance, Stable), so the
    second round that would hand out t-1 never happens."""
    code, out = rebalance_check(*F1, "--continue", "--expect-finding", "none")
    status = {p["name"]: p["status"] for p in out["properties"]}
    assert code == 1 and status["eventual_balance"] == status["quiescent_balance"] == "violated", out
    assert all(s == "holds" for n, s in status.items() if n not in ("eventual_balance", "quiescent_balance"))
    doc, steps = _steps(tmp_path, "eventual_balance")
    assert doc["length"] == 17 and "t-1 owned by nobody" in doc["reason"]
    assert "A: crash" in steps and "A: restart" in steps and "skip_assignment" in steps[-3]
    assert steps[-1] == "A <- coordinator: SyncGroupResponse(NONE, [t-0])"


@pytest.mark.parametrize("variant", [("--protocol", "eager"), ("--mutation", "static-rejoin-rebalances"), ()],
                         ids=["eager", "rejoin-rebalances", "dynamic"])
def test_f1_needs_cooperative_static_members_restored_without_a_rebalance(rebalance_check, variant):
    """Without one of F1's ingredients eventual_balance holds: eager members give
    everything up in one round; a static restart that rebalances (the mutation) hands
    t-1 out, at the price of static_restart_no_rebalance; a dynamic member's restart
    is a new member and rebalances."""
    args = F1 if variant else tuple(a for a in F1 if a != "--static")
    code, out = rebalance_check(*args, *variant, "--continue")
    status = {p["name"]: p["status"] for p in out["properties"]}
    assert status["eventual_balance"] == "holds", out
    if variant == ("--mutation", "static-rejoin-rebalances"):
        assert status["static_restart_no_rebalance"] == "violated"
    else:
        assert code == 0


@pytest.mark.slow
def test_f2_f3_a_paused_static_member_kept_by_the_rebalance_timeout(rebalance_check, tmp_path):
    """F2: a paused static member kept by the rebalance timeout (R27) is assigned from
    the subscription of its previous JoinGroup, older than what it was granted since:
    the leader gives a partition it still owns to another member (revoke_before_assign).
    F3: its JoinGroup, delayed past that generation, claims the partition again once
    the other owner is expelled, so both had OffsetCommits accepted during one unbroken
    co-ownership (exclusive_commits); never both at once: each commit was accepted
    while the other could not commit, so exclusive_ownership holds."""
    code, out = rebalance_check("--members", "2", "--partitions", "2", "--static", "--faults", "crash,restart,pause",
                           "--max-faults", "4", "--continue", "--expect-finding", "none")
    status = {p["name"]: p["status"] for p in out["properties"]}
    assert code == 1 and status["revoke_before_assign"] == status["exclusive_commits"] == "violated", out
    assert status["single_leader"] == status["unique_instance"] == status["exclusive_ownership"] == "holds"
    assert status["refinement"] == "holds"  # the spec says what Kafka guarantees (issue 43; once a strict xfail)
    doc, steps = _steps(tmp_path, "revoke_before_assign")
    assert doc["length"] == 15 and "B: pause" in steps and steps[-3] == "coordinator timer: RebalanceTimeout()"
    doc, steps = _steps(tmp_path, "exclusive_commits")
    assert doc["length"] == 30 and "the OffsetCommits of both accepted" in doc["reason"]
    # the reason names the execution's own member ids (A2: A's second process), not the canonical ones
    final = doc["final_state"]
    assert doc["reason"].startswith(f"t-0 owned by {final['A']['member_id']} and {final['B']['member_id']}")
    assert final["A"]["member_id"] == "A2"
    assert "B: pause" in steps and "A: pause" in steps
