"""The scenario catalogue: group situations played by real clients on the real Kafka
4.4.0 broker and on ``rebalance serve`` alike (runner.py), each with the claims that
show, from the recorded trace, that it reached what it is about.

Times: agents use session.timeout.ms 4 s (runner.SESSION_MS) and heartbeat 300 ms
unless a scenario says otherwise; the brokers' group.min.session.timeout.ms is 100 and
group.initial.rebalance.delay.ms 0 unless ``settings`` says otherwise. The KIP-848
variants (kip848.py, group.protocol=consumer) run on brokers with their own
group.consumer settings (a 3 s session) and are judged by their own claims.
"""
from __future__ import annotations

from . import kip848
from .runner import Variant, scenario

COOPERATIVE = Variant("confluent", "cooperative-sticky")
EAGER = Variant("confluent", "range")
STATIC = Variant("confluent", "cooperative-sticky", static=True)
STATIC_EAGER = Variant("confluent", "range", static=True)
# the Java consumer (kafka-clients 4.4.0, oracle/src): the only client here whose session may outlast its
# rebalance timeout (librdkafka requires max.poll.interval.ms >= session.timeout.ms)
JAVA_COOPERATIVE = Variant("java", "cooperative-sticky")
JAVA_EAGER = Variant("java", "range")
JAVA_STATIC = Variant("java", "cooperative-sticky", static=True)
# the Python clients whose departures from the model README's client findings list (tests/test_findings.py)
KAFKA_PYTHON = Variant("kafka-python", "cooperative-sticky")
AIOKAFKA = Variant("aiokafka", "roundrobin")


@scenario("two members join, one leaves with LeaveGroup, then the other",
          variants=(COOPERATIVE, EAGER, JAVA_COOPERATIVE))
def join_leave(run):
    run.start("A")
    run.start("B")
    run.wait_balanced()
    run.mark("leave")
    run.close("B")
    run.wait_balanced()
    run.close("A")


@join_leave.situation
def _(run, f):
    yield "A and B were in one generation", any(f.members_of(g) == ["A", "B"] for g in f.generations())
    yield "B's LeaveGroup was answered NONE", f.first("LeaveGroup", "NONE", client="B") is not None
    yield "A rejoined after B left", f.first("JoinGroup", "NONE", after=run.marks["leave"], client="A") is not None


@scenario("a fourth member joins a Stable group of three", variants=(
    COOPERATIVE, EAGER, JAVA_COOPERATIVE, JAVA_EAGER, kip848.CONFLUENT, kip848.JAVA), kip848=kip848.scale_up)
def scale_up(run):
    for name in "ABC":
        run.start(name)
    run.wait_balanced()
    run.mark("join")
    run.start("D")
    run.wait_balanced()


@scale_up.situation
def _(run, f):
    after = run.marks["join"]
    yield "the group was Stable with A, B and C", any(f.members_of(g) == ["A", "B", "C"] for g in f.generations())
    yield "D joined after that", f.first("JoinGroup", "NONE", after=after, client="D") is not None
    cooperative = run.variant.strategy == "cooperative-sticky"
    yield ("two rounds (revoke, then assign)" if cooperative else "one round"), \
        len(f.generations(after)) == (2 if cooperative else 1)


@scenario("two of four members leave with LeaveGroup (KIP-848: a heartbeat at epoch -1)",
          variants=(COOPERATIVE, EAGER, JAVA_COOPERATIVE, kip848.CONFLUENT, kip848.JAVA), kip848=kip848.scale_down)
def scale_down(run):
    for name in "ABCD":
        run.start(name)
    run.wait_balanced()
    run.mark("leave")
    run.close("C")
    run.close("D")
    run.wait_balanced()


@scale_down.situation
def _(run, f):
    after = run.marks["leave"]
    yield "four members were Stable", any(len(f.members_of(g)) == 4 for g in f.generations())
    yield "C and D left", all(f.first("LeaveGroup", "NONE", after=after, client=c) for c in "CD")
    yield "A and B own everything after", sorted(f.assignments()) == ["A", "B"] and \
        sum(map(len, f.assignments().values())) == run.scenario.partitions


@scenario("a member stops (SIGSTOP) past session.timeout.ms, is expired, resumes and rejoins",
          variants=(COOPERATIVE, EAGER, JAVA_EAGER, KAFKA_PYTHON, AIOKAFKA, kip848.CONFLUENT, kip848.JAVA),
          kip848=kip848.session_timeout)
def session_timeout(run):
    three_then(run, "pause", run.pause, "C")
    run.mark("resume")
    run.resume("C")
    run.wait_balanced()


@session_timeout.situation
def _(run, f):
    paused, resumed = run.marks["pause"], run.marks["resume"]
    regen = [t for t, c, g, _ in f.joins(paused) if c in "AB" and t < resumed]
    yield "A and B rejoined while C was stopped", bool(regen)
    yield "not before C's session could expire", bool(regen) and min(regen) - paused > 2000
    yield "C learned it was expired", bool(f.of("Heartbeat", "UNKNOWN_MEMBER_ID", resumed)
                                            or f.of("JoinGroup", "UNKNOWN_MEMBER_ID", resumed)
                                            or f.of("SyncGroup", "UNKNOWN_MEMBER_ID", resumed)
                                            or f.of("Heartbeat", "ILLEGAL_GENERATION", resumed)
                                            or f.first("JoinGroup", "NONE", resumed, client="C"))


@scenario("a member is killed (kill -9): the others take its partitions once its session expires",
          variants=(COOPERATIVE, kip848.CONFLUENT, kip848.JAVA), kip848=kip848.member_crash)
def member_crash(run):
    three_then(run, "kill", run.kill9, "B")


def three_then(run, label: str, fault, victim: str) -> None:
    """A, B and C balance; at the mark ``label``, ``fault(victim)``; the other two balance without it."""
    for name in "ABC":
        run.start(name)
    run.wait_balanced()
    run.mark(label)
    fault(victim)
    run.wait_balanced([n for n in "ABC" if n != victim], timeout=30)


@member_crash.situation
def _(run, f):
    killed = run.marks["kill"]
    regen = [t for t, c, _, _ in f.joins(killed) if c in "AC"]
    yield "A and C rejoined without B", bool(regen) and f.members_of(f.generations(killed)[-1]) == ["A", "C"]
    yield "not before B's session could expire", bool(regen) and min(regen) - killed > 2000


@scenario("a member stopped (SIGSTOP) during a rebalance misses the rebalance timeout "
          "(max.poll.interval.ms 3 s, session 10 s)", variants=(JAVA_COOPERATIVE, JAVA_EAGER, JAVA_STATIC))
def rebalance_timeout(run):
    for name in "AB":
        run.start(name, session_ms=10_000, max_poll_ms=3000)
    run.wait_balanced()
    run.pause("B")
    run.mark("join")
    run.start("C", session_ms=10_000, max_poll_ms=3000)
    run.wait(lambda: run.facts().first("SyncGroup", "NONE", after=run.marks["join"], client="C"),
             "the round without B to complete", 30)
    run.mark("resume")
    run.resume("B")
    run.wait_balanced()


@rebalance_timeout.situation
def _(run, f):
    after, resumed = run.marks["join"], run.marks["resume"]
    c = f.first("JoinGroup", "NONE", after=after, client="C")
    yield "C's join completed while B was stopped", c is not None and c[1]["t_ms"] < resumed
    waited = c and c[1]["t_ms"] - after
    yield "after the rebalance timeout (3 s), before B's session (10 s)", c is not None and 2500 < waited < 9000
    if run.variant.static:
        yield "the static B stayed in the generation's member list", c is not None and any(
            len(members or ()) == 3 for _, who, g, members in f.joins(after) if g == c[1]["body"]["generation_id"])


@scenario("three members join an Empty group 0, 1 and 2.5 s apart under group.initial.rebalance.delay.ms 3 s",
          variants=(COOPERATIVE, EAGER, JAVA_COOPERATIVE), settings={"group.initial.rebalance.delay.ms": 3000})
def initial_delay(run):
    run.mark("first")
    run.start("A")
    run.sleep(1)
    run.start("B")
    run.sleep(1.5)
    run.start("C")
    run.wait_balanced()


@initial_delay.situation
def _(run, f):
    first = f.generations()[:1]
    yield "the first generation has all three members", bool(first) and f.members_of(first[0]) == ["A", "B", "C"]
    joined = f.joins()
    yield "it completed no sooner than the delay after A joined", bool(joined) and \
        joined[0][0] - f.first("JoinGroup", after=run.marks["first"], client="A")[0]["t_ms"] >= 2900


@scenario("a static member is killed (kill -9) and restarted within session.timeout.ms (10 s)",
          variants=(STATIC, STATIC_EAGER, JAVA_STATIC))
def static_restart(run):
    for name in "ABC":
        run.start(name, session_ms=10_000)
    before = run.wait_balanced()
    run.kill9("B")
    run.mark("restart")
    run.start("B", session_ms=10_000)
    run.wait(lambda: run.clients.owned().get("B") == before["B"], "B to get its partitions back", 30)
    run.sleep(2)


@static_restart.situation
def _(run, f):
    after = run.marks["restart"]
    back = f.first("JoinGroup", "NONE", after=after, client="B")
    yield "B's new process joined with its group.instance.id", back is not None and \
        back[0]["body"]["group_instance_id"] == "i-B"
    yield "within its session timeout", back is not None and back[1]["t_ms"] - after < 10_000
    yield "no member other than B rejoined (no rebalance)", not [c for _, c, _, _ in f.joins(after) if c != "B"]


@scenario("a rolling bounce of three static members: each in turn closed (a static member sends no LeaveGroup, "
          "KIP-345; KIP-848: a heartbeat at epoch -2) and started again within session.timeout.ms (10 s)",
          variants=(STATIC, JAVA_STATIC, kip848.JAVA_STATIC), kip848=kip848.static_rolling_bounce)
def static_rolling_bounce(run):
    for name in "ABC":
        run.start(name, session_ms=10_000)
    before = run.wait_balanced()
    run.mark("bounce")
    for name in "ABC":
        run.close(name)
        run.start(name, session_ms=10_000)
        run.wait(lambda: run.clients.owned().get(name) == before[name], f"{name} to get its partitions back", 30)
    run.sleep(2)


@static_rolling_bounce.situation
def _(run, f):
    after = run.marks["bounce"]
    back = {c: (t, g) for t, c, g, _ in reversed(f.joins(after))}  # each one's first join after the mark
    yield "A, B and C each rejoined with a new process after the mark", sorted(back) == ["A", "B", "C"]
    yield "each with its group.instance.id", all(
        q["body"]["group_instance_id"] == f"i-{f.client(q)}" for q, _ in f.of("JoinGroup", "NONE", after))
    last = [g for t, _, g, _ in f.joins() if t < after][-1:]
    yield "in the generation they left (no rebalance)", bool(last) and {g for _, g in back.values()} == set(last)


@scenario("a second process with a running static member's group.instance.id joins and fences it",
          variants=(STATIC, JAVA_STATIC))
def static_replacement(run):
    for name in "AB":
        run.start(name, session_ms=10_000)
    run.wait_balanced()
    run.mark("replace")
    run.start("B2", instance_id="i-B", session_ms=10_000)
    # B2 joins first (a JVM takes seconds to start), then B's next Heartbeat or OffsetCommit is fenced; B's own
    # commits before B2 joined are answered NONE and must not end the wait
    run.wait(lambda: _fenced(run.facts(), run.marks["replace"]), "B2 to join and B to be fenced", 60)
    run.sleep(2)


def _fenced(f, after: float) -> bool:
    """B2's JoinGroup was answered NONE after ``after``, and B was answered FENCED_INSTANCE_ID."""
    return f.first("JoinGroup", "NONE", after=after, client="B2") is not None and any(
        f.client(q) == "B" and r["t_ms"] >= after and "FENCED_INSTANCE_ID" in str(r["body"]) for q, r in f.exchanges)


@static_replacement.situation
def _(run, f):
    after = run.marks["replace"]
    yield "B2 joined with i-B while B ran", f.first("JoinGroup", "NONE", after=after, client="B2") is not None
    yield "B was answered FENCED_INSTANCE_ID", _fenced(f, after)


@scenario("two killed static members are removed by the admin API (LeaveGroup by group.instance.id, KIP-345) "
          "instead of waiting out their 30 s sessions", variants=(STATIC, STATIC_EAGER, JAVA_STATIC))
def batch_removal(run):
    for name in "ABC":
        run.start(name, session_ms=30_000)
    run.wait_balanced()
    run.kill9("B")
    run.kill9("C")
    run.mark("remove")
    run.remove_members(["i-B", "i-C"])
    run.wait_balanced(["A"], timeout=20)


@batch_removal.situation
def _(run, f):
    after = run.marks["remove"]
    leave = f.first("LeaveGroup", after=after)
    yield "one LeaveGroup named i-B and i-C", leave is not None and sorted(
        m["group_instance_id"] for m in leave[0]["body"]["members"]) == ["i-B", "i-C"]
    rejoin = f.first("SyncGroup", "NONE", after=after, client="A")
    yield "A alone owned everything well before the sessions expired", rejoin is not None and \
        rejoin[1]["t_ms"] - after < 10_000 and f.assignments() == {"A": list(range(run.scenario.partitions))}


@scenario("commits under a fenced identity: the old generation of a live member, and the member id of one "
          "expired while stopped (a zombie that kept them)", variants=(COOPERATIVE, EAGER))
def fenced_commit(run):
    for name in "AB":
        run.start(name)
    owned = run.wait_balanced()
    f = run.facts()
    old_generation = f.generations()[-1]
    b = f.first("JoinGroup", "NONE", client="B")[1]["body"]["member_id"]
    a = f.first("JoinGroup", "NONE", client="A")[1]["body"]["member_id"]
    run.pause("B")
    run.wait_balanced(["A"], timeout=30)  # B's session expired: A alone, in a new generation
    run.mark("fenced")
    run.errors = {"stale generation": run.commit_as(a, old_generation, min(owned["A"]), 1, "A"),
                  "expired member": run.commit_as(b, old_generation, min(owned["B"]), 1, "B"),
                  "expired member's rejoin": run.join_as(b, "B")}
    run.resume("B")
    run.wait_balanced()


@fenced_commit.situation
def _(run, f):
    after = run.marks["fenced"]
    commits = {f.client(q): r for q, r in f.of("OffsetCommit", after=after)}
    error = lambda who: {p["error"] for t in commits[who]["body"]["topics"] for p in t["partitions"]} \
        if who in commits else set()  # noqa: E731
    yield "B's session expired while it was stopped (a generation without B)", \
        any(f.members_of(g) == ["A"] for g in f.generations())
    yield "A's commit with its previous generation was refused ILLEGAL_GENERATION (R9)", \
        error("A") == {"ILLEGAL_GENERATION"}
    yield "the expired B's commit was refused UNKNOWN_MEMBER_ID (R9)", error("B") == {"UNKNOWN_MEMBER_ID"}
    rejoin = [r for q, r in f.of("JoinGroup", after=after) if q["body"]["member_id"] and f.client(q) == "B"]
    yield "a JoinGroup under the expired B's member id was refused UNKNOWN_MEMBER_ID (R24)", \
        bool(rejoin) and rejoin[0]["body"]["error"] == "UNKNOWN_MEMBER_ID"


@scenario("the broker is killed (kill -9) and restarted while a rebalance waits for a stopped member",
          variants=(COOPERATIVE, EAGER, JAVA_COOPERATIVE))
def broker_restart(run):
    for name in "AB":
        run.start(name, session_ms=10_000)
    run.wait_balanced()
    run.pause("B")  # B will not rejoin: the rebalance C starts stays in PreparingRebalance
    run.mark("join")
    run.start("C", session_ms=10_000)
    run.wait(lambda: [q for q in run.facts().client_requests("JoinGroup", "A") if q["t_ms"] > run.marks["join"]],
             "A to rejoin", 30)
    run.mark("restart")
    run.restart_broker(crash=True)
    run.resume("B")
    run.wait_balanced(timeout=90)


@broker_restart.situation
def _(run, f):
    join, restart = run.marks["join"], run.marks["restart"]
    rejoined = [q for q in f.client_requests("JoinGroup", "A") if join <= q["t_ms"] < restart]
    completed = [t for t, _, _, _ in f.joins(join) if t < restart]
    yield "a rebalance had begun (A rejoined after C joined) and not completed when the broker died", \
        bool(rejoined) and not completed
    yield "the broker restarted (a restart record)", any(r["type"] == "restart" for r in f.other)
    yield "A, B and C formed a generation after it", any(f.members_of(g) == ["A", "B", "C"]
                                                        for g in f.generations(restart))


@scenario("DeleteGroups refused while the group has a member, granted once it is Empty, then the group is gone "
          "and a new member starts it over at generation 1", variants=(COOPERATIVE, JAVA_COOPERATIVE))
def delete_groups(run):
    run.start("A")
    run.wait_balanced()
    run.mark("delete")
    run.answers = [run.delete_group()]
    run.close("A")
    run.answers += [run.delete_group(), run.delete_group()]
    run.mark("again")
    run.start("B")
    run.wait_balanced()


@delete_groups.situation
def _(run, f):
    answers = [r["body"]["results"][0]["error"] for q, r in f.of("DeleteGroups", after=run.marks["delete"])]
    yield "DeleteGroups was answered NON_EMPTY_GROUP, then NONE once A left, then GROUP_ID_NOT_FOUND", \
        answers == ["NON_EMPTY_GROUP", "NONE", "GROUP_ID_NOT_FOUND"]
    yield "B then started the group over at generation 1", f.generations(run.marks["again"]) == [1]


@scenario("a joining member never gets its JoinGroup answer (dropped in the network), so it sends no SyncGroup: "
          "the pending-sync timeout (the rebalance timeout, 3 s) removes it (KAFKA-12890)",
          variants=(JAVA_COOPERATIVE, JAVA_EAGER))
def sync_timeout(run):
    for name in "AB":
        run.start(name, session_ms=10_000, max_poll_ms=3000)
    run.wait_balanced()
    run.mark("join")
    run.start("C", session_ms=10_000, max_poll_ms=3000)
    given = run.wait(lambda: run.facts().first("JoinGroup", "MEMBER_ID_REQUIRED", after=run.marks["join"], client="C"),
                     "C to be given its member id", 30)
    # its JoinGroup under that id is answered only once A and B rejoined: that answer is lost
    run.proxy.inject("JoinGroup", drop=True, member=given[1]["body"]["member_id"], count=1)
    run.wait(lambda: [g for g in run.facts().generations(run.marks["join"])
                      if "C" not in run.facts().members_of(g)] and len(run.facts().generations(run.marks["join"])) >= 2,
             "a generation without C after C's round", 60)
    run.wait_balanced(timeout=90)


@sync_timeout.situation
def _(run, f):
    join = run.marks["join"]
    # the round whose answer to C was dropped: most often C's first, a later one where its JoinGroup under its
    # member.id was answered before the scenario, reading that member.id, had added the rule
    answered = {(r["connection"], r["correlation_id"]): r["body"]["generation_id"]
                for q, r in f.of("JoinGroup", "NONE", after=join) if f.client(q) == "C"}
    lost = [answered.get((r["connection"], r["correlation_id"])) for r in f.other
            if r["type"] == "fault" and r["fault"] == "drop" and r["api"] == "JoinGroup" and r["t_ms"] >= join]
    dropped = lost[0] if lost else None
    yield "C's JoinGroup answer of a round it joined was dropped", dropped is not None and "C" in f.members_of(dropped)
    c_synced = [q for q in f.client_requests("SyncGroup", "C") if q["body"]["generation_id"] == dropped]
    yield "C sent no SyncGroup for that generation", not c_synced
    completed = [r["t_ms"] for q, r in f.of("SyncGroup", "NONE", after=join) if q["body"]["generation_id"] == dropped]
    without_c = [t for t, _, g, _ in f.joins(join) if dropped is not None and g > dropped
                 and "C" not in f.members_of(g)]
    waited = without_c and completed and min(without_c) - max(completed)
    yield "a generation without C followed, about the rebalance timeout (3 s) after the others synced", \
        bool(waited) and 2000 < waited < 9000
