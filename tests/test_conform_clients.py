"""``rebalance conform --side clients``: observed logs (spec/OBSERVED.md) judged
from the applications' callbacks and commits alone (checker/conform/clients.py)."""
import json

import pytest
from click.testing import CliRunner

from rebalance.checker.conform.clients import ObservedError, check
from rebalance.checker.conform.verdict import CONFORMS, DIVERGENT
from rebalance.cli import main

HEADER = {"format": "rebalance-observed", "version": 1, "topics": [{"name": "t", "partitions": 2}]}


def tp(*ps):
    return [{"topic": "t", "partition": p} for p in ps]


def cb(t, member, event, *ps):
    return {"t_ms": t, "member": member, "event": event, "partitions": tp(*ps)}


def commit(t, member, p, outcome="ok", offset=5, **extra):
    return {"t_ms": t, "member": member, "event": "commit",
            "offsets": [{"topic": "t", "partition": p, "offset": offset}], "outcome": outcome, **extra}


def mark(t, member, event):
    return {"t_ms": t, "member": member, "event": event}


# A owns t-0 and t-1; B joins; A revokes t-1 (committing it inside the callback)
# and B is assigned it in the follow-up round (cooperative, two rounds).
HANDOVER = [cb(1000, "A", "assigned", 0, 1), commit(1500, "A", 1), commit(2000, "A", 1, sent_ms=1990),
            cb(2010, "A", "revoked", 1), cb(2500, "B", "assigned", 1), commit(3000, "B", 1, offset=9),
            commit(3000, "A", 0)]

# A is paused past its session timeout; B is given t-0; A resumes and commits
# before it learns it was expelled.
ZOMBIE = [cb(1000, "A", "assigned", 0), mark(2000, "A", "paused"), cb(9000, "B", "assigned", 0),
          commit(9500, "B", 0), mark(12000, "A", "resumed")]


def test_a_cooperative_handover_conforms():
    v = check([HEADER, *HANDOVER])
    assert v.status == CONFORMS and v.records_checked == len(HANDOVER)
    assert v.figures["commits"] == {"ok": 4, "error": 0, "unknown": 0}
    assert v.figures["exclusive_processing"] == []


def test_a_commit_acknowledged_after_the_revocation_is_divergent():
    v = check([HEADER, *HANDOVER, commit(2100, "A", 1)])
    assert v.status == DIVERGENT and v.divergence.rule == "exclusive_ownership"
    assert "A's commit of t-1 was acknowledged ok at 2100 outside its ownership" in v.divergence.reason
    assert v.divergence.line == 9  # the commit's line: sorted by time, named by where it was written


def test_an_asynchronous_commit_sent_while_owning_is_not_judged_outside():
    """Its span reaches back into the interval: the coordinator may have accepted it then."""
    assert check([HEADER, *HANDOVER, commit(2100, "A", 1, sent_ms=2005)]).status == CONFORMS


def test_a_fenced_zombie_is_exclusive_processing_only():
    v = check([HEADER, *ZOMBIE, commit(12050, "A", 0, outcome="error", error="UNKNOWN_MEMBER_ID"),
               cb(12100, "A", "lost", 0)])
    assert v.status == CONFORMS
    (overlap,) = v.figures["exclusive_processing"]
    assert overlap == {"partition": "t-0", "members": ["A", "B"], "from_ms": 9000, "to_ms": 12100, "paused": ["A"],
                       "replaced": []}


@pytest.mark.spec("R28")
def test_a_replaced_static_member_is_a_zombie_until_fenced():
    """A second process A2 with A's group.instance.id takes A's place and partitions
    (replaceStaticMember); A keeps them until its next Heartbeat is answered
    FENCED_INSTANCE_ID (R28): reported as replaced, not divergent. Two processes with
    different instance ids, or a newer one overlapped by a later assignment to the
    older, are double ownership nothing explains."""
    def static(t, member, event, iid="static-A"):
        return {**cb(t, member, event, 0), "group_instance_id": iid}
    log = [static(1000, "A", "assigned"), static(5000, "A2", "assigned"), mark(5200, "A", "killed")]
    v = check([HEADER, *log])
    assert v.status == CONFORMS
    assert [(o["members"], o["replaced"]) for o in v.figures["exclusive_processing"]] == [(["A", "A2"], ["A"])]
    other = [static(1000, "A", "assigned"), static(5000, "A2", "assigned", "static-B"), mark(5200, "A", "killed")]
    assert check([HEADER, *other]).divergence.rule == "exclusive_processing"
    dynamic = [cb(1000, "A", "assigned", 0), cb(5000, "A2", "assigned", 0), mark(5200, "A", "killed")]
    assert check([HEADER, *dynamic]).divergence.rule == "exclusive_processing"


def test_an_unfenced_zombie_commit_is_divergent():
    v = check([HEADER, *ZOMBIE, commit(12050, "A", 0), cb(12100, "A", "lost", 0)])
    assert v.status == DIVERGENT and v.divergence.rule == "exclusive_ownership"
    assert "acknowledged ok to both B" in v.divergence.reason and "and A (at 12050)" in v.divergence.reason


def test_an_unknown_outcome_is_never_a_violation():
    assert check([HEADER, *ZOMBIE, commit(12050, "A", 0, outcome="unknown"), cb(12100, "A", "lost", 0)]).status \
        == CONFORMS
    assert check([HEADER, *HANDOVER, commit(2100, "A", 1, outcome="unknown")]).status == CONFORMS


def test_clock_skew_widens_ownership():
    bad = [HEADER, *HANDOVER, commit(2100, "A", 1)]
    assert check(bad, {"skew_ms": 100}).status == CONFORMS
    assert check(bad, {"skew_ms": 50}).status == DIVERGENT


def test_killed_and_closed_end_ownership():
    assert check([HEADER, cb(1, "A", "assigned", 0), mark(5, "A", "killed"), commit(6, "A", 0)]).status == DIVERGENT
    assert check([HEADER, cb(1, "A", "assigned", 0), mark(5, "A", "closed"), commit(6, "A", 0)]).status == DIVERGENT


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_several_files_are_one_log(tmp_path):
    a = write(tmp_path / "a.jsonl", [HEADER, *[r for r in ZOMBIE if r["member"] == "A"], commit(12050, "A", 0)])
    b = write(tmp_path / "b.jsonl", [HEADER, *[r for r in ZOMBIE if r["member"] == "B"]])
    v = check([a, b])
    assert v.status == DIVERGENT and f"{a}:5" in v.divergence.reason


@pytest.mark.parametrize("lines, problem", [
    ([], "a.jsonl:1: empty log"),
    ([json.dumps({**HEADER, "version": 2})], "a.jsonl:1: header record at version: 1 was expected"),
    ([json.dumps(HEADER), '{"t_ms": 1, "member": "A", "event": "assigned", "partitions": [{"topic": "t"}]}'],
     "a.jsonl:2: callback record at partitions/0: 'partition' is a required property"),
    ([json.dumps(HEADER), json.dumps(cb(1, "A", "assigned", 7))], "a.jsonl:2: t-7 is not a partition the header"),
    ([json.dumps(HEADER), json.dumps(cb(1, "A", "joined", 0))], "a.jsonl:2: not a record: 'event'"),
    ([json.dumps(HEADER), json.dumps(commit(5, "A", 0, sent_ms=9))], "a.jsonl:2: sent_ms 9 is after t_ms 5"),
    ([json.dumps(HEADER), '{"t_ms": 1, "member": "A", "ev'], "a.jsonl:2: not JSON"),
])
def test_malformed_logs_name_file_and_line(tmp_path, lines, problem):
    path = tmp_path / "a.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(ObservedError) as e:
        check(str(path))
    assert str(e.value).startswith(f"{tmp_path}/{problem}")
    result = CliRunner().invoke(main, ["conform", "--side", "clients", str(path)])
    assert result.exit_code == 2 and problem in " ".join(result.output.split())
    result = CliRunner().invoke(main, ["conform", "--side", "clients", str(path), "--json"])
    assert result.exit_code == 2 and problem in json.loads(result.stdout)["error"]["message"]


def test_the_command_exits_by_verdict(tmp_path):
    good = write(tmp_path / "good.jsonl", [HEADER, *HANDOVER])
    bad = write(tmp_path / "bad.jsonl", [HEADER, *HANDOVER, commit(2100, "A", 1)])
    runner = CliRunner()
    assert runner.invoke(main, ["conform", "--side", "clients", good]).exit_code == 0
    result = runner.invoke(main, ["conform", "--side", "clients", bad, "--json"])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["verdict"] == "divergent" and out["divergence"]["rule"] == "exclusive_ownership"


@pytest.mark.spec("R15")
def test_an_overlap_after_the_resume_is_divergent():
    # issue 43: A resumed, reported t-0 lost, and was given it again while B still owned it. The overlap while
    # A was paused is a zombie's (figures); the one after the resume is double ownership no pause explains
    log = [*ZOMBIE, cb(12100, "A", "lost", 0), cb(20000, "A", "assigned", 0), cb(21000, "B", "revoked", 0)]
    v = check([HEADER, *log])
    assert v.status == DIVERGENT and v.divergence.rule == "exclusive_processing"
    assert [(o["from_ms"], o["to_ms"], o["paused"]) for o in v.figures["exclusive_processing"]] == \
        [(9000, 12100, ["A"]), (20000, 21000, [])]
    assert "t-0 owned by both B and A from 20000 to 21000, neither paused" in v.divergence.reason
    assert v.divergence.record["t_ms"] == 20000 and v.divergences == (v.divergence,)
    # a pause that ended before the overlap began does not explain it, one that meets it does
    assert check([HEADER, *log[:-3], cb(12100, "A", "lost", 0), cb(20000, "A", "assigned", 0),
                  mark(20500, "B", "paused"), cb(21000, "B", "revoked", 0)]).status == CONFORMS


@pytest.mark.spec("R15")
def test_a_resumed_zombie_is_one_until_told():
    """Kafka 4.4.0, the Java consumer (static, cooperative-sticky): the rebalance that gave B's
    t-0 to C completed 12 ms after B resumed, and B learned it had lost t-0 5 ms later, at its
    first response. A zombie owns until told, not until resumed."""
    log = [cb(1000, "B", "assigned", 0), mark(2000, "B", "paused"), mark(9000, "B", "resumed"),
           cb(9012, "C", "assigned", 0)]
    v = check([HEADER, *log, cb(9017, "B", "lost", 0)])
    assert v.status == CONFORMS
    assert [(o["from_ms"], o["to_ms"], o["paused"]) for o in v.figures["exclusive_processing"]] == \
        [(9012, 9017, ["B"])]
    # told something else first (a callback that keeps t-0), B owns t-0 as a member, not a zombie
    v = check([HEADER, *log, cb(9015, "B", "assigned", 1), cb(9030, "B", "lost", 0, 1)])
    assert v.status == DIVERGENT and v.divergence.rule == "exclusive_processing"
    # never told (owning on to the end of the log), nor paused while owning, it is no zombie either
    assert check([HEADER, *log]).status == DIVERGENT
    assert check([HEADER, mark(500, "B", "paused"), mark(900, "B", "resumed"), cb(1000, "B", "assigned", 0),
                  cb(1010, "C", "assigned", 0), cb(1020, "B", "lost", 0)]).status == DIVERGENT


def test_every_divergence_is_reported_in_time_order():
    v = check([HEADER, *HANDOVER, commit(2100, "A", 1), commit(2200, "A", 1)])
    assert v.status == DIVERGENT and [d.record["t_ms"] for d in v.divergences] == [2100, 2200]
    assert v.divergence == v.divergences[0]
