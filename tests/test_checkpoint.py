"""Checkpoint and resume (issue 44 item 4; checker/engines/checkpoint.py): a run
killed (a real SIGKILL) at a level boundary, in the middle of a level or while
writing a checkpoint, then resumed with ``--resume``, gives the counts, verdict
and counterexamples of a run that never stopped; a missing, corrupt or
mismatched checkpoint is refused (exit 2) naming the problem."""
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from array import array

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import REBALANCE

from rebalance.checker.engines.checkpoint import MANIFEST, Checkpoint, run_key
from rebalance.checker.engines.explore import _Store, explore
from rebalance.checker.engines.interning import Interner
from rebalance.checker.properties import applicable, applicable_covers
from rebalance.checker.settings import resolve
from rebalance.cli import main
from rebalance.model.config import ConfigError
from rebalance.progress import Reporter

# -- in process: resumed after a limit, both ways of keeping paths ------------------------------------


def _setup(liveness: bool, **options):
    settings = resolve({}, **options)
    system = settings.system()
    props = [p for p in applicable(system) if liveness or p.kind != "liveness"]
    stop_on = frozenset() if settings.keep_going else frozenset(  # as cli.check's
        p.name for p in props if p.name not in settings.expect_violated and not p.lasso)
    return system, props, dict(stop_on=stop_on, covers=applicable_covers(system))


def _outcome(r) -> tuple:
    return (r.distinct_states, r.transitions, r.max_depth, r.statuses, r.actions_fired, r.covers, r.limit,
            [(v.property, v.reason, v.path, v.loop_start) for v in r.violations])


@pytest.mark.parametrize("liveness", [True, False], ids=["graph", "parent-links"])
def test_a_run_stopped_by_a_limit_resumes_to_the_uninterrupted_result(tmp_path, liveness):
    """With liveness properties the paths are read off the spilled graph (kept in
    the checkpoint's directory); without, off the parent links (kept as arrays)."""
    system, props, kw = _setup(liveness, members=2, partitions=2, budget=1,
                               mutations=("assign-before-revoke",), keep_going=True)
    whole = explore(system, props, **kw)
    assert whole.violations and whole.max_depth > 10  # something to carry over a resume
    cut = explore(system, props, max_states=whole.distinct_states // 2, **kw,
                  checkpoint=Checkpoint(tmp_path))  # the level the limit stops at only (not due before)
    assert cut.limit and cut.distinct_states < whole.distinct_states
    for _ in range(2):  # cut short, then complete: a complete checkpoint resumes to the same result again
        resumed = explore(system, props, **kw, checkpoint=Checkpoint(tmp_path, resume=True))
        assert _outcome(resumed) == _outcome(whole)


def test_a_widened_column_goes_to_a_new_file_and_a_kill_before_the_manifest_keeps_the_old(tmp_path):
    """Ids past 65,535 widen the store's columns to int32: the checkpoint writes the
    widened column whole to a new file, so the manifest before it still reads."""
    store, interner = _Store((0, 0, 2)), Interner()
    store.extend(np.array([[1, 1, 2], [2, 1, 1]]), np.array([0, 0]), np.array([0, 1]))
    ck = Checkpoint(tmp_path)
    ck.bind({"k": 1})
    ck.save(store, None, interner, lo=1, hi=3, depth=1, transitions=2, kinds={}, violations=[], reached=[])
    store.extend(np.array([[70_000, 1, 0]]), np.array([1]), np.array([0]))
    assert store.columns[0].typecode == "i"
    real_replace = os.replace

    def killed(*args):
        raise KeyboardInterrupt  # as a kill between the files and the manifest
    os.replace = killed
    try:
        with pytest.raises(KeyboardInterrupt):
            ck.save(store, None, interner, lo=3, hi=4, depth=2, transitions=3, kinds={}, violations=[], reached=[])
    finally:
        os.replace = real_replace
    assert (tmp_path / "column0.i").exists() and (tmp_path / "column0.H").exists()
    old = Checkpoint(tmp_path, resume=True)
    fresh = _Store((0, 0, 2))
    old.restore(fresh, None, Interner())
    assert [fresh.row(i) for i in range(len(fresh))] == [(0, 0, 2), (1, 1, 2), (2, 1, 1)]
    ck.save(store, None, interner, lo=3, hi=4, depth=2, transitions=3, kinds={}, violations=[], reached=[])
    assert not (tmp_path / "column0.H").exists()
    fresh = _Store((0, 0, 2))
    Checkpoint(tmp_path, resume=True).restore(fresh, None, Interner())
    assert fresh.row(3) == (70_000, 1, 0) and fresh.columns[0].typecode == "i"


def test_progress_lines_name_the_last_checkpoint(tmp_path):
    ck = Checkpoint(tmp_path)
    reporter = Reporter(console=None, checkpoint=ck)
    reporter.figures = (10, 20, 3, 4)
    assert "checkpoint" not in reporter._text(time.perf_counter())
    ck.last = (4, 10, 0.01, time.perf_counter() - 3)
    assert ", checkpoint at depth 4 (10 states) written 3 s ago in 0.01 s" in reporter._text(time.perf_counter())


# -- bad input: missing, corrupt, of another run -------------------------------------------------------

ARGS = ["check", "--members", "2", "--partitions", "2", "--max-faults", "1"]


def _check(*args):
    result = CliRunner().invoke(main, [*ARGS, *map(str, args)])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A complete checkpoint of ARGS."""
    root = tmp_path_factory.mktemp("written")
    code, out = _check("--checkpoint", root / "ck", "--out", root / "out")
    assert code == 0, out
    return root / "ck"


def _copy(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_a_missing_or_reused_or_conflicting_checkpoint_is_refused(tmp_path, written):
    code, out = _check("--resume", tmp_path / "none")
    assert code == 2 and "no checkpoint there (checkpoint.pkl is missing)" in out
    code, out = _check("--checkpoint", written)
    code, out = _check("--checkpoint-interval", "5")
    assert code == 2 and "--checkpoint-interval needs --checkpoint DIR or --resume DIR" in out
    code, out = _check("--checkpoint", written)
    assert code == 2 and "holds a checkpoint already: continue it with --resume" in out
    code, out = _check("--checkpoint", tmp_path / "a", "--resume", written)
    assert code == 2 and "give it without --checkpoint" in out
    code, out = _check("--checkpoint", tmp_path / "a", "--workers", "2")
    assert code == 2 and "local engine in one process" in out
    (tmp_path / "file").write_text("")
    code, out = _check("--checkpoint", tmp_path / "file")
    assert code == 2, out


@pytest.mark.parametrize("damage, why", [
    (lambda d: (d / MANIFEST).write_bytes(b"garbage"), "checkpoint.pkl: UnpicklingError"),
    (lambda d: (d / "procs").write_bytes((d / "procs").read_bytes()[:100]), "procs holds 100 bytes"),
    (lambda d: (d / "column1.H").unlink(), "column1.H is missing"),
    (lambda d: (d / "graph.dst").write_bytes(bytes([(d / "graph.dst").read_bytes()[0] ^ 1]) +
                                             (d / "graph.dst").read_bytes()[1:]), "graph.dst's first"),
], ids=["manifest", "truncated", "missing", "flipped-bit"])
def test_a_corrupt_checkpoint_is_refused_naming_the_file(tmp_path, written, damage, why):
    ck = _copy(written, tmp_path / "ck")
    damage(ck)
    code, out = _check("--resume", ck)
    assert code == 2 and "the checkpoint is corrupt" in out and why in out, out


def test_a_checkpoint_of_another_configuration_or_version_is_refused_naming_what_differs(tmp_path, written):
    code, out = _check("--resume", written, "--partitions", "3")
    assert code == 2 and "its configuration differs (group configuration topics (('t', 2),) there, " \
                         "(('t', 3),) here)" in out, out
    code, out = _check("--resume", written, "--no-timer-fairness")
    assert code == 2 and "its fairness (--no-timer-fairness) differs" in out, out
    ck = _copy(written, tmp_path / "ck")
    manifest = pickle.loads((ck / MANIFEST).read_bytes())
    manifest["key"]["version"] = "0.0.1"
    (ck / MANIFEST).write_bytes(pickle.dumps(manifest))
    code, out = _check("--resume", ck)
    assert code == 2 and "its rebalance version differs (0.0.1 there, " in out, out
    system, props, kw = _setup(False, members=2, partitions=2, budget=1)  # no liveness properties
    with pytest.raises(ConfigError, match="its properties checked differs; give the options it was started with"):
        Checkpoint(written, resume=True).bind(run_key(system, props, kw["covers"], kw["stop_on"], None))


# -- a real SIGKILL: at a level boundary, in the middle of a level, while writing a checkpoint ---------

# Runs `rebalance check ARGS...` in a subprocess that kills itself with SIGKILL at a chosen point:
# right after the Nth checkpoint (a level boundary), once the level after it has added its transitions
# to the graph's files (in the middle of a level), or with the Nth checkpoint's files appended but its
# manifest not yet replaced (while writing one).
DRIVER = r"""
import os, signal, sys
from rebalance.checker.engines import checkpoint, liveness
from rebalance.cli import main
where, n = sys.argv[1], int(sys.argv[2])
saves = 0
save, extend = checkpoint.Checkpoint.save, liveness.Graph.extend
def die():
    os.kill(os.getpid(), signal.SIGKILL)
def killing_save(self, *args, **kwargs):
    global saves
    saves += 1
    if where == "while-checkpointing" and saves == n:
        checkpoint.os.replace = lambda *a: die()
    save(self, *args, **kwargs)
    if where == "at-level-boundary" and saves == n:
        die()
def killing_extend(self, *args):
    extend(self, *args)
    if where == "mid-level" and saves == n:
        die()
checkpoint.Checkpoint.save, liveness.Graph.extend = killing_save, killing_extend
main(sys.argv[3:])
"""

KILLED = ["--members", "2", "--partitions", "2", "--mutation", "assign-before-revoke", "--continue"]
EVERY_LEVEL = ["--checkpoint-interval", "0"]
VOLATILE = ("seconds", "peak_rss_mb", "counterexample", "counterexamples", "report", "checkpoint")


def _run(args, cwd, driver=None):
    command = [sys.executable, "-c", DRIVER, *driver] if driver else [REBALANCE]
    p = subprocess.run([*command, "check", *map(str, args), "--json"], capture_output=True, text=True, cwd=cwd)
    return p.returncode, (json.loads(p.stdout) if p.stdout else None), p.stderr


def _same_as(whole: tuple, resumed: tuple):
    (code, s, out), (code2, s2, out2) = whole, resumed
    assert code2 == code
    assert {k: v for k, v in s2.items() if k not in VOLATILE} == {k: v for k, v in s.items() if k not in VOLATILE}
    assert [c["property"] for c in s2["counterexamples"]] == [c["property"] for c in s["counterexamples"]]
    for c in s["counterexamples"]:  # each counterexample, step for step
        assert (out2 / f"{c['property']}.json").read_bytes() == (out / f"{c['property']}.json").read_bytes()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    root = tmp_path_factory.mktemp("whole")
    code, s, err = _run([*KILLED, "--out", root / "out"], root)
    assert code == 1 and s["max_depth"] > 40 and len(s["counterexamples"]) >= 2, err
    return code, s, root / "out"


@pytest.mark.slow
@pytest.mark.parametrize("where, n", [("at-level-boundary", 25), ("mid-level", 8),
                                      ("while-checkpointing", 30)])
def test_killed_and_resumed_gives_the_uninterrupted_result(tmp_path, uninterrupted, where, n):
    """A kill at checkpoint 8 comes before the first violation (depth 17), at 25 and
    30 after it: the resumed run finds it, or carries it over, alike."""
    ck = tmp_path / "ck"
    code, s, err = _run([*KILLED, "--checkpoint", ck, *EVERY_LEVEL, "--out", tmp_path / "o1"], tmp_path,
                        (where, str(n)))
    assert code == -signal.SIGKILL and s is None, err
    manifest = pickle.loads((ck / MANIFEST).read_bytes())
    assert manifest["depth"] == (n - 1 if where == "while-checkpointing" else n)
    if where != "at-level-boundary":  # the killed run wrote past its last checkpoint
        assert (ck / "graph.dst").stat().st_size > manifest["files"]["graph.dst"][0]
    code, s, err = _run([*KILLED, "--resume", ck, *EVERY_LEVEL, "--out", tmp_path / "o2"], tmp_path)
    assert f"resuming from {ck}: the checkpoint at depth {manifest['depth']}" in err
    assert s["checkpoint"]["resumed"] and s["checkpoint"]["depth"] == uninterrupted[1]["max_depth"]
    _same_as(uninterrupted, (code, s, tmp_path / "o2"))


@pytest.mark.slow
def test_killed_from_outside_at_any_moment_and_resumed_gives_the_uninterrupted_result(tmp_path):
    """The parent sends SIGKILL once a checkpoint past depth 10 is on disk, wherever the
    run is then; on a configuration of some 200,000 states, a liveness property's lasso
    among its counterexamples."""
    args = ["--members", "3", "--partitions", "2", "--no-timer-fairness"]
    code, s, err = _run([*args, "--out", tmp_path / "o0"], tmp_path)
    assert code == 1 and "eventual_balance" in [c["property"] for c in s["counterexamples"]], err
    ck = tmp_path / "ck"
    p = subprocess.Popen([REBALANCE, "check", *args, "--checkpoint", str(ck), *EVERY_LEVEL,
                          "--out", str(tmp_path / "o1")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            try:
                if pickle.loads((ck / MANIFEST).read_bytes())["depth"] >= 10:
                    break
            except (OSError, EOFError, pickle.UnpicklingError):
                pass
            time.sleep(0.01)
        assert p.poll() is None, "the run ended before it could be killed"
        p.send_signal(signal.SIGKILL)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == -signal.SIGKILL
    resumed = _run([*args, "--resume", ck, *EVERY_LEVEL, "--out", tmp_path / "o2"], tmp_path)
    _same_as((code, s, tmp_path / "o0"), (*resumed[:2], tmp_path / "o2"))
