"""JUnit XML for CI: ``rebalance check --junit FILE`` writes one ``<testcase>`` per
property, so a CI system (GitHub Actions, GitLab, Jenkins) shows each property as
a test, a violated one as a failure carrying its counterexample's files and steps;
``rebalance conform --junit FILE`` one per trace, a divergent one a failure naming
the record and the rule.

The format is the de-facto JUnit schema CI tools read (``testsuites`` >
``testsuite`` > ``testcase`` with ``failure`` / ``skipped``); the file is written
whole or not at all (checker/files.py atomic_write). Standard library only.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from .files import atomic_write


def counterexample_text(files: dict) -> str:
    """The steps of a counterexample as numbered lines, read from its JSON file
    (``files["json"]``, as counterexample.write wrote it), then the files' paths."""
    doc = json.loads(Path(files["json"]).read_text())
    lines = [f"counterexample to {doc['property']}: {doc['reason']} ({doc['length']} steps)"]
    lines += [f"{s['step']:3d}. {s['action']['text']}" for s in doc["steps"] if s["action"]]
    if doc.get("loop_start") is not None:
        lines.append(f"     -- back to step {doc['loop_start']}, forever --")
    lines.append("files: " + " ".join(str(files[k]) for k in ("svg", "html", "json", "itf") if files.get(k)))
    return "\n".join(lines)


def check_cases(summary: dict) -> list[dict]:
    """One case per property of a ``check --json`` summary: ``{"name", "outcome":
    "passed" | "failed" | "skipped", "message", "text"}``. A property fails when its
    status is ``violated`` and it is not expected violated; it is skipped when not
    decided (``incomplete``, ``not checked``); a cover not reached under
    ``--require-covers`` is one more failed case, ``covers``."""
    found = summary.get("counterexamples") or [c for c in (summary.get("counterexample"),) if c]  # walks: one
    files = {c["property"]: c["files"] for c in found}
    out = []
    for p in summary["properties"]:
        status, expected = p["status"], p["expected"]
        if status in ("incomplete", "not checked"):
            outcome, message = "skipped", f"{p['name']}: {status}" + (
                f" (stopped at {summary['limit']})" if summary.get("limit") else "")
        elif status == "violated" and expected != "violated":
            outcome, message = "failed", f"{p['name']} violated"
        else:
            outcome, message = "passed", f"{p['name']}: {status} (expected {expected})"
        text = counterexample_text(files[p["name"]]) if outcome == "failed" and p["name"] in files else ""
        out.append({"name": p["name"], "kind": p["kind"], "outcome": outcome, "message": message, "text": text})
    if summary.get("uncovered"):
        out.append({"name": "covers", "kind": "cover", "outcome": "failed",
                    "message": "covers not reached: " + ", ".join(summary["uncovered"]), "text": ""})
    return out


def conform_cases(rows) -> list[dict]:
    """One case per trace of ``conform``'s corpus rows (checker/conform/run.py ``row``):
    conforms passes, divergent fails (the line, rule and reason), incomplete is skipped."""
    out = []
    for r in rows:
        outcome = {"conforms": "passed", "incomplete": "skipped"}.get(r["verdict"], "failed")
        where = f" at line {r['line']}" + (f" ({r['rule']})" if r.get("rule") else "") if r.get("line") else ""
        out.append({"name": r["path"], "kind": f"conform.{r['side']}", "outcome": outcome,
                    "message": f"{r['verdict']}{where}", "text": r.get("reason") or ""})
    return out


def write(path: str | Path, suite: str, rows: list[dict], seconds: float = 0.0) -> Path:
    """Write ``rows`` (``check_cases``, ``conform_cases``) as a JUnit XML file at
    ``path``, the suite named ``suite`` (e.g. ``rebalance check examples/default.toml``)
    and timed ``seconds``. Returns the path. Raises OSError."""
    root = ET.Element("testsuites")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(rows)),
                       failures=str(sum(r["outcome"] == "failed" for r in rows)), errors="0",
                       skipped=str(sum(r["outcome"] == "skipped" for r in rows)), time=f"{seconds:.3f}")
    for r in rows:
        case = ET.SubElement(ts, "testcase", classname=f"rebalance.{r['kind']}", name=r["name"])
        if r["outcome"] == "failed":
            ET.SubElement(case, "failure", message=r["message"], type="violated").text = r["text"]
        elif r["outcome"] == "skipped":
            ET.SubElement(case, "skipped", message=r["message"])
    ET.indent(root)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)  # --junit out/rebalance.xml before out/ exists
    atomic_write(path, ET.tostring(root, encoding="utf-8", xml_declaration=True))
    return path
