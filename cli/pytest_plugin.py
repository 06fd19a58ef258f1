"""The pytest plugin shipped with rebalance (entry point ``pytest11``: installed with
the package, loaded by every pytest run in that environment).

* ``kafka_cluster``: ``rebalance serve`` (``rebalance.testing.Cluster``) for one test;
  ``kafka_broker``: the real Apache Kafka 4.4.0 (``rebalance.testing.KafkaBroker``) for a
  module, so the same test can run against both.
* ``rebalance_check``: a fixture running the real ``rebalance check ... --json`` in a
  temporary directory; ``rebalance_check(*args) -> (exit code, summary dict)`` (the
  summary is ``check --json``'s object; counterexamples go to ``<tmp>/out``).
* ``pytest --rebalance CONFIG.toml`` (repeatable; a shipped example's name such as
  ``default`` works too): each applicable property of the configuration becomes one
  test item, ``CONFIG.toml::<property>``. The check runs once per configuration, at
  the first item, as ``rebalance check CONFIG --continue --json --out <rootdir>/out/<config>``
  plus ``--rebalance-args`` (e.g. ``"--max-seconds 600"``); an item fails when its
  property is violated and not expected violated, showing the counterexample's steps
  and files (SVG, HTML report, JSON), and is skipped when the check stopped before
  deciding it (exit 3). ``--rebalance-require-covers`` adds one item, ``covers``,
  failing when a cover is not reached.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rebalance import examples
from rebalance.checker import junit
from rebalance.model.config import ConfigError


def command() -> list[str]:
    """The ``rebalance`` executable of this environment (beside the running Python,
    else on PATH), as an argv prefix."""
    here = Path(sys.executable).parent / "rebalance"
    return [str(here) if here.exists() else shutil.which("rebalance") or "rebalance"]


def run_check(args, cwd, out_dir) -> tuple[int, dict]:
    """Run ``rebalance check *args --json --out out_dir`` in ``cwd``; returns (exit
    code, summary). Raises AssertionError with stderr when it printed no JSON."""
    p = subprocess.run([*command(), "check", *map(str, args), "--json", "--out", str(out_dir)],
                       capture_output=True, text=True, cwd=cwd, env={**os.environ, "COLUMNS": "200"})
    assert p.stdout, f"rebalance check printed nothing (exit {p.returncode}): {p.stderr}"
    return p.returncode, json.loads(p.stdout)


@pytest.fixture
def rebalance_check(tmp_path):
    """Run the real ``rebalance check ARGS... --json --out <tmp>/out`` with the
    temporary directory as working directory: ``rebalance_check(*args) -> (exit code,
    summary)``; exit codes 0 holds, 1 violated, 2 bad input, 3 incomplete."""
    def go(*args):
        return run_check(args, tmp_path, tmp_path / "out")
    return go


def pytest_addoption(parser):
    group = parser.getgroup("rebalance", "rebalance model checking (rebalance check)")
    group.addoption("--rebalance", action="append", default=[], metavar="CONFIG",
                    help="Model-check this configuration (a TOML file or a shipped example's name); one test "
                         "item per property. Repeatable.")
    group.addoption("--rebalance-args", default="", metavar="ARGS",
                    help="More `rebalance check` options for --rebalance, e.g. \"--max-seconds 600\".")
    group.addoption("--rebalance-require-covers", action="store_true",
                    help="With --rebalance: one more item per configuration, failing when a cover is not reached.")


def _config_path(name: str) -> Path:
    path = Path(name)
    return path.resolve() if path.exists() else examples.path(name)


CONFIGS = pytest.StashKey[frozenset]()  # the resolved --rebalance paths


class CheckRun:
    """One configuration's ``rebalance check`` run, made at most once, when the first
    of its items runs."""

    def __init__(self, path: Path, extra: list[str], out_dir: Path):
        self.path, self.extra, self.out_dir = path, extra, out_dir
        self._result = None

    def result(self) -> tuple[int, dict]:
        if self._result is None:
            self._result = run_check([self.path, *self.extra], self.path.parent, self.out_dir)
        return self._result


def property_names(path: Path, extra: list[str]) -> list[str]:
    """The properties ``rebalance check path *extra`` checks, read from the summary of
    the same command stopped at its first state (``--max-states 1``: no exploration),
    so options that change them (--static, --protocol deferred) count. Raises
    ConfigError with the command's message on bad input (exit 2)."""
    with tempfile.TemporaryDirectory() as tmp:
        code, summary = run_check([path, *extra, "--max-states", "1"], tmp, Path(tmp) / "out")
    if code == 2:
        raise ConfigError(summary["error"]["message"])
    return [p["name"] for p in summary["properties"]]


class PropertyItem(pytest.Item):
    """One property of a ``--rebalance`` configuration."""

    def __init__(self, *, run: CheckRun, **kwargs):
        super().__init__(**kwargs)
        self.run = run

    def runtest(self):
        code, summary = self.run.result()
        if code == 2:
            raise PropertyFailed(f"bad input: {summary['error']['message']}")
        case = next(c for c in junit.check_cases(summary) if c["name"] == self.name)
        if case["outcome"] == "skipped":
            pytest.skip(case["message"])
        if case["outcome"] == "failed":
            raise PropertyFailed(case["message"] + ("\n" + case["text"] if case["text"] else ""))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, PropertyFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.run.path.name}::{self.name}"


class PropertyFailed(Exception):
    """A property violated (its counterexample in the message), or the check's bad input."""


class ConfigFile(pytest.File):
    """The items of one ``--rebalance`` configuration: one per property (and
    ``covers`` with --rebalance-require-covers)."""

    def collect(self):
        opt = self.config.option
        extra = shlex.split(opt.rebalance_args) + (["--require-covers"] if opt.rebalance_require_covers else [])
        out_dir = Path(self.config.rootpath) / "out" / self.path.stem
        run = CheckRun(self.path, ["--continue", *extra], out_dir)  # every property decided
        try:
            names = property_names(self.path, shlex.split(opt.rebalance_args))
        except ConfigError as e:
            raise self.CollectError(f"--rebalance {self.path}: {e}") from None
        for name in names + (["covers"] if opt.rebalance_require_covers else []):
            yield PropertyItem.from_parent(self, name=name, run=run)


@pytest.fixture
def kafka_cluster(request, tmp_path):
    """A running ``rebalance.testing.Cluster`` (its trace in the test's tmp_path)."""
    from rebalance.testing import Cluster

    mark = request.node.get_closest_marker("kafka_cluster")
    options = dict(mark.kwargs) if mark else {}
    options.setdefault("directory", tmp_path)
    with Cluster(**options) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kafka_broker(request):
    """A real Apache Kafka 4.4.0 broker (``rebalance.testing.KafkaBroker``) shared by a
    test module: give each test its own group and topic names. Broker properties come
    from the module's ``kafka_broker(**settings)`` mark, e.g. ``pytestmark =
    pytest.mark.kafka_broker(**{"group.initial.rebalance.delay.ms": 3000})``."""
    from rebalance.oracle.broker import KafkaBroker

    mark = request.node.get_closest_marker("kafka_broker")
    with KafkaBroker(dict(mark.kwargs) if mark else None) as broker:
        yield broker


def pytest_configure(config):
    """Register the ``kafka_cluster`` mark; resolve the ``--rebalance`` configurations
    and add them to what is collected."""
    config.addinivalue_line("markers", "kafka_cluster(**options): options of the kafka_cluster fixture "
                                       "(rebalance.testing.Cluster's: topics, initial_delay_ms, subprocess, ...)")
    config.addinivalue_line("markers", "kafka_broker(**settings): broker properties of the module's kafka_broker "
                                       "fixture (a real Kafka 4.4.0)")
    paths = []
    for name in config.option.rebalance:
        try:
            paths.append(_config_path(name))
        except ConfigError as e:  # not a file, and no shipped example of that name
            raise pytest.UsageError(f"--rebalance {name}: {e}") from None
    config.stash[CONFIGS] = frozenset(paths)
    config.args = [*config.args, *(str(p) for p in paths if str(p) not in config.args)]


def pytest_collect_file(file_path, parent):
    if file_path.resolve() in parent.config.stash.get(CONFIGS, ()):
        try:
            file_path.relative_to(parent.config.rootpath)
        except ValueError:  # a shipped example, outside the project: named by its file name
            return ConfigFile.from_parent(parent, path=file_path, nodeid=file_path.name)
        return ConfigFile.from_parent(parent, path=file_path)
