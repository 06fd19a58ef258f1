"""Judging traces: one file (``judge``), a directory of them locally or on Spark
(``corpus``), for ``rebalance conform``.

Sides: ``coordinator`` (checker/conform/coordinator.py), ``members``
(checker/conform/members.py), ``clients`` (checker/conform/clients.py), and
``both`` (coordinator and members; the first divergence by line).

A corpus row (one per trace, ``ROW_FIELDS``): path, side, verdict ("conforms",
"divergent", "incomplete" or "malformed"), records, records_checked, rules
(comma-separated), the first divergent line and its rule (or the malformed
line), seconds. Spark (local mode by default; checker/spark_session.py) writes
``conform.parquet`` (one row per trace) and ``table.md`` and ``table.csv`` (the
rows, then the count per verdict) under the output directory, each written aside
and renamed; the local engine gives the same rows.
"""
from __future__ import annotations

import csv
import importlib
import io
import re
import shutil
import tempfile
import time
from pathlib import Path

from ..files import atomic_write
from . import report
from .trace import TraceError, read
from .verdict import CONFORMS, DIVERGENT, EXIT_CODE, INCOMPLETE, Verdict, divergent

SIDES = ("coordinator", "members", "both", "clients")
MALFORMED = "malformed"
EXIT_MALFORMED = 2
ROW_FIELDS = ("path", "side", "verdict", "records", "records_checked", "rules", "line", "rule", "seconds")


def check(trace, side: str, options: dict) -> Verdict:
    """``trace`` judged by ``side`` (one of SIDES)."""
    if side != "both":
        return importlib.import_module(f"rebalance.checker.conform.{side}").check(trace, options)
    verdicts = [check(trace, s, options) for s in ("coordinator", "members")]
    rules = frozenset().union(*(v.rules for v in verdicts))
    checked = max(v.records_checked for v in verdicts)
    found = [d for v in verdicts if v.status == DIVERGENT for d in v.divergences]
    if found:
        return divergent(checked, rules, found, {s: v.figures for s, v in zip(("coordinator", "members"), verdicts)})
    uninterpreted = tuple(x for v in verdicts for x in v.uninterpreted)
    status = INCOMPLETE if any(v.status == INCOMPLETE for v in verdicts) else CONFORMS
    return Verdict(status, checked, rules, uninterpreted=uninterpreted,
                   figures={s: v.figures for s, v in zip(("coordinator", "members"), verdicts)})


def malformed_error(message: str, line: int, reason: str) -> dict:
    """The ``error`` object of a malformed trace or bad input: every command's error shape
    (``message``, ``exit_code``, ``command``) with the trace's ``line`` (0: none) and ``reason``."""
    return {"message": message, "exit_code": EXIT_MALFORMED, "command": "conform", "line": line, "reason": reason}


def judge(path, side: str, options: dict, out_dir=None) -> tuple:
    """Judge the trace at ``path``: ``(summary dict, exit code)`` (report.summary; a
    malformed trace: ``{verdict: "malformed", error: malformed_error(...), ...}``, exit 2).
    With ``out_dir``, a divergence writes its lane SVG and JSON there."""
    t0 = time.perf_counter()
    try:
        trace = read(path)
    except TraceError as e:
        return ({"verdict": MALFORMED, "side": side, "trace": str(path), "records": None, "records_checked": 0,
                 "rules": [], "divergence": None, "uninterpreted": [],
                 "error": malformed_error(f"{Path(path).name}:{e.line}: {e.reason}", e.line, e.reason),
                 "seconds": round(time.perf_counter() - t0, 3)}, EXIT_MALFORMED)
    verdict = check(trace, side, options)
    doc = report.summary(str(path), side, verdict, len(trace.records) + 1, time.perf_counter() - t0)
    if verdict.divergence is not None and out_dir is not None:
        report.write(out_dir, f"conform-{Path(path).stem}", verdict.divergence, doc)
    return doc, EXIT_CODE[verdict.status]


def judge_observed(paths, options: dict) -> tuple:
    """Judge the observed logs at ``paths`` (spec/OBSERVED.md) on the clients side:
    ``(summary dict, exit code)`` as ``judge`` gives them; malformed input names its
    ``FILE:LINE`` (exit 2). No diagram: the records are the applications', not a
    trace's."""
    from . import clients
    t0 = time.perf_counter()
    try:
        verdict = clients.check(list(paths), options)
    except (clients.ObservedError, OSError) as e:
        text = str(e) if isinstance(e, clients.ObservedError) else f"{e.filename}: {e.strerror}"
        found = re.match(r"[^:]*:(\d+): (.*)", text)
        return ({"verdict": MALFORMED, "side": "clients", "trace": ",".join(map(str, paths)), "records": None,
                 "records_checked": 0, "rules": [], "divergence": None, "uninterpreted": [],
                 "error": malformed_error(text, int(found.group(1)) if found else 0,
                                         found.group(2) if found else text),
                 "seconds": round(time.perf_counter() - t0, 3)}, EXIT_MALFORMED)
    doc = report.summary(",".join(map(str, paths)), "clients", verdict, verdict.records_checked,
                         time.perf_counter() - t0)
    return doc, EXIT_CODE[verdict.status]


def traces_in(directory) -> list:
    """The ``*.jsonl`` files of ``directory``, sorted."""
    return sorted(str(p) for p in Path(directory).glob("*.jsonl"))


def row(doc: dict) -> dict:
    """A corpus row (ROW_FIELDS) from a summary."""
    d = doc.get("divergence") or {}
    error = doc.get("error") or {}
    return {"path": doc["trace"], "side": doc["side"], "verdict": doc["verdict"], "records": doc["records"],
            "records_checked": doc["records_checked"], "rules": ",".join(doc["rules"]),
            "line": d.get("line", error.get("line")), "rule": d.get("rule"), "seconds": doc["seconds"]}


def _judge_row(path: str, side: str, options: dict) -> dict:
    return row(judge(path, side, options)[0])


def exit_code(verdicts) -> int:
    """A corpus's exit code: 1 if a trace is divergent, else 2 if one is malformed,
    else 3 if one is incomplete, else 0."""
    verdicts = set(verdicts)
    for status, code in ((DIVERGENT, 1), (MALFORMED, 2), (INCOMPLETE, 3)):
        if status in verdicts:
            return code
    return 0


def corpus_local(paths, side: str, options: dict) -> list:
    """Rows for ``paths``, judged one after the other."""
    return [_judge_row(p, side, options) for p in paths]


def _schema():
    from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType
    kinds = {"records": IntegerType(), "records_checked": IntegerType(), "line": IntegerType(),
             "seconds": DoubleType()}
    return StructType([StructField(f, kinds.get(f, StringType()), True) for f in ROW_FIELDS])


def corpus_spark(paths, side: str, options: dict, out: Path, master: str = "local[2]") -> list:
    """Judge ``paths`` on Spark, one task per trace; writes ``conform.parquet`` and
    the tables under ``out``. Returns the rows, sorted by path. Raises
    ConfigError without pyspark."""
    from ..campaign import _replace_dir
    from ..spark_session import session

    out.mkdir(parents=True, exist_ok=True)
    spark = session(master, "rebalance-conform")
    sc = spark.sparkContext
    rows = sc.parallelize(list(paths), max(1, min(len(paths), 4 * sc.defaultParallelism))).map(
        lambda p: _judge_row(p, side, options))
    frame = spark.createDataFrame(rows, _schema())
    staging = Path(tempfile.mkdtemp(prefix=".conform-", dir=out))
    frame.orderBy("path").write.parquet(str(staging / "conform.parquet"))
    result = [r.asDict() for r in spark.read.parquet(str(staging / "conform.parquet")).orderBy("path").collect()]
    _replace_dir(staging / "conform.parquet", out / "conform.parquet")
    shutil.rmtree(staging, ignore_errors=True)
    write_tables(result, out)
    return result


def write_tables(rows: list, out: Path) -> None:
    """``table.csv`` (the rows) and ``table.md`` (counts per verdict, then the rows)."""
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, ROW_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write(out / "table.csv", buf.getvalue())
    counts: dict = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines = ["# rebalance conform", "", "| verdict | traces |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    lines += ["", "| " + " | ".join(ROW_FIELDS) + " |", "|" + " --- |" * len(ROW_FIELDS)]
    lines += ["| " + " | ".join("" if r[f] is None else str(r[f]) for f in ROW_FIELDS) + " |" for r in rows]
    atomic_write(out / "table.md", "\n".join(lines) + "\n")
