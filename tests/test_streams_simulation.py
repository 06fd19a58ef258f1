"""Kafka Streams with restore times (checker/streams_simulation.py, issue 16 item 5):
the seed 001 situations over Streams eager, cooperative without learners and the
seed's learners, each run the model's handlers on a virtual clock; the
`rebalance simulate --streams` campaign on real Spark local mode; and the docs
table, reproduced by its own command (slow)."""
import csv
import json
import random
import re
from pathlib import Path

import pytest

from conftest import run_cli
from rebalance.checker.properties import imbalance
from rebalance.checker.simulation import Timing
from rebalance.checker.streams_simulation import (
    DEFAULT_RESTORE_MS, ROW_FIELDS, StreamsSimulation, config, run, run_one, script, simulate,
)

PAGE = Path(__file__).resolve().parent.parent / "docs" / "explanation" / "streams.md"  # moved from README.md


def _runs(situation, members=3, tasks=6, seed="7", **kw):
    out = {}
    for variant in ("eager", "cooperative", "learners"):
        rng = random.Random(seed)
        out[variant] = simulate(variant, members, tasks, script(situation, rng, members), rng, **kw)
    return out


@pytest.mark.parametrize("situation", ["scale_up", "scale_down", "host_swap"])
def test_learners_keep_tasks_available_and_pay_in_double_processing_and_rebalances(situation):
    runs = _runs(situation)
    eager, coop, learners = runs["eager"], runs["cooperative"], runs["learners"]
    assert not any(m.censored for m in runs.values())
    # a task moved without a learner is down for its restore (600 ticks on average): the learner's restore
    # runs beside the active, so only the moment of the move is lost
    assert eager.unavailable_ticks > coop.unavailable_ticks > 10 * learners.unavailable_ticks
    assert eager.double_ticks == coop.double_ticks == 0 < learners.double_ticks
    assert learners.rebalances > coop.rebalances  # the seed's trade-off: "many more rebalances"


def test_a_run_is_a_function_of_its_spec():
    spec = (4, "host_swap", "learners", 3, 6, 1)
    assert run_one(spec) == run_one(spec)
    assert run_one(spec) != run_one((5, *spec[1:]))  # another run draws other times
    row = dict(zip(ROW_FIELDS, run_one(spec)))
    assert row["variant"] == "learners" and row["tasks"] == 6 and not row["censored"]


def test_restore_time_is_what_an_unlearned_move_costs():
    # cooperative scale-up 3 -> 4 with 6 tasks: one task moves, and is down while its new owner restores it
    short, long = (_runs("scale_up", restore_ms=ms)["cooperative"] for ms in (10_000, 100_000))
    assert 50 <= short.unavailable_ticks <= 200 and 500 <= long.unavailable_ticks <= 1_600


def test_a_learner_promoted_before_it_is_ready_is_caught_as_lost_availability():
    # promote-unready-learner (R48): a task moves to a learner still restoring, so it is down until the
    # restore ends; the correct assignor waits for LearnerReady (R55)
    rng = random.Random("1:x")
    steps = script("host_swap", rng, 3)
    good = simulate("learners", 3, 6, steps, random.Random("1:x"))
    bad = simulate("learners", 3, 6, steps, random.Random("1:x"), mutations=frozenset({"promote-unready-learner"}))
    assert good.unavailable_ticks < 400 < 2_000 < bad.unavailable_ticks


@pytest.mark.spec("R60")
@pytest.mark.parametrize("situation", ["scale_up", "scale_down"])
def test_kip441_warmups_keep_tasks_available_and_a_probing_rebalance_settles_the_run(situation):
    # KIP-441: the warmup restores while the owner processes and sends no JoinGroup; the probing rebalance
    # (its ScheduledRebalanceTimeout, 60 s = 2 model ticks) moves the task once it is caught up, and the run
    # is quiet (no member left with a probing rebalance pending). active-to-lagging-client (R58) moves the
    # task to the unrestored member at once: it is down for its restore (~600 ticks)
    steps = script(situation, random.Random("7"), 3)
    coop = simulate("cooperative", 3, 6, steps, random.Random("7"))
    ha = simulate("high-availability", 3, 6, steps, random.Random("7"))
    lagging = simulate("high-availability", 3, 6, steps, random.Random("7"),
                       mutations=frozenset({"active-to-lagging-client"}))
    assert not ha.censored and not lagging.censored
    assert 10 * ha.unavailable_ticks < coop.unavailable_ticks and ha.double_ticks > 0 == lagging.double_ticks
    assert lagging.unavailable_ticks > 10 * ha.unavailable_ticks
    assert ha.rebalances > lagging.rebalances  # the probing rebalance after the warmup is ready
    spec = (3, situation, "high-availability", 3, 6, 1)
    assert run_one(spec) == run_one(spec)


@pytest.mark.spec("R52")
def test_after_a_leader_crash_during_scaling_the_load_can_stay_skewed():
    # seed 001, Leader Transfer During Scaling: the new leader remembers no round, so nobody is a new-comer
    # (R50, R52) and no learner evens the loads out; the run never settles and is censored
    rng = random.Random("1:3")
    steps = script("leader_crash", rng, 3)
    cfg = config("learners", 6)
    sim = StreamsSimulation(cfg, 3, Timing(), rng, DEFAULT_RESTORE_MS, random.Random(rng.random()))
    m = run(sim, steps, 600_000, 600_000)
    assert m.censored and sim._unavailable == 0
    loads = sorted(c.owned.bit_count() for c in sim.consumers.values())
    assert loads == [1, 2, 3] and imbalance(cfg, sim.group.phase, list(sim.consumers.values())) is not None
    rng = random.Random("1:3")
    assert not simulate("cooperative", 3, 6, script("leader_crash", rng, 3), rng).censored


@pytest.mark.slow  # about 36 s: the default suite stays under 20 minutes
def test_simulate_streams_writes_its_table(tmp_path):
    out = tmp_path / "streams"
    code, stdout, stderr = run_cli("simulate", "--streams", "--out", out, "--runs", "20", "--sizes", "3x6",
                                   "--horizon-ms", "300000", "--json", cwd=tmp_path)
    assert code == 0, stderr
    table = {(r["situation"], r["variant"]): r for r in json.loads(stdout)["table"]}
    assert len(table) == 4 * 5
    for situation in ("scale_up", "scale_down", "host_swap"):
        eager, coop, learners, ha = (table[situation, v]
                                     for v in ("eager", "cooperative", "learners", "high-availability"))
        assert min(eager["unavailable_ticks"], coop["unavailable_ticks"]) > max(learners["unavailable_ticks"],
                                                                                ha["unavailable_ticks"])
        assert learners["double_ticks"] > 0 == coop["double_ticks"] and ha["double_ticks"] > 0
    with open(out / "table.csv") as f:
        assert set(csv.DictReader(f).fieldnames) >= {"variant", "tasks", "double_ticks", "censored_share"}
    assert "| members × tasks | variant |" in (out / "table.md").read_text()
    assert (out / "double_ticks.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args,message", [
    (("--streams", "--variants", "eager,lazy"), "unknown variant 'lazy'"),
    (("--streams", "--situations", "scale_up,meteor_strike"), "unknown Streams situation 'meteor_strike'"),
    (("--streams", "--restore-ms", "0"), "--restore-ms must be positive"),
    (("--streams", "--restore-ms", "-5"), "--restore-ms must be positive"),
    (("--streams", "--sizes", "3x2"), "tasks at least the members"),
    (("--streams", "--protocols", "eager"), "--protocols does not apply with --streams"),
    (("--restore-ms", "1000"), "--restore-ms applies only with --streams"),
    (("--variants", "learners"), "--variants applies only with --streams"),
])
def test_bad_streams_input_exits_2_naming_the_problem(tmp_path, args, message):
    code, _, err = run_cli("simulate", "--out", tmp_path / "r", *args, cwd=tmp_path)
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_the_readme_streams_table_is_what_its_command_prints(tmp_path):
    text = PAGE.read_text()
    section = text[text.index("## Restore times: Streams eager, cooperative and learners"):]
    section = section.split("\n## ", 1)[0]
    command = re.search(r"\.venv/bin/rebalance (simulate --streams [^`\n]+)", section).group(1).split()
    out = tmp_path / "streams"
    code, _, stderr = run_cli(*[str(out) if a == "results/streams" else a for a in command], cwd=tmp_path)
    assert code == 0, stderr
    printed, situation = {}, None
    for line in (out / "table.md").read_text().splitlines():
        if line.startswith("## "):
            situation = line[3:]
        elif line.startswith("| 10 × 40 |"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            printed[situation, cells[1]] = cells[2:]
    shown = {}
    for line in re.findall(r"^\| (?:scale up|scale down|host swap|leader crash) \|.*$", section, re.M):
        cells = [c.strip() for c in line.strip("|").split("|")]
        shown[cells[0], cells[1]] = cells[2:]
    assert len(printed) == 20 and shown == printed
