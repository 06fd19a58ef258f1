"""Every client under faults (issue 15 item 5), against ``rebalance serve``: librdkafka
(confluent-kafka), kafka-python, our member runtime, aiokafka, kafkajs and Kafka 4.4.0's
Java consumer (the oracle's agent, docs/java-agent.md), each in real processes: (1) a scale-up from 2 to 3 members, (2) a member paused with
SIGSTOP past its session timeout (the group rebalances without it) and resumed
with SIGCONT (it must find its membership lost and rejoin), (3) a member killed
with SIGKILL while a rebalance is in progress (right after another member joined).

Every run records serve's trace and the clients' observed log (spec/OBSERVED.md)
and holds them to the model with ``rebalance conform`` (CHECKS). A coordinator
without commit fencing is caught from the observed log alone."""
import time

import pytest

from interop.harness import Group, Server, conform, partitions, verdict_text, wait_for
from test_findings import DEPARTS, departs_as_recorded, overlap_as_recorded

pytestmark = pytest.mark.interop
TOPIC, PARTITIONS = "t", 6
CLIENTS = ["confluent", "kafka-python", "rebalance", "aiokafka", "kafkajs", "java"]
# (client, partition.assignment.strategy): each client's default (cooperative-sticky, or
# aiokafka's and kafkajs's eager roundrobin), and the Java consumer eager with range too
VARIANTS = [*((c, None) for c in CLIENTS), ("java", "range")]
SESSION_MS = 6000

# What each run is held to: (side, the file it reads): serve's trace on the
# coordinator's and the clients' side, and the clients' observed log.
CHECKS = [("coordinator", "trace"), ("both", "trace"), ("clients", "observed")]
# Clients that depart from the model (docs/explanation/findings.md; tests/test_findings.py keeps a recorded trace of
# each, DEPARTS): the member side names the departure


def files(server: Server, group: Group) -> dict:
    return {"observed": group.observed, "trace": server.trace}


def lost_after(group: Group, name: str, t_ms: float) -> set:
    """Partitions ``name`` reported lost or revoked after ``t_ms``."""
    return {p for e in group.snapshot() if e["member"] == name and e["t_ms"] >= t_ms
            and e["event"] in ("lost", "revoked") for p in partitions(e)}


def pause_past_session(group: Group, zombie: str, running: list, commit_offset: int) -> tuple:
    """Pause ``zombie`` until the others own everything, queue a commit of its
    partitions for when it wakes, resume it; returns (partitions it owned, resume ms)."""
    owned = group.owned()[zombie]
    group.pause(zombie)
    wait_for(lambda: group.balanced_among(running), 60, f"{running} to take over from the paused {zombie}")
    for p in sorted(owned):
        group.tell(zombie, f"commit {p} {commit_offset}")  # read once it runs again: a zombie's commit
    resumed = group.resume(zombie)
    return owned, resumed


@pytest.mark.parametrize("client, strategy", VARIANTS, ids=[c + (f"-{s}" if s else "") for c, s in VARIANTS])
def test_scale_up_pause_and_kill_mid_rebalance(tmp_path, client, strategy):
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}")
    group = Group(server, "g", TOPIC, PARTITIONS)
    try:
        # (1) scale-up 2 -> 3
        for name in "AB":
            group.start(client, name, session_ms=SESSION_MS, strategy=strategy)
        group.wait_balanced()
        group.start(client, "C", session_ms=SESSION_MS, strategy=strategy)
        owned = group.wait_balanced()
        assert sorted(len(owned[m]) for m in "ABC") == [2, 2, 2]

        # (2) A paused past its session timeout, then resumed: lost, rejoined
        was, resumed = pause_past_session(group, "A", ["B", "C"], 7)
        wait_for(lambda: lost_after(group, "A", resumed) >= was, 30, "A to find its membership lost")
        owned = group.wait_balanced()
        assert owned["A"], "A rejoined and was given partitions again"

        # (3) D joins; C is killed while that rebalance is in progress
        mark = len(server.log)
        group.start(client, "D", session_ms=SESSION_MS, strategy=strategy)
        wait_for(lambda: server.rebalances_since(mark), 20, "D's JoinGroup to begin a rebalance")
        group.kill9("C")
        owned = group.wait_balanced(timeout=60)
        assert set().union(*owned.values()) == set(range(PARTITIONS)) and set(owned["D"])
    finally:
        group.stop_all()
        server.stop()
    verdicts = {}
    for side, source in CHECKS:
        code, verdicts[side] = conform(side, files(server, group)[source])
        if side == "both" and client in DEPARTS and code == 1:
            d = verdicts[side]["divergence"]
            assert departs_as_recorded(client, d), verdict_text(verdicts[side])
            continue
        if side == "clients" and code == 1 and all(  # an overlap a recorded departure made (OVERLAPS)
                overlap_as_recorded(client, d, verdicts["both"]["divergences"]) for d in verdicts[side]["divergences"]):
            continue
        assert (code, verdicts[side]["verdict"]) == (0, "conforms"), verdict_text(verdicts[side])
    both = verdicts["both"]
    print(f"{client}: {both['verdict']}, {both['records_checked']} trace records checked, rules {', '.join(both['rules'])}")
    assert {"R2", "R4", "R5", "R8", "R10", "R11"} <= set(verdicts["coordinator"]["rules"])  # R11: A's session expired
    zombie = [o for o in verdicts["clients"]["figures"]["exclusive_processing"] if o["paused"] == ["A"]]
    assert zombie, "the paused member's window shows as exclusive_processing"


def test_no_commit_fencing_is_caught_from_the_observed_log(tmp_path):
    """A coordinator that accepts a zombie's commit (--mutation no-commit-fencing):
    the new owner commits, the resumed zombie commits too, and both are acknowledged.
    kafka-python, whose zombie commits before it hears of its expulsion (librdkafka
    times its own session out on resume and loses its partitions first). That order
    is a race inside the client: when its heartbeat thread wins it, kafka-python
    refuses the commit itself (CommitFailedError, nothing sent), and the run is tried
    again, at most three times."""
    for attempt in range(3):
        server, group = _zombie_commits(tmp_path / f"attempt{attempt}")
        zombie = [e for e in group.snapshot() if e["member"] == "A" and e["event"] == "commit"]
        if zombie[0]["outcome"] == "ok":
            break
        assert zombie[0].get("error") == "CommitFailedError", zombie  # refused, by the client or the coordinator
    else:
        pytest.fail("the zombie's commit was refused in three runs: kafka-python heard of its expulsion first, "
                    f"or the coordinator fenced it (its traces: {tmp_path})")
    code, verdict = conform("clients", group.observed)
    assert code == 1 and verdict["verdict"] == "divergent", verdict
    assert verdict["divergence"]["rule"] == "exclusive_ownership" and verdict["divergence"]["record"]["member"] == "A"
    # the broker's side of the same run: the zombie's commit accepted where the model fences it (R9); judged on
    # the coordinator's side alone, where a client's recorded departure earlier in the trace does not come first
    # (the side "both" names the earliest divergence: kafka-python's R13 rejoin, under load, in one CI run)
    code, verdict = conform("coordinator", server.trace)
    assert code == 1 and verdict["divergence"]["rule"] == "R9", verdict
    assert verdict["divergence"]["record"]["api"] == "OffsetCommit"


def _zombie_commits(tmp_path):
    """One run of the zombie scenario (``test_no_commit_fencing_is_caught_from_the_observed_log``):
    ``(Server, Group)``, both stopped."""
    tmp_path.mkdir()
    server = Server(tmp_path, f"{TOPIC}:{PARTITIONS}", mutations=("no-commit-fencing",))
    group = Group(server, "g", TOPIC, PARTITIONS)
    try:
        for name in "AB":
            group.start("kafka-python", name, session_ms=SESSION_MS)
        group.wait_balanced()
        owned = group.owned()["A"]
        group.pause("A")
        wait_for(lambda: group.balanced_among(["B"]), 60, "B to take over from the paused A")
        for p in sorted(owned):
            group.tell("B", f"commit {p} 9")
        wait_for(lambda: sum(e["event"] == "commit" for e in group.snapshot()) >= len(owned), 20, "B's commits")
        for p in sorted(owned):
            group.tell("A", f"commit {p} 7")
        group.resume("A")
        wait_for(lambda: any(e["member"] == "A" and e["event"] == "commit" for e in group.snapshot()), 20,
                 "the zombie's commit")
        time.sleep(1)
    finally:
        group.stop_all()
        server.stop()
    return server, group
