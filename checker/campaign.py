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
import os
import random
import shutil
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
METRICS = (("rebalances", "mean rebalances"), ("moved", "mean partitions moved"),
           ("unavailable_ticks", "mean partition-ticks unavailable"),
           ("ticks_to_balance", "median ticks to balance"))


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
        if self.runs < 1:
            raise ConfigError(f"--runs must be at least 1, got {self.runs}")
        if self.timing.scheduled_delay_ms < 0:
            raise ConfigError("--scheduled-rebalance-max-delay-ms must be at least 0, "
                              f"got {self.timing.scheduled_delay_ms}")
        if self.horizon_ms < 1:
            raise ConfigError(f"--horizon-ms must be at least 1, got {self.horizon_ms}")
        for name in self.situations:
            if name not in SITUATIONS:
                raise ConfigError(f"unknown situation {name!r} (expected one of {', '.join(SITUATIONS)})")
        for name in self.protocols:
            if name not in PROTOCOLS:
                raise ConfigError(f"unknown protocol {name!r} (expected one of {', '.join(PROTOCOLS)})")
        for members, partitions in self.sizes:
            if not (2 <= members <= MAX_SIZE[0] and members <= partitions <= MAX_SIZE[1]):
                raise ConfigError(f"size {members}x{partitions}: members must be 2..{MAX_SIZE[0]} and partitions "
                                  f"at least the members, at most {MAX_SIZE[1]}")
        if not (self.situations and self.protocols and self.sizes and self.static):
            raise ConfigError("the grid is empty: give at least one situation, protocol, size and static choice")

    def grid(self) -> list:
        return [(sit, size, proto, static) for sit in self.situations for size in self.sizes
                for proto in self.protocols for static in self.static]

    def specs(self) -> list:
        """One ``(run, situation, protocol, static, members, partitions, seed)`` per run."""
        grid = self.grid()
        return [(i, sit, proto, static, m, p, self.seed) for i in range(self.runs)
                for sit, (m, p), proto, static in [grid[i % len(grid)]]]


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


def _schema():
    from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType
    kinds = {"situation": StringType(), "protocol": StringType(), "static": BooleanType(),
             "censored": BooleanType(), "unavailable_ticks": LongType(), "events": LongType()}
    return StructType([StructField(f, kinds.get(f, IntegerType()), f == "ticks_to_balance") for f in ROW_FIELDS])


def run_campaign(campaign: Campaign, out: Path, master: str = "local[*]", progress=None) -> list:
    """Run ``campaign`` on Spark and write its outputs under ``out`` (created if
    missing). ``progress(done, total)`` is called as Spark tasks finish. Returns
    the table rows (dicts, as in table.csv). Raises ConfigError for a bad
    campaign."""
    from pyspark.sql import functions as F

    from .spark_session import session

    campaign.validate()
    out.mkdir(parents=True, exist_ok=True)
    spark = session(master, "rebalance-simulate")
    sc = spark.sparkContext
    specs = campaign.specs()
    slices = min(len(specs), max(4 * sc.defaultParallelism, 32))
    timing, horizon_ms, flag = campaign.timing, campaign.horizon_ms, campaign.rejoin_flag
    rows = sc.parallelize(specs, slices).map(lambda spec: run_one(spec, timing, horizon_ms, flag))
    frame = spark.createDataFrame(rows, _schema())
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
    keys = ["situation", "members", "partitions", "protocol", "static"]
    verdict = lambda name: F.when(~F.col("censored"), F.col(name))  # noqa: E731  (null for a censored run)
    table = (runs.groupBy(*keys)
             .agg(F.count("*").alias("runs"),
                  F.round(F.avg(verdict("rebalances")), 2).alias("rebalances"),
                  F.round(F.avg(verdict("moved")), 1).alias("moved"),
                  F.round(F.avg(verdict("unavailable_ticks")), 0).alias("unavailable_ticks"),
                  F.expr("percentile(ticks_to_balance, 0.5)").alias("ticks_to_balance"),  # null if censored
                  F.sum(F.col("censored").cast("int")).alias("censored"),
                  F.round(F.avg(F.col("censored").cast("double")), 3).alias("censored_share"))
             .collect())
    order = {name: i for i, name in enumerate(campaign.situations)}
    protos = {name: i for i, name in enumerate(campaign.protocols)}
    table = sorted((r.asDict() for r in table),
                   key=lambda r: (order[r["situation"]], r["members"], r["partitions"], protos[r["protocol"]],
                                  r["static"]))
    _replace_dir(staging / "runs.parquet", out / "runs.parquet")
    shutil.rmtree(staging, ignore_errors=True)
    atomic_write(out / "table.csv", _csv(table))
    atomic_write(out / "table.md", _markdown(table, campaign))
    _plots(table, campaign, out)
    return table


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


TABLE_FIELDS = ("situation", "members", "partitions", "protocol", "static", "runs", "rebalances", "moved",
                "unavailable_ticks", "ticks_to_balance", "censored", "censored_share")


def _csv(table: list) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, TABLE_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(table)
    return buf.getvalue()


def _markdown(table: list, campaign: Campaign) -> str:
    t = campaign.timing
    lines = [f"# Simulation campaign: {campaign.runs:,} runs, seed {campaign.seed}", "",
             f"A tick is {t.tick_ms} ms. session.timeout.ms {t.session_ms}, heartbeat.interval.ms "
             f"{t.heartbeat_ms}, max.poll.interval.ms {t.rebalance_ms}, group.initial.rebalance.delay.ms "
             f"{t.initial_delay_ms}, scheduled.rebalance.max.delay.ms {t.scheduled_delay_ms}, "
             f"latency {t.latency_ms} ms. A run goes on until the group is balanced and quiet, or is "
             f"censored {campaign.horizon_ms:,} ms after its last scripted action. Means, and the median ticks "
             "to balance, are over the runs that were not censored (— if none); censored runs are counted, "
             "their figures (lower bounds) are in runs.parquet."
             + (" The cooperative protocols' leaders set the rejoin flag (R74)." if campaign.rejoin_flag else ""), ""]
    header = ("members × partitions", "protocol", "static", "runs", "rebalances", "moved",
              "partition-ticks unavailable", "ticks to balance", "censored")
    for situation in campaign.situations:
        rows = [r for r in table if r["situation"] == situation]
        if not rows:
            continue
        lines += [f"## {situation.replace('_', ' ')}", "", "| " + " | ".join(header) + " |",
                  "|" + "---|" * len(header)]
        for r in rows:
            figures = (_cell(r["rebalances"], ",.2f"), _cell(r["moved"], ",.1f"),
                       _cell(r["unavailable_ticks"], ",.0f"), _cell(r["ticks_to_balance"], ",.0f"))
            lines.append(f"| {r['members']} × {r['partitions']} | {r['protocol']} | {'yes' if r['static'] else 'no'} "
                         f"| {r['runs']} | {' | '.join(figures)} | {r['censored']} ({r['censored_share']:.0%}) |")
        lines.append("")
    return "\n".join(lines)


def _cell(value, spec: str) -> str:
    """A table.md figure: "—" for a cell whose runs were all censored."""
    return "—" if value is None else format(value, spec)


def _plots(table: list, campaign: Campaign, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = [(p, s) for p in campaign.protocols for s in campaign.static]
    sizes = list(campaign.sizes)
    width = 0.8 / len(variants)
    for metric, title in METRICS:
        fig, axes = plt.subplots(1, len(campaign.situations), figsize=(4.2 * len(campaign.situations), 4),
                                 squeeze=False)
        for ax, situation in zip(axes[0], campaign.situations):
            cells = {(r["members"], r["partitions"], r["protocol"], r["static"]): r[metric] or 0
                     for r in table if r["situation"] == situation}
            for k, (proto, static) in enumerate(variants):
                xs = [i + (k - (len(variants) - 1) / 2) * width for i in range(len(sizes))]
                ys = [cells.get((m, p, proto, static), 0) for m, p in sizes]
                ax.bar(xs, ys, width, label=f"{proto}{' static' if static else ''}")
            ax.set_title(situation.replace("_", " "))
            ax.set_xticks(range(len(sizes)), [f"{m}×{p}" for m, p in sizes])
            ax.set_yscale("symlog")
        axes[0][0].set_ylabel(title)
        axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1, 1))
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        atomic_write(out / f"{metric}.png", buf.getvalue())
