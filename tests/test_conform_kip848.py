"""``rebalance conform`` on KIP-848 traces, coordinator side: ``rebalance serve --trace``
records ConsumerGroupHeartbeat and the OffsetCommits of a consumer group (raw kio
clients on real sockets: the sixteen-heartbeat conversation that Kafka 4.4.0 answers
the same, commits, a v0 join named by the coordinator, a session timeout), and conform
replays them through the model's consumer group coordinator. Each rule it judges is seen
to catch a mutation: a response edited in the trace, or the model mutated."""
import json
import time
from pathlib import Path

import pytest

from interop.harness import Server
from rebalance.checker.conform import coordinator
from rebalance.checker.conform.trace import parse, read
from test_serve_kip848 import CONVERSATION, T, beat, commit, conversation
from test_serve import Client

# Wall-clock premises of the recording: the session must outlast every silence the conversation and the
# commits ask of a member that stays (A between its last heartbeat and its commits, B, S1), and serve's
# session timer must fire within SLACK_MS of its deadline. With both cores busy (two `yes` burners beside a
# niced pytest, load 8-11) a 300 ms session ran out there in 2 of 2 runs (silences of 300-675 ms between two
# requests of one client), a 1000 ms session with a 100 ms slack in 2 of 5 (A's session ran out before its
# commits; serve answered a commit after A's deadline plus the slack), 1500 ms and 300 ms in none of 5
SESSION_MS = 1500
SLACK_MS = 300


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The trace and the lines of its responses in order: [(line, what)]."""
    s = Server(tmp_path_factory.mktemp("conform-kip848"), "t:4", initial_delay_ms=0,
               args=("--group-consumer-session-timeout-ms", SESSION_MS, "--group-consumer-heartbeat-interval-ms", 100))
    try:
        whats = [what for what, *_ in CONVERSATION]
        assert conversation(s.port, T, "g") == CONVERSATION
        a = Client(s.port, "a")
        # A (epoch 2) holds t-0, t-1 since epoch 1: its own epoch, an older one (KIP-1251: accepted for
        # those), an older one with t-2 (B's), v8 from a member
        for epoch, version, partitions in ((2, 9, (0,)), (1, 9, (0, 1)), (1, 9, (0, 2)), (2, 8, (0,))):
            commit(a, "g", "A", epoch, version=version, partitions=partitions)
        commits = ["A commits", "A commits at an older epoch", "A commits another's at an older epoch",
                   "A commits with v8"]
        whats += commits
        z = Client(s.port, "z")
        named = beat(z, "g0", "", 0, ["t"], [], version=0, rebalance_ms=30_000)  # the coordinator names it
        beat(z, "g0", named.member_id, named.member_epoch, owned=[0, 1, 2, 3])
        beat(z, "g0", "", 0, ["t"], [], version=1, rebalance_ms=30_000)  # v1: MemberId can't be empty
        beat(z, "g0", "X", 0, ["t"], [], rebalance_ms=30_000, server_assignor="nope")  # UNSUPPORTED_ASSIGNOR
        beat(z, "g0", "Y", 0, ["t"], [], rebalance_ms=30_000, server_assignor="range")  # the group's then (K16)
        whats += ["Z joins unnamed (v0)", "Z heartbeats", "a v1 join without a member id",
                  "a join asking for an assignor Kafka has not", "Y joins asking for the range assignor"]
        time.sleep(2 * SESSION_MS / 1000)  # A, S2 and Z fall silent: their sessions run out
        beat(a, "g", "A", 2)
        whats.append("A heartbeats after its session")
    finally:
        s.stop()
    lines = s.trace.read_text().splitlines()
    responses = [i + 1 for i, text in enumerate(lines) if '"type":"response"' in text]
    assert len(responses) == len(whats)
    line_of = dict(zip(whats, responses))
    assert not any("UNKNOWN_MEMBER_ID" in lines[line_of[what] - 1] for what in commits), \
        f"A's session ({SESSION_MS} ms) ran out before its commits: the machine stalled this test that long"
    return s.trace, line_of


def judge(path_or_lines, *mutations):
    trace = read(path_or_lines) if not isinstance(path_or_lines, list) else parse(path_or_lines)
    return coordinator.check(trace, coordinator.Options(slack_ms=SLACK_MS, mutations=frozenset(mutations)))


def test_serves_kip848_trace_conforms(recorded):
    path, _ = recorded
    verdict = judge(path)
    assert verdict.status == "conforms", verdict.divergence
    assert {"K1", "K2", "K3", "K4", "K5", "K7", "K8", "K10", "K11", "K17"} <= verdict.rules
    assert verdict.records_checked == 2 * len(recorded[1]) - 1  # the describe held at its answer alone


def _edited(path, line: int, edit) -> list:
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[line - 1])
    edit(record["body"])
    lines[line - 1] = json.dumps(record) + "\n"
    return lines


def _set(**fields):
    return lambda body: body.update(fields)


def _commit_error(error):
    def edit(body):
        body["topics"][0]["partitions"][0]["error"] = error
    return edit


# (response, edit, the rule conform names, what the model says there)
EDITS = [
    ("an unknown member", _set(error="NONE", member_epoch=3, member_id="X", assignment=None), "K2",
     "ConsumerGroupHeartbeat UNKNOWN_MEMBER_ID"),
    ("a v1 join without a member id", _set(error="NONE", member_id="z", member_epoch=2, assignment=[]), "K2",
     "ConsumerGroupHeartbeat INVALID_REQUEST"),
    ("A at an epoch ahead", _set(error="NONE", member_id="A", member_epoch=2, assignment=None), "K3",
     "ConsumerGroupHeartbeat FENCED_MEMBER_EPOCH"),
    ("A at its previous epoch", _set(error="FENCED_MEMBER_EPOCH", member_id=None, member_epoch=0), "K3",
     "ConsumerGroupHeartbeat NONE member_epoch 2"),
    ("A heartbeats owning all", _set(member_epoch=2), "K5", "ConsumerGroupHeartbeat NONE member_epoch 1 "
                                                            "assignment [t-0, t-1]"),
    ("B heartbeats", _set(assignment=[{"topic_id": str(T), "topic": "t", "partitions": [0, 1, 2, 3]}]), "K5",
     "ConsumerGroupHeartbeat NONE member_epoch 2 assignment [t-2, t-3]"),
    ("A joins", _set(assignment=None), "K10", "ConsumerGroupHeartbeat NONE member_epoch 1 "
                                              "assignment [t-0, t-1, t-2, t-3]"),
    ("S2 joins as i-s", _set(error="NONE", member_id="S2", member_epoch=3, assignment=[]), "K8",
     "ConsumerGroupHeartbeat UNRELEASED_INSTANCE_ID"),
    ("S1 heartbeats", _set(error="NONE", member_id="S1", member_epoch=3, assignment=None), "K8",
     "ConsumerGroupHeartbeat FENCED_INSTANCE_ID"),
    ("A commits at an older epoch", _commit_error("STALE_MEMBER_EPOCH"), "K11", "OffsetCommit NONE"),
    ("A commits another's at an older epoch", _commit_error("NONE"), "K11", "OffsetCommit STALE_MEMBER_EPOCH"),
    ("A commits with v8", _commit_error("NONE"), "K11", "OffsetCommit UNSUPPORTED_VERSION"),
    ("A heartbeats after its session", _set(error="NONE", member_id="A", member_epoch=2, assignment=None), "K2",
     "ConsumerGroupHeartbeat UNKNOWN_MEMBER_ID"),  # K7: the session timeout fenced A
]


@pytest.mark.parametrize("what, edit, rule, expected", EDITS, ids=[e[0] for e in EDITS])
def test_an_edited_response_diverges_naming_its_rule(recorded, what, edit, rule, expected):
    path, line_of = recorded
    verdict = judge(_edited(path, line_of[what], edit))
    d = verdict.divergence
    assert verdict.status == "divergent" and (d.line, d.rule) == (line_of[what], rule), d
    assert expected in d.expected, d.expected


def test_a_session_the_trace_says_is_longer_diverges(recorded):
    """K7 is what fences A: under a header whose session timeout A's silence did not outlast,
    A's last heartbeat must be answered."""
    path, line_of = recorded
    lines = path.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["settings"]["group_consumer_session_timeout_ms"] = 60_000
    lines[0] = json.dumps(header) + "\n"
    d = judge(lines).divergence
    assert d.line == line_of["A heartbeats after its session"] and "ConsumerGroupHeartbeat NONE member_epoch 4" in \
        d.expected, d


# model mutations (model/mutations.py) the recorded trace tells apart from the model, and the rule named
@pytest.mark.parametrize("mutation, what, rule", [
    ("grant-before-release", "B joins", "K5"),
    ("server-assignor-drops-partition", "A heartbeats owning all", "K5"),
    ("unreleased-as-stable", "B heartbeats", "K10"),
    ("commit-at-member-epoch-only", "A commits at an older epoch", "K11"),
])
def test_the_trace_tells_a_mutated_model_apart(recorded, mutation, what, rule):
    path, line_of = recorded
    d = judge(path, mutation).divergence
    assert d is not None and (d.line, d.rule) == (line_of[what], rule), d


KAFKA_TRACE = Path(__file__).parent / "kafka_traces" / "kip848_conversation.jsonl"


def test_kafkas_epochs_are_the_models_plus_one_and_nothing_else():
    """Kafka 4.4.0 numbers epochs one higher (K-F3): its trace conforms with that one
    difference; with every epoch one higher again, it does not."""
    assert judge(KAFKA_TRACE).status == "conforms"
    lines = KAFKA_TRACE.read_text().splitlines(keepends=True)
    for i, text in enumerate(lines):
        record = json.loads(text)
        if record.get("api") == "ConsumerGroupHeartbeat" and record["body"]["member_epoch"] > 0:
            record["body"]["member_epoch"] += 1
            lines[i] = json.dumps(record) + "\n"
    d = judge(lines).divergence
    assert d is not None and d.rule == "K5" and d.record["body"]["member_epoch"] == 3, d


def test_kafkas_uniform_assignor_serves_members_in_an_order_the_trace_does_not_show(monkeypatch):
    """The Java consumers' lifecycle on Kafka 4.4.0 (kept from test_lifecycle_conforms_on_kafka):
    when C is fenced, Kafka gives its partitions t-2 and t-5 to B and A in the order of its
    member map (a HashMap of member.id strings, UniformHomogeneousAssignmentBuilder), the model
    in member id order; conform searches the orders. Without that search it diverges there."""
    from rebalance.checker.conform import consumer_coordinator

    path = KAFKA_TRACE.with_name("kip848_lifecycle_java.jsonl")
    assert judge(path).status == "conforms"
    monkeypatch.setattr(consumer_coordinator.itertools, "permutations", lambda ids: [tuple(ids)])
    d = judge(path).divergence
    assert d is not None and d.rule == "K5" and d.record["body"]["assignment"][0]["partitions"] == [0, 1, 5], d
