"""What ``rebalance conform`` prints and writes: the verdict as one JSON object, and
for a divergence a lane diagram of the trace up to the divergent record (one lane
per connection and one for the coordinator, requests and responses drawn as
messages, the divergent record in red; checker/counterexample.py's
``sequence_dot``) with the verdict beside it as JSON, each written atomically.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..counterexample import NO_DOT, sequence_dot, svg_of
from ..files import atomic_write
from .verdict import Divergence, Verdict

MAX_ROWS = 80  # the diagram shows the last records up to the divergence
COORDINATOR = "coordinator"


def summary(path: str, side: str, verdict: Verdict, records: int, seconds: float, files=None) -> dict:
    """The ``--json`` object: {verdict, side, trace, records, records_checked, rules,
    divergence: {line, rule, reason, expected, record, files: {svg, json}} or None (the
    first), divergences: [{line, side, rule, reason, expected, record}] (every one, in
    trace order), uninterpreted, seconds, figures}."""
    d = verdict.divergence
    return {"verdict": verdict.status, "side": side, "trace": path, "records": records,
            "records_checked": verdict.records_checked, "rules": sorted(verdict.rules, key=_rule_order),
            "divergence": None if d is None else {
                "line": d.line, "side": d.side, "rule": d.rule, "reason": d.reason, "expected": list(d.expected),
                "record": d.record, "files": files or {"svg": None, "json": None}},
            "divergences": [{"line": x.line, "side": x.side, "rule": x.rule, "reason": x.reason,
                             "expected": list(x.expected), "record": x.record}
                            for x in (verdict.divergences or ((d,) if d else ()))],
            "uninterpreted": list(verdict.uninterpreted), "seconds": round(seconds, 3),
            "figures": verdict.figures}


def divergence_lines(doc: dict) -> list:
    """The lines ``rebalance conform`` prints for a summary's divergences (none if it has
    none): the first one's line, rule, reason and record, what the model allows there, the
    last matching state and the files drawn, then each later divergence with what the model
    allows. Plain text, also the interop tests' assertion messages."""
    d = doc["divergence"]
    if d is None:
        return []
    lines = [f"divergent at line {d['line']} ({d['rule']}): {d['reason']}",
             "  record: " + json.dumps(d["record"], separators=(",", ":")), "  the model allows here:",
             *(f"    {e}" for e in d["expected"])]
    last = doc["figures"].get("last_state")
    if last:
        lines.append("  last matching state: " + json.dumps(last, separators=(",", ":")))
    files = d["files"]
    lines.append(f"  files: {files.get('svg') or files.get('svg_error', '')} {files.get('json') or ''}")
    for more in doc["divergences"][1:]:  # after a divergence the side resynchronises and goes on
        lines.append(f"also divergent at line {more['line']} ({more['side']} side, {more['rule']}): {more['reason']}")
        lines += [f"    the model allows: {e}" for e in more["expected"]]
    return lines


def _rule_order(rule: str):
    return (0, int(rule[1:])) if rule[:1] == "R" and rule[1:].isdigit() else (1, rule)


def _label(record: dict) -> str:
    body = record.get("body", {})
    if record["type"] == "request":
        bits = [record["api"]]
        if body.get("member_id"):
            bits.append(f"member {body['member_id'][:18]}")
        if "generation_id" in body:
            bits.append(f"gen {body['generation_id']}")
        return " ".join(bits)
    if record["type"] == "response":
        error = body.get("error")
        if error is None and body.get("topics"):
            error = body["topics"][0]["partitions"][0]["error"] if body["topics"][0]["partitions"] else "NONE"
        bits = [f"{record['api']} response", str(error or "NONE")]
        if "generation_id" in body and body.get("generation_id", -1) >= 0:
            bits.append(f"gen {body['generation_id']}")
        return " ".join(bits)
    return record["type"]


def to_dot(d: Divergence, title: str) -> str:
    """The divergence's lane diagram as DOT source."""
    context = list(d.context)[-MAX_ROWS:]
    lanes = [COORDINATOR]
    for _, record in context:
        if record.get("connection") and record["connection"] not in lanes:
            lanes.append(record["connection"])
    rows, arrows = [], []
    for i, (line, record) in enumerate(context):
        conn = record.get("connection")
        kind = record["type"]
        text = f"{line}. {_label(record)}"
        style = {"shape": "box", "style": "rounded,filled", "fillcolor": "white"}
        if line == d.line:
            style.update(fillcolor="mistyrose", color="red", penwidth="2")
            text += f"\\nDIVERGENT ({d.rule})"
        if kind == "request":
            events = {conn: (f"{conn}_{i}", f"{record.get('client_id') or ''} #{record['correlation_id']}",
                             {"shape": "point", "width": "0.08"}),
                      COORDINATOR: (f"{COORDINATOR}_{i}", text, style)}
            arrows.append((f"{conn}_{i}", f"{COORDINATOR}_{i}", "blue"))
        elif kind == "response":
            events = {COORDINATOR: (f"{COORDINATOR}_{i}", "", {"shape": "point", "width": "0.08"}),
                      conn: (f"{conn}_{i}", text, style)}
            arrows.append((f"{COORDINATOR}_{i}", f"{conn}_{i}", "darkgreen"))
        elif conn:
            events = {conn: (f"{conn}_{i}", text, dict(style, shape="octagon", fillcolor="lightyellow"))}
        else:
            events = {COORDINATOR: (f"{COORDINATOR}_{i}", text, dict(style, shape="octagon", fillcolor="mistyrose"))}
        rows.append(events)
    note = "the model allows here:\\l" + "".join(f"  {e}\\l" for e in d.expected[:8])
    return sequence_dot("conform", title, lanes, rows, arrows, note=note.replace('"', "'"))


def write(out_dir, stem: str, d: Divergence, doc: dict) -> dict:
    """Write ``<stem>.svg`` (the lane diagram; skipped with ``svg_error`` if graphviz's
    dot is missing) and ``<stem>.json`` (``doc`` with the files filled in) under
    ``out_dir`` (created). Returns {"svg": path or None, "json": path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"svg": None, "json": str(out / f"{stem}.json")}
    svg = svg_of(to_dot(d, f"{stem}: divergent at line {d.line} ({d.rule}): {d.reason}"))
    if svg is None:
        files["svg_error"] = NO_DOT
    else:
        files["svg"] = str(out / f"{stem}.svg")
        atomic_write(Path(files["svg"]), svg)
    doc["divergence"]["files"] = files
    atomic_write(Path(files["json"]), json.dumps(doc, indent=2))
    return files
