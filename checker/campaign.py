"""Simulation campaigns on Spark (``rebalance simulate``): many seeded runs of
the seeds' situations (checker/situations.py) over protocols, static membership
and group sizes, each run a Simulation of the model's own handlers
(checker/simulation.py), fanned out over Spark (local mode by default).

Run ``i`` of a campaign takes cell ``i mod len(grid)`` of the grid situations ×
sizes × protocols × static, and its randomness from ``random.Random(f"{seed}:{i}")``:
the results depend on (runs, seed, grid) only, not on Spark's partitioning.

Written under the output directory (each file written aside, then renamed):

* ``runs.parquet``: one row per run (``ROW_FIELDS``);
* ``table.csv`` and ``table.md``: per situation, size, protocol and static:
  runs, mean rebalances, mean partitions moved, mean partition-ticks
  unavailable, median ticks to balance, and the runs censored (count and share);
* ``<metric>.png``: a bar chart per metric, one panel per situation.

Every run goes on until its group is quiet (checker/simulation.py) or is cut,
censored, ``horizon_ms`` after its last scripted action. A censored run's
figures are lower bounds, so the table's means and median are over the runs
that reached their verdict only (None, "—" in table.md, when every run of a
cell was censored); censored runs are counted in ``censored`` and
``censored_share`` and keep their figures in runs.parquet, flagged
``censored`` (``ticks_to_balance`` null).
"""
from __future__ import annotations

import csv
import io
import math
import os
import random
import shutil
import statistics
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

from rebalance.model.config import CONSUMER_PROTOCOLS, COOPERATIVE_PROTOCOLS, DEFAULT_ASSIGNOR, ConfigError, GroupConfig

from .files import atomic_write
from .simulation import DEFAULT_HORIZON_MS, Metrics, Timing, simulate
from .situations import SITUATIONS, script

PROTOCOLS = CONSUMER_PROTOCOLS  # the simulated protocols: Streams is not simulated yet (issue 16)

DEFAULT_SIZES = ((3, 12), (10, 100), (30, 300))
MAX_SIZE = (100, 1_000)
ROW_FIELDS = ("run", "situation", "protocol", "static", "members", "partitions", "seed") + Metrics._fields


class Measure(NamedTuple):
    """A table column: the run field ``name``, aggregated by ``how`` ("mean" over the
    runs not censored, rounded to ``digits``; "median"), headed ``title`` in table.md."""

    name: str
    how: str
    digits: int
    title: str


MEASURES = (Measure("rebalances", "mean", 2, "rebalances"), Measure("moved", "mean", 1, "moved"),
            Measure("unavailable_ticks", "mean", 0, "partition-ticks unavailable"),
            Measure("ticks_to_balance", "median", 0, "ticks to balance"))


class Campaign(NamedTuple):
    """What to run: ``runs`` runs seeded by ``seed`` over the grid ``situations`` ×
    ``sizes`` ((members, partitions), ...) × ``protocols`` × ``static`` (False, True);
    ``horizon_ms``: simulated ms after a run's last scripted action at which it
    is cut and censored if its group is not yet quiet."""

    runs: int
    seed: int
    situations: tuple = tuple(SITUATIONS)
    sizes: tuple = DEFAULT_SIZES
    protocols: tuple = PROTOCOLS
    static: tuple = (False, True)
    timing: Timing = Timing()
    horizon_ms: int = DEFAULT_HORIZON_MS
    rejoin_flag: bool = False  # R74: the cooperative protocols' leaders flag a second round owed

    def validate(self) -> None:
        """Raises ConfigError naming the first bad value."""
        if self.timing.scheduled_delay_ms < 0:
            raise ConfigError("--scheduled-rebalance-max-delay-ms must be at least 0, "
                              f"got {self.timing.scheduled_delay_ms}")
        validate_grid(self, "situation", SITUATIONS, MAX_SIZE, "partitions")
        for name in self.protocols:
            if name not in PROTOCOLS:
                raise ConfigError(f"unknown protocol {name!r} (expected one of {', '.join(PROTOCOLS)})")
        if not (self.situations and self.protocols and self.sizes and self.static):
            raise ConfigError("the grid is empty: give at least one situation, protocol, size and static choice")
        check_coverage(self)

    def grid(self) -> list:
        """The cells, one ``(situation, size, protocol, static)`` each."""
        return [(sit, size, proto, static) for sit in self.situations for size in self.sizes
                for proto in self.protocols for static in self.static]

    axes = "situations × sizes × protocols × static"  # what a cell is, for messages

    def specs(self) -> list:
        """One ``(run, situation, protocol, static, members, partitions, seed)`` per run."""
        grid = self.grid()
        return [(i, sit, proto, static, m, p, self.seed) for i in range(self.runs)
                for sit, (m, p), proto, static in [grid[i % len(grid)]]]

    # what run_campaign needs of a campaign (checker/streams_simulation.StreamsCampaign has the same)
    fields = ROW_FIELDS
    keys = ("situation", "members", "partitions", "protocol", "static")  # a table row's cell
    measures = MEASURES
    header = ("members × partitions", "protocol", "static")

    def run(self, spec: tuple) -> tuple:
        return run_one(spec, self.timing, self.horizon_ms, self.rejoin_flag)

    def order(self, row: dict) -> tuple:
        """A table row's place: the order situations, sizes and protocols were given in."""
        return (self.situations.index(row["situation"]), row["members"], row["partitions"],
                self.protocols.index(row["protocol"]), row["static"])

    def cells(self, row: dict) -> tuple:
        """A table.md row's leading cells (``header``)."""
        return (f"{row['members']} × {row['partitions']}", row["protocol"], "yes" if row["static"] else "no")

    def bars(self) -> list:
        """``(label, {key: value})`` per bar of a plot's group."""
        return [(f"{p}{' static' if s else ''}", {"protocol": p, "static": s})
                for p in self.protocols for s in self.static]

    def preamble(self) -> str:
        t = self.timing
        return (f"A tick is {t.tick_ms} ms. session.timeout.ms {t.session_ms}, heartbeat.interval.ms "
                f"{t.heartbeat_ms}, max.poll.interval.ms {t.rebalance_ms}, group.initial.rebalance.delay.ms "
                f"{t.initial_delay_ms}, scheduled.rebalance.max.delay.ms {t.scheduled_delay_ms}, "
                f"latency {t.latency_ms} ms." + (" The cooperative protocols' leaders set the rejoin flag (R74)."
                                                  if self.rejoin_flag else ""))


DEFAULT_RUNS = 1_000  # rounded up to a multiple of the grid's cells (default_runs)


def default_runs(cells: int) -> int:
    """The campaign size when --runs is not given: DEFAULT_RUNS rounded up to a multiple of
    ``cells``, so that every cell of the grid gets as many runs as every other."""
    return cells * math.ceil(DEFAULT_RUNS / cells)


def check_coverage(campaign) -> None:
    """Every cell of the grid gets a run (runs go round the grid): raises ConfigError
    with the smallest --runs that covers it when ``campaign.runs`` is below it."""
    cells = len(campaign.grid())
    if campaign.runs < cells:
        raise ConfigError(f"--runs {campaign.runs} leaves cells without a run: the grid has {cells} cells "
                          f"({campaign.axes}); give --runs {cells} or more")


def interval(values: list, how: str) -> tuple:
    """The 95% interval of a cell's statistic over its sorted ``values`` (the runs not
    censored): for "mean", mean ± 1.96 standard errors; for "median", the distribution-free
    interval between the order statistics n/2 ∓ 0.98·√n (the binomial's normal
    approximation). ``(None, None)`` without values."""
    n = len(values)
    if not n:
        return None, None
    if how == "mean":
        mean = sum(values) / n
        half = 1.96 * statistics.stdev(values) / math.sqrt(n) if n > 1 else 0.0
        return mean - half, mean + half
    return (values[max(0, math.floor(n / 2 - 0.98 * math.sqrt(n)))],
            values[min(n - 1, math.ceil(n / 2 - 1 + 0.98 * math.sqrt(n)))])


def validate_grid(campaign, word: str, situations, max_size: tuple, unit: str) -> None:
    """What every campaign checks (ConfigError naming the first bad value): at
    least one run, a positive horizon, known situations (``word``: how the message
    calls them) and sizes of 2..``max_size[0]`` members and members..``max_size[1]``
    of ``unit``."""
    if campaign.runs < 1:
        raise ConfigError(f"--runs must be at least 1, got {campaign.runs}")
    if campaign.horizon_ms < 1:
        raise ConfigError(f"--horizon-ms must be at least 1, got {campaign.horizon_ms}")
    for name in campaign.situations:
        if name not in situations:
            raise ConfigError(f"unknown {word} {name!r} (expected one of {', '.join(situations)})")
    for members, count in campaign.sizes:
        if not (2 <= members <= max_size[0] and members <= count <= max_size[1]):
            raise ConfigError(f"size {members}x{count}: members must be 2..{max_size[0]} and {unit} "
                              f"at least the members, at most {max_size[1]}")


def run_one(spec: tuple, timing: Timing = Timing(), horizon_ms: int = DEFAULT_HORIZON_MS,
            rejoin_flag: bool = False) -> tuple:
    """One run: the spec's fields followed by its Metrics, in ROW_FIELDS order.
    ``rejoin_flag``: R74 on for the cooperative protocols (eager owes no second round)."""
    run, situation, protocol, static, members, partitions, seed = spec
    rng = random.Random(f"{seed}:{run}")
    cfg = GroupConfig(topics=(("t", partitions),), protocol=protocol,
                      assignor=DEFAULT_ASSIGNOR[protocol], **timing.group_ticks(),
                      rejoin_flag=rejoin_flag and protocol in COOPERATIVE_PROTOCOLS)
    m = simulate(cfg, members, static, script(situation, rng, members), timing, rng, horizon_ms)
    return (run, situation, protocol, static, members, partitions, seed, *m)


def parse_sizes(text: str) -> tuple:
    """``"3x12,10x100"`` -> ((3, 12), (10, 100)). Raises ConfigError."""
    sizes = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        members, sep, partitions = item.partition("x")
        if not sep or not members.isdigit() or not partitions.isdigit():
            raise ConfigError(f"size {item!r}: expected MEMBERSxPARTITIONS, e.g. 10x100")
        sizes.append((int(members), int(partitions)))
    return tuple(sizes)


def _schema(fields):
    from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType
    kinds = {"situation": StringType(), "protocol": StringType(), "variant": StringType(), "static": BooleanType(),
             "censored": BooleanType(), "unavailable_ticks": LongType(), "double_ticks": LongType(),
             "events": LongType()}
    return StructType([StructField(f, kinds.get(f, IntegerType()), f == "ticks_to_balance") for f in fields])


def run_campaign(campaign, out: Path, master: str = "local[*]", progress=None) -> list:
    """Run ``campaign`` (a Campaign, or checker/streams_simulation.StreamsCampaign)
    on Spark and write its outputs under ``out`` (created if missing).
    ``progress(done, total)`` is called as Spark tasks finish. Returns the table
    rows (dicts, as in table.csv). Raises ConfigError for a bad campaign."""
    from pyspark.sql import functions as F

    from .spark_session import session

    campaign.validate()
    out.mkdir(parents=True, exist_ok=True)
    spark = session(master, "rebalance-simulate")
    sc = spark.sparkContext
    specs = campaign.specs()
    slices = min(len(specs), max(4 * sc.defaultParallelism, 32))
    rows = sc.parallelize(specs, slices).map(campaign.run)
    frame = spark.createDataFrame(rows, _schema(campaign.fields))
    staging = Path(tempfile.mkdtemp(prefix=".runs-", dir=out))
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(sc, done, progress), daemon=True) if progress else None
    if watcher:
        watcher.start()
    try:
        frame.orderBy("run").write.parquet(str(staging / "runs.parquet"))
    finally:
        done.set()
        if watcher:
            watcher.join()
    runs = spark.read.parquet(str(staging / "runs.parquet"))
    verdict = lambda name: F.when(~F.col("censored"), F.col(name))  # noqa: E731  (null for a censored run)
    aggregates = [F.round(F.avg(verdict(m.name)), m.digits).alias(m.name) if m.how == "mean"
                  else F.expr(f"percentile({m.name}, 0.5)").alias(m.name)  # null if censored
                  for m in campaign.measures]
    values = [F.sort_array(F.collect_list(verdict(m.name))).alias(f"{m.name}_values") for m in campaign.measures]
    table = (runs.groupBy(*campaign.keys)
             .agg(F.count("*").alias("runs"), *aggregates,
                  F.sum(F.col("censored").cast("int")).alias("censored"),
                  F.round(F.avg(F.col("censored").cast("double")), 3).alias("censored_share"), *values)
             .collect())
    table = sorted((_with_intervals(r.asDict(), campaign.measures) for r in table), key=campaign.order)
    _replace_dir(staging / "runs.parquet", out / "runs.parquet")
    shutil.rmtree(staging, ignore_errors=True)
    columns = (campaign.keys + ("runs",) + tuple(m.name for m in campaign.measures) + ("censored", "censored_share")
               + tuple(f"{m.name}_{end}" for m in campaign.measures for end in ("low", "high")))
    atomic_write(out / "table.csv", _csv(table, columns))
    atomic_write(out / "table.md", _markdown(table, campaign))
    _plots(table, campaign, out)
    return table


def _with_intervals(row: dict, measures) -> dict:
    """A table row with each measure's 95% interval (``<name>_low``, ``<name>_high``,
    ``interval``) in place of the runs' values Spark collected."""
    for m in measures:
        low, high = interval(row.pop(f"{m.name}_values"), m.how)
        row[f"{m.name}_low"], row[f"{m.name}_high"] = (None, None) if low is None else (
            round(low, m.digits), round(high, m.digits))
    return row


def _watch(sc, done: threading.Event, progress) -> None:
    tracker = sc.statusTracker()
    while not done.wait(0.5):
        stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
        stages = [s for s in stages if s is not None]
        if stages:
            s = max(stages, key=lambda s: s.numTasks)
            progress(s.numCompletedTasks, s.numTasks)


def _replace_dir(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(src, dst)


def _csv(table: list, columns: tuple) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, columns, lineterminator="\n")
    w.writeheader()
    w.writerows(table)
    return buf.getvalue()


def _markdown(table: list, campaign) -> str:
    lines = [f"# Simulation campaign: {campaign.runs:,} runs, seed {campaign.seed}", "",
             f"{campaign.preamble()} A run goes on until the group is balanced and quiet, or is "
             f"censored {campaign.horizon_ms:,} ms after its last scripted action. Means, and the median ticks "
             "to balance, are over the runs that were not censored (— if none); censored runs are counted, "
             "their figures (lower bounds) are in runs.parquet.", ""]
    header = campaign.header + ("runs",) + tuple(m.title for m in campaign.measures) + ("censored",)
    for situation in campaign.situations:
        rows = [r for r in table if r["situation"] == situation]
        if not rows:
            continue
        lines += [f"## {situation.replace('_', ' ')}", "", "| " + " | ".join(header) + " |",
                  "|" + "---|" * len(header)]
        for r in rows:
            figures = (_cell(r[m.name], f",.{m.digits}f") for m in campaign.measures)
            lines.append(f"| {' | '.join(campaign.cells(r))} | {r['runs']} | {' | '.join(figures)} "
                         f"| {r['censored']} ({r['censored_share']:.0%}) |")
        lines.append("")
    return "\n".join(lines)


def _cell(value, spec: str) -> str:
    """A table.md figure: "—" for a cell whose runs were all censored."""
    return "—" if value is None else format(value, spec)


def _plots(table: list, campaign: Campaign, out: Path) -> None:
    """One PNG per measure: a panel per situation (every one has runs: check_coverage), a
    group of bars per size, a bar per protocol (and static choice) or variant, its height the
    statistic over the runs not censored, its whiskers the 95% interval, n (those runs) above
    it; a cell whose runs were all censored has no bar and says so."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = campaign.bars()
    size_key = campaign.keys[2]  # partitions, or tasks
    sizes = list(campaign.sizes)
    width = 0.8 / len(variants)
    for metric in campaign.measures:
        fig, axes = plt.subplots(1, len(campaign.situations), figsize=(4.2 * len(campaign.situations), 4.4),
                                 squeeze=False)
        for ax, situation in zip(axes[0], campaign.situations):
            rows = [r for r in table if r["situation"] == situation]
            for k, (label, match) in enumerate(variants):
                cells = {(r["members"], r[size_key]): r for r in rows
                         if all(r[key] == value for key, value in match.items())}
                for i, size in enumerate(sizes):
                    x = i + (k - (len(variants) - 1) / 2) * width
                    r = cells.get(size)
                    if r is None:
                        continue
                    n = r["runs"] - r["censored"]
                    if r[metric.name] is None:
                        ax.annotate("all censored", (x, 0), rotation=90, fontsize="x-small", ha="center", va="bottom")
                        continue
                    value, low, high = r[metric.name], r[f"{metric.name}_low"], r[f"{metric.name}_high"]
                    ax.bar(x, value, width, yerr=[[max(value - low, 0)], [max(high - value, 0)]], capsize=2,
                           color=f"C{k}", label=label if i == 0 else None)
                    ax.annotate(f"n={n}", (x, max(high, value)), textcoords="offset points", xytext=(0, 2),
                                fontsize="x-small", ha="center", va="bottom")
            ax.set_title(situation.replace("_", " "))
            ax.set_xticks(range(len(sizes)), [f"{m}×{p}" for m, p in sizes])
            ax.set_xlabel(f"members × {size_key}")
            ax.set_ylim(bottom=0)
            ax.margins(y=0.12)
        axes[0][0].set_ylabel(f"{metric.how} {metric.title}")
        axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1, 1))
        fig.suptitle(f"{metric.how} {metric.title} over the runs not censored, with its 95% interval; n runs a bar",
                     fontsize="small")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        atomic_write(out / f"{metric.name}.png", buf.getvalue())
