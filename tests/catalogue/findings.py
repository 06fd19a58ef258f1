"""SPEC section 11's findings in Kafka's own protocol, reproduced on the real broker:
each a scenario whose claims are first the finding's precondition (shown reached on the
trace) and then the finding itself. Registered in ``FINDINGS`` (not the conformance
catalogue: their point is an outcome the protocol allows and no one wants).

``python -m catalogue --findings`` runs them; tests/test_kafka_findings_on_kafka.py is
the verdict test; docs/findings-on-kafka.md is the write-up for Kafka's JIRA.
"""
from __future__ import annotations

from .runner import Variant, scenario

FINDINGS: dict = {}
LIBRDKAFKA_STATIC = Variant("confluent", "cooperative-sticky", static=True)
JAVA_STATIC = Variant("java", "cooperative-sticky", static=True)
SESSION_MS = 10_000


def _faults(f, kind: str, api: str, after: float = 0) -> list:
    return [r for r in f.other if r["type"] == "fault" and r["fault"] == kind and r.get("api") == api
            and r["t_ms"] >= after]


@scenario("F1: a static leader restarting between the two rounds of a cooperative rebalance strands a partition",
          variants=(LIBRDKAFKA_STATIC, JAVA_STATIC), partitions=2, registry=FINDINGS)
def f1_stranded_partition(run):
    run.start("A", session_ms=SESSION_MS)
    run.wait_balanced()  # A owns t-0 and t-1
    run.proxy.inject("SyncGroup", drop=True, member="A", count=1)  # the next round's answer never reaches A
    run.mark("join")
    run.start("B", session_ms=SESSION_MS)
    run.wait(lambda: _faults(run.facts(), "drop", "SyncGroup", run.marks["join"]), "A's SyncGroup answered, dropped")
    run.kill9("A")  # A crashes before it reads the answer that would have made it revoke t-1 and rejoin
    run.mark("restart")
    run.start("A", session_ms=SESSION_MS)
    run.wait(lambda: run.facts().first("SyncGroup", "NONE", after=run.marks["restart"], client="A"),
             "A's new process to sync", 30)
    run.mark("settled")
    run.sleep(SESSION_MS / 1000 + 2)  # past every session timeout: nothing else will happen by itself


@f1_stranded_partition.situation
def _(run, f):
    join, restart, settled = run.marks["join"], run.marks["restart"], run.marks["settled"]
    dropped = _faults(f, "drop", "SyncGroup", join)
    yield "precondition: the round after B joined answered A's SyncGroup, and the answer was dropped", bool(dropped)
    round1 = f.generations(join)[:1]
    given = f.assignments(round1[0]) if round1 else {}
    kept = given.get("A", [])
    yield "precondition: that round gave A one partition and B nothing (the other to be revoked first, KIP-429)", \
        len(kept) == 1 and given.get("B") == []
    back = f.first("JoinGroup", "NONE", after=restart, client="A")
    yield "precondition: A's new process rejoined with i-A within session.timeout.ms, in the same generation", \
        back is not None and back[1]["t_ms"] - restart < SESSION_MS and bool(round1) and \
        back[1]["body"]["generation_id"] == round1[0]
    yield "finding: no new generation began after A's restart", f.generations(restart) == round1
    owned = run.clients.owned()
    yield "finding: for a whole session timeout after, the other partition had no owner (A owns what it kept, " \
          "B nothing)", owned.get("A") == set(kept) and not owned.get("B") and \
        run.clients.snapshot()[-1]["t_ms"] < settled + 1000


@scenario("F4: a broker restart fences a static member that re-registered, after an admin removal, in a round not "
          "yet stored", variants=(LIBRDKAFKA_STATIC, JAVA_STATIC), partitions=2, registry=FINDINGS)
def f4_fenced_after_failover(run):
    for name in "AB":
        run.start(name, session_ms=30_000)
    run.wait_balanced()
    leader = next(c for _, c, _, members in run.facts().joins() if members)
    other = "B" if leader == "A" else "A"
    # the leader learns of the rebalance late (its heartbeat answers held back 2 s), so the removed follower
    # rejoins first; nor does it learn that the round's JoinGroup phase completed, so it sends no SyncGroup:
    # the round stays in CompletingRebalance, where the coordinator stores nothing (R37)
    run.proxy.inject("Heartbeat", delay_ms=2000, member=leader, for_ms=4000)
    run.proxy.inject("JoinGroup", delay_ms=60_000, member=leader, count=1)
    run.mark("remove")
    run.remove_members([f"i-{other}"])  # the admin removes the follower's instance; its process is alive
    run.wait(lambda: run.facts().first("JoinGroup", "NONE", after=run.marks["remove"], client=other),
             f"{other} to join again under a new member id", 30)
    run.mark("restart")
    run.restart_broker(crash=True)
    run.wait(lambda: [r for q, r in run.facts().exchanges if r["t_ms"] >= run.marks["restart"]
                      and r["body"].get("error") == "FENCED_INSTANCE_ID"], "a FENCED_INSTANCE_ID after the restart",
             60)
    run.fenced = other


@f4_fenced_after_failover.situation
def _(run, f):
    remove, restart = run.marks["remove"], run.marks["restart"]
    other = getattr(run, "fenced", "?")
    leave = f.first("LeaveGroup", "NONE", after=remove)
    yield "precondition: the admin's LeaveGroup removed the follower's group.instance.id", leave is not None
    rejoined = f.first("JoinGroup", "NONE", after=remove, client=other)
    yield "precondition: its live process joined again under a new member id", rejoined is not None and \
        rejoined[1]["body"]["member_id"] != f.first("JoinGroup", "NONE", client=other)[1]["body"]["member_id"]
    gen = rejoined[1]["body"]["generation_id"] if rejoined else None
    synced = [r for q, r in f.of("SyncGroup", "NONE", after=remove) if q["body"]["generation_id"] == gen
              and r["t_ms"] < restart]
    yield "precondition: that round had not completed its SyncGroup (nothing stored) when the broker died", \
        rejoined is not None and not synced
    yield "precondition: the broker restarted (a restart record)", any(r["type"] == "restart" for r in f.other)
    fenced = [q for q, r in f.exchanges if r["t_ms"] >= restart and f.client(q) == other
              and r["body"].get("error") == "FENCED_INSTANCE_ID"]
    yield "finding: the re-registered process was answered FENCED_INSTANCE_ID, fatal to it", bool(fenced)


@scenario("F2: a paused static member kept by the rebalance timeout is assigned from an old subscription",
          variants=(JAVA_STATIC,), partitions=2, registry=FINDINGS)
def f2_stale_subscription(run):
    # only the Java consumer lets a session (B's 20 s) outlast the rebalance timeout (3 s, max.poll.interval.ms)
    run.start("A", session_ms=3000, max_poll_ms=3000)
    run.start("B", session_ms=20_000, max_poll_ms=3000)
    run.wait_balanced()
    run.kill9("A")  # A's session (3 s) expires; B rejoins claiming only what it owns, and is given both
    run.wait(lambda: run.clients.owned().get("B") == {0, 1}, "B to own both partitions", 30)
    run.mark("pause")
    run.pause("B")  # a GC stall longer than the rebalance timeout, shorter than B's session
    run.mark("join")
    run.start("A", session_ms=3000, max_poll_ms=3000)  # A's new process joins: a rebalance B cannot rejoin
    run.wait(lambda: run.facts().first("SyncGroup", "NONE", after=run.marks["join"], client="A"),
             "A's round to complete without B", 30)
    run.sleep(1)
    run.mark("resume")
    run.resume("B")
    run.wait_balanced(timeout=30)


@f2_stale_subscription.situation
def _(run, f):
    pause, join, resume = run.marks["pause"], run.marks["join"], run.marks["resume"]
    both = [g for g in f.generations() if sorted(f.assignments(g).get("B", [])) == [0, 1] and g in
            [q["body"]["generation_id"] for q, r in f.of("SyncGroup", "NONE") if f.client(q) == "B"]]
    yield "precondition: B was given both partitions in one round", bool(both)
    claims = [q for q in f.client_requests("JoinGroup", "B") if q["t_ms"] < pause]
    owned = claims[-1]["body"]["protocols"][0]["metadata"]["owned_partitions"] if claims else None
    yield "precondition: B's last JoinGroup before it stopped claimed only one of them", \
        owned is not None and sum(len(t["partitions"]) for t in owned) == 1
    round_ = f.first("JoinGroup", "NONE", after=join, client="A")
    gen = round_[1]["body"]["generation_id"] if round_ else None
    waited = round_ and round_[1]["t_ms"] - join
    members = (round_[1]["body"]["members"] if round_ else []) or []
    yield "precondition: A's round completed by the rebalance timeout while B was stopped, B (static) kept in it", \
        round_ is not None and round_[1]["t_ms"] < resume and len(members) in (0, 2) and waited > 2500
    given = f.assignments(gen).get("A", []) if gen is not None else []
    yield "finding: A was given a partition B still owned (revoke_before_assign)", bool(set(given) & {0, 1}) and \
        bool(set(given) & run_owned_by_b_at(run, f, round_))


def run_owned_by_b_at(run, f, round_) -> set:
    """What B's callbacks say it owned when A's round completed."""
    if round_ is None:
        return set()
    t, owned = round_[1]["t_ms"], set()
    for e in run.clients.snapshot():
        if e["member"] != "B" or e["t_ms"] > t:
            continue
        ps = {p["partition"] for p in e.get("partitions", ())}
        owned = owned | ps if e["event"] == "assigned" else owned - ps if e["event"] in ("revoked", "lost") else owned
    return owned
