"""Counterexamples as files a reviewer can read without running anything.

* JSON: every step's action, what changed (per lane) and the full final state;
* ITF (``<property>.itf.json``, checker/itf.py): every state whole, in Kafka's
  vocabulary, with the action and the nondeterministic choices that reached it, for
  a driver in another language to replay;
* DOT and SVG (graphviz): a sequence diagram with one lane per client and one for
  the coordinator, messages drawn as arrows from where they were sent to where
  they were delivered, faults and timers marked;
* text: a numbered trace for the terminal.

Files are written to a temporary name and renamed, so none is ever half-written.
"""
from __future__ import annotations

import json
from pathlib import Path

import graphviz

from rebalance.model.config import GroupConfig

from .engines.explore import Violation
from . import itf
from .files import atomic_write
from .render import action_text, bracket, changes, lane, state_view
from .system import BOUNCE, ENVIRONMENT, SendOrder

FAULTS_DRAWN = frozenset(ENVIRONMENT + (BOUNCE,))  # drawn as faults; a commit is drawn as a message


def to_json(cfg: GroupConfig, v: Violation) -> dict:
    steps = []
    prev = None
    for i, (action, state) in enumerate(v.path):
        view = state_view(cfg, state)
        step = {"step": i, "action": None if action is None else {
            "kind": action.kind, "lane": "coordinator" if action.slot < 0 or action.kind == "deliver"
            else lane(action.slot), "text": action_text(cfg, action)}}
        step["changes"] = view if prev is None else changes(prev, view)
        steps.append(step)
        prev = view
    return {"property": v.property, "reason": v.reason, "length": len(v.path) - 1,
            "loop_start": v.loop_start, "steps": steps, "final_state": prev}


def text_trace(cfg: GroupConfig, v: Violation) -> str:
    lines = [f"counterexample to {v.property}: {v.reason} ({len(v.path) - 1} steps)"]
    for i, (action, state) in enumerate(v.path):
        if action is None:
            lines.append("  0. initial state: group " + _group_line(cfg, state))
            continue
        lines.append(f"{i:3d}. {action_text(cfg, action)}")
        if i == v.loop_start:
            lines.append("     -- the loop starts here --")
    if v.loop_start is not None:
        same = v.path[v.loop_start][1] == v.path[-1][1]
        lines.append(f"     -- back to step {v.loop_start}"
                     f"{'' if same else ' (the same state up to renaming of generations and member ids)'}, forever --"
                     if v.loop_start < len(v.path) - 1 else "     -- stays here forever (stuttering) --")
    group, *members = _final_lines(cfg, v.path[-1][1])
    lines.append("     final: " + group)
    lines.extend("       " + line for line in members)
    return "\n".join(lines)


def _final_lines(cfg: GroupConfig, state) -> list:
    """The group, then one line per client: process, member id, generation, ownership."""
    view = state_view(cfg, state)
    lines = ["group " + _group_line(cfg, state)]
    for slot in range(len(state.procs)):
        p = view[lane(slot)]
        if "member_id" in p:
            lines.append(f"{lane(slot)} ({p['process']}) {p['member_id']} gen {p['generation']} "
                         f"{p['phase']} owns {bracket(p['owned'])}")
        else:
            lines.append(f"{lane(slot)} ({p['process']})")
    return lines


def _group_line(cfg: GroupConfig, state) -> str:
    c = state_view(cfg, state)["coordinator"]
    members = ", ".join(f"{m}:{bracket(x['assignment'])}" for m, x in c["members"].items())
    return f"{c['phase']} gen {c['generation']} leader {c['leader']} {{{members}}}"


def sequence_dot(name: str, title: str, lanes, rows, arrows, extra_edges=(), note: str | None = None) -> str:
    """A sequence diagram as DOT source: ``lanes`` (names, left to right), ``rows``
    (one dict per step, lane -> (node id, text, graphviz node attributes); a lane
    without an event in a row is a point on its line; node ids are
    ``<lane>_<row>``), ``arrows`` ((from node, to node, colour), ...) drawn as
    messages, ``extra_edges`` ((from node, to node, attributes), ...), ``note``: a
    text box under the last row. Used by counterexamples and ``conform``'s divergences."""
    g = graphviz.Digraph(name, graph_attr={
        "rankdir": "TB", "nodesep": "0.6", "ranksep": "0.25", "fontname": "Helvetica",
        "label": title, "labelloc": "t", "fontsize": "16"},
        node_attr={"fontname": "Helvetica", "fontsize": "10"}, edge_attr={"fontname": "Helvetica", "fontsize": "9"})
    with g.subgraph() as heads:  # lane headers in a row, in lane order
        heads.attr(rank="same")
        for lane_name in lanes:
            heads.node(f"{lane_name}_h", lane_name, shape="box", style="filled,bold", fillcolor="lightgrey")
        for a, b in zip(lanes, lanes[1:]):
            heads.edge(f"{a}_h", f"{b}_h", style="invis")
    for i, events in enumerate(rows):
        with g.subgraph() as row:
            row.attr(rank="same")
            for lane_name in lanes:
                if lane_name in events:
                    node, text, style = events[lane_name]
                    row.node(node, text, **style)
                else:
                    row.node(f"{lane_name}_{i}", "", shape="point", width="0.02", color="grey")
    for lane_name in lanes:
        chain = [f"{lane_name}_h"] + [f"{lane_name}_{i}" for i in range(len(rows))]
        for a, b in zip(chain, chain[1:]):
            g.edge(a, b, dir="none", color="grey", weight="100")
    for a, b, color in arrows:
        g.edge(a, b, color=color, constraint="false")
    for a, b, attrs in extra_edges:
        g.edge(a, b, **attrs)
    if note is not None:
        g.node("final", note, shape="note", style="filled", fillcolor="lightyellow")
        g.edge(f"{lanes[0]}_{len(rows) - 1}", "final", style="invis")
    return g.source


def to_dot(cfg: GroupConfig, v: Violation) -> str:
    """The sequence diagram as DOT source."""
    slots = len(v.path[0][1].procs)
    lanes = ["coordinator"] + [lane(s) for s in range(slots)]
    order = SendOrder(v.path[0][1], tag="coordinator_0")
    arrows = []
    rows = []
    prev_state = None
    for i, (action, state) in enumerate(v.path):
        events = {}
        if action is not None:
            # the clock's tick (slot -1) is drawn on the coordinator's lane, like its timers
            actor = "coordinator" if action.kind in ("deliver", "timer", "tick") else lane(action.slot)
            node = f"{actor}_{i}"
            text = action_text(cfg, action).split(": ", 1)[-1]
            style = {"shape": "box", "style": "rounded,filled", "fillcolor": "white"}
            if action.kind in FAULTS_DRAWN:
                style.update(fillcolor="mistyrose", color="red", shape="octagon")
                text = action.kind
            elif action.kind == "timer" or action.kind == "tick":
                style.update(fillcolor="lightyellow", shape="note")
            events[actor] = (node, f"{i}. {text}", style)
            sender = order.step(prev_state, action, state, tag=node)
            if sender:
                arrows.append((sender, node, "blue" if action.kind == "deliver" else "darkgreen"))
        rows.append(events)
        prev_state = state
    extra = []
    if v.loop_start is not None:  # the lasso's loop, drawn back on the coordinator's lane
        last = len(rows) - 1
        extra.append((f"coordinator_{last}", f"coordinator_{v.loop_start}", {
            "color": "red", "penwidth": "2", "constraint": "false",
            "label": f"loop back to {v.loop_start}" if v.loop_start < last else "forever"}))
    summary = _final_lines(cfg, v.path[-1][1])
    return sequence_dot("counterexample", f"{v.property} violated: {v.reason}", lanes, rows, arrows, extra,
                        "\\l".join(summary) + "\\l")


def svg_of(dot: str) -> bytes | None:
    """Graphviz's SVG of DOT source, or None if the ``dot`` program is missing."""
    try:
        return graphviz.Source(dot).pipe(format="svg")
    except graphviz.ExecutableNotFound:
        return None


NO_DOT = "graphviz's dot program is not installed (Debian package graphviz)"


def write(cfg: GroupConfig, v: Violation, out_dir: str | Path, extra: dict | None = None) -> dict:
    """Write ``<property>.json``, ``.itf.json``, ``.dot`` and ``.svg`` under ``out_dir``
    (created if missing). Returns ``{"json": path, "itf": path, "dot": path, "svg":
    path or None}``; svg is None (with the reason in ``"svg_error"``) if graphviz's
    ``dot`` is missing. The ITF trace is always written: it costs about what the JSON
    does, and a reader in another language should not need a second run to get it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / v.property
    doc = to_json(cfg, v)
    if extra:
        doc["configuration"] = extra
    paths = {"json": str(stem.with_suffix(".json")), "itf": f"{stem}.itf.json", "dot": str(stem.with_suffix(".dot")),
             "svg": None}
    atomic_write(Path(paths["json"]), json.dumps(doc, indent=2).encode())
    atomic_write(Path(paths["itf"]), json.dumps(itf.counterexample(cfg, v, extra), indent=1).encode())
    dot = to_dot(cfg, v)
    atomic_write(Path(paths["dot"]), dot.encode())
    svg = svg_of(dot)
    if svg is None:
        paths["svg_error"] = NO_DOT
        return paths
    paths["svg"] = str(stem.with_suffix(".svg"))
    atomic_write(Path(paths["svg"]), svg)
    return paths
