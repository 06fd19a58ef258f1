"""Progress properties (issue 43, item 2): commits that must succeed, Heartbeats that
must be answered as their rule says, a static restart followed until the member is
Stable. Each is seen to fail by a mutation no property caught before."""
import pytest

from rebalance.checker.properties import heartbeat_rule
from rebalance.model.coordinator import formed_group
from rebalance.model.protocol import Error, Heartbeat, Phase, connection, instance_id, member_id

STATIC = ("--static", "--faults", "restart,crash,leave")
STATIC_PAUSE = ("--static", "--members", "2", "--partitions", "2", "--faults", "pause,crash,restart")
ZOMBIES = ("--members", "2", "--partitions", "2", "--faults", "pause,crash,join")


def _caught(rebalance_check, config, mutation, prop):
    code, s = rebalance_check(*config, "--mutation", mutation, "--continue")
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert code == 1 and status[prop] == "violated", status
    cx = next(c for c in s["counterexamples"] if c["property"] == prop)
    return cx


@pytest.mark.slow  # the matrix (tests/test_mutations.py) catches it in the default suite
@pytest.mark.spec("R9")
def test_a_coordinator_refusing_static_commits_breaks_commit_accepted(rebalance_check):
    """Nothing required a commit to succeed: a coordinator refusing every static
    member's commit passed every property. Now the settled group already fails."""
    cx = _caught(rebalance_check, STATIC, "refuse-static-commits", "commit_accepted")
    assert cx["length"] == 0


@pytest.mark.slow  # the matrix (tests/test_mutations.py) catches it in the default suite
@pytest.mark.spec("R9")
def test_commits_are_judged_in_preparing_rebalance_too(rebalance_check):
    """Kafka accepts a current member's commit while the group prepares a rebalance;
    that state is reached two steps in, where no commit is a transition (nobody
    shares the partitions), and is judged all the same."""
    cx = _caught(rebalance_check, ("--faults", "join,leave,crash"), "refuse-commits-while-preparing", "commit_accepted")
    assert cx["length"] == 2


@pytest.mark.slow  # the matrix (tests/test_mutations.py) catches it in the default suite
@pytest.mark.spec("R41", "R15")
def test_a_member_committing_at_a_reset_generation_after_rejoining_breaks_commit_progress(rebalance_check):
    """A paused member is expelled, answered UNKNOWN_MEMBER_ID, rejoins and is Stable
    again: its commits at generation -1 are all refused. commit_accepted does not see
    it (the commit does not name the member's generation); commit_progress does."""
    code, s = rebalance_check(*ZOMBIES, "--mutation", "commit-generation-after-reset", "--continue")
    status = {p["name"]: p["status"] for p in s["properties"]}
    assert code == 1 and status["commit_progress"] == "violated" and status["commit_accepted"] == "holds"


@pytest.mark.slow  # the matrix (tests/test_mutations.py) catches it in the default suite
@pytest.mark.spec("R10")
def test_a_stale_heartbeat_answered_none_breaks_heartbeat_answered(rebalance_check):
    """The Heartbeat of a static member kept by the rebalance timeout at its old
    generation is answered NONE and changes nothing: no transition, so only the
    property that judges every Heartbeat a member may send sees it."""
    cx = _caught(rebalance_check, STATIC_PAUSE, "heartbeat-ignores-generation", "heartbeat_answered")
    assert cx["length"] == 10


@pytest.mark.spec("R10", "R24")
def test_the_heartbeat_rule_is_read_from_the_spec():
    a, b = member_id(0, 1), member_id(1, 1)
    g = formed_group(((a, instance_id(0), connection(0, 1), 1), (b, 0, connection(1, 1), 2)), 3, a)
    assert heartbeat_rule(g, Heartbeat(a, 3, instance_id(0))) == Error.NONE
    assert heartbeat_rule(g, Heartbeat(a, 2, instance_id(0))) == Error.ILLEGAL_GENERATION
    assert heartbeat_rule(g, Heartbeat(b, 3, instance_id(0))) == Error.FENCED_INSTANCE_ID
    assert heartbeat_rule(g, Heartbeat(member_id(2, 1), 3)) == Error.UNKNOWN_MEMBER_ID
    assert heartbeat_rule(g, Heartbeat(b, 3, instance_id(2))) == Error.UNKNOWN_MEMBER_ID
    assert heartbeat_rule(g._replace(phase=Phase.PREPARING_REBALANCE), Heartbeat(b, 3)) == Error.REBALANCE_IN_PROGRESS


@pytest.mark.slow  # the matrix's unmutated rows hold every property in the default suite
def test_the_correct_model_holds_every_progress_property(rebalance_check):
    for config in (STATIC, ZOMBIES):
        code, s = rebalance_check(*config, "--continue")
        status = {p["name"]: p["status"] for p in s["properties"]}
        assert status["commit_accepted"] == status["commit_progress"] == status["heartbeat_answered"] == "holds"
