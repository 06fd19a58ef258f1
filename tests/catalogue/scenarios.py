"""The scenario catalogue: group situations played by real clients on the real Kafka
4.4.0 broker and on ``rebalance serve`` alike (runner.py), each with the claims that
show, from the recorded trace, that it reached what it is about.

Times: agents use session.timeout.ms 4 s (runner.SESSION_MS) and heartbeat 300 ms
unless a scenario says otherwise; the brokers' group.min.session.timeout.ms is 100 and
group.initial.rebalance.delay.ms 0 unless ``settings`` says otherwise.
"""
from __future__ import annotations

from .runner import Variant, scenario

COOPERATIVE = Variant("confluent", "cooperative-sticky")
EAGER = Variant("confluent", "range")
STATIC = Variant("confluent", "cooperative-sticky", static=True)
STATIC_EAGER = Variant("confluent", "range", static=True)


@scenario("two members join, one leaves with LeaveGroup, then the other", variants=(COOPERATIVE, EAGER))
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


@scenario("a fourth member joins a Stable group of three", variants=(COOPERATIVE, EAGER))
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


@scenario("two of four members leave with LeaveGroup", variants=(COOPERATIVE, EAGER))
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
          variants=(COOPERATIVE, EAGER))
def session_timeout(run):
    for name in "ABC":
        run.start(name)
    run.wait_balanced()
    run.mark("pause")
    run.pause("C")
    run.wait_balanced(["A", "B"], timeout=30)
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


@scenario("a member stopped (SIGSTOP) during a rebalance misses the rebalance timeout "
          "(max.poll.interval.ms 3 s, session 10 s)", variants=(COOPERATIVE, EAGER, STATIC))
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
