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
import re
import textwrap
from html import escape
from pathlib import Path

import graphviz

from rebalance.model.config import ConfigError, GroupConfig

from .engines.explore import Violation
from . import itf
from .files import atomic_write
from .render import action_lane, action_text, bracket, changes, lane, state_view
from .system import BOUNCE, ENVIRONMENT, SendOrder

FAULTS_DRAWN = frozenset(ENVIRONMENT + (BOUNCE,))  # drawn as faults; a commit is drawn as a message


def steps_json(cfg: GroupConfig, path) -> dict:
    """An execution ``[(Action | None, State), ...]`` as ``{"steps": [{step, action:
    {kind, lane, text} | None, changes}], "final_state"}``: the first step's changes
    are the whole initial state, each later one's what it changed, per lane."""
    steps = []
    prev = None
    for i, (action, state) in enumerate(path):
        view = state_view(cfg, state)
        step = {"step": i, "action": None if action is None else {
            "kind": action.kind, "lane": action_lane(action), "text": action_text(cfg, action)}}
        step["changes"] = view if prev is None else changes(prev, view)
        steps.append(step)
        prev = view
    return {"steps": steps, "final_state": prev}


def to_json(cfg: GroupConfig, v: Violation) -> dict:
    return {"property": v.property, "reason": v.reason, "length": len(v.path) - 1,
            "loop_start": v.loop_start, **steps_json(cfg, v.path)}


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
        if "epoch" in p:  # KIP-848
            lines.append(f"{lane(slot)} ({p['process']}) {p['member_id']} epoch {p['epoch']} "
                         f"{p['state']} owns {bracket(p['owned'])}")
        elif "member_id" in p:
            lines.append(f"{lane(slot)} ({p['process']}) {p['member_id']} gen {p['generation']} "
                         f"{p['phase']} owns {bracket(p['owned'])}")
        else:
            lines.append(f"{lane(slot)} ({p['process']})")
    return lines


def _group_line(cfg: GroupConfig, state) -> str:
    c = state_view(cfg, state)["coordinator"]
    if "group_epoch" in c:  # KIP-848
        members = ", ".join(f"{m}:{x['state']}@{x['epoch']}{bracket(x['assignment'])}" for m, x in c["members"].items())
        return f"{c['state']} epoch {c['group_epoch']} target epoch {c['target_epoch']} {{{members}}}"
    members = ", ".join(f"{m}:{bracket(x['assignment'])}" for m, x in c["members"].items())
    return f"{c['phase']} gen {c['generation']} leader {c['leader']} {{{members}}}"


MAX_WIDTH_IN = 16.66  # 1,600 px at 96 px/in (1,200 pt): graphviz scales a wider drawing down to it
TITLE_WRAP = 110  # characters per title line
NODE_WRAP = 46  # characters per line of an event's text


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters (words kept whole)."""
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def html_label(lines) -> str:
    """A graphviz HTML-like label of already escaped lines, centred."""
    return "<" + "<BR/>".join(lines) + ">"


def sequence_dot(name: str, title: str, lanes, rows, arrows, extra_edges=(), note: str | None = None,
                 heads: dict | None = None, unlined=()) -> str:
    """A sequence diagram as DOT source: ``lanes`` (names, left to right), ``rows``
    (one dict per step, lane -> (node id, text, graphviz node attributes); a lane
    without an event in a row is a point on its line; node ids are
    ``<lane>_<row>``), ``arrows`` ((from node, to node, colour), ...) drawn as
    messages, ``extra_edges`` ((from node, to node, attributes), ...), ``note``: a
    text box under the last row, ``heads``: a lane's header text when not its name,
    ``unlined``: lanes drawn without a line (a lasso's loop edge runs there).
    The title is wrapped and the drawing scaled to at most 1,600 px wide
    (``MAX_WIDTH_IN``). Used by counterexamples, replays and ``conform``'s divergences."""
    g = graphviz.Digraph(name, graph_attr={
        "rankdir": "TB", "nodesep": "0.4", "ranksep": "0.2", "fontname": "Helvetica",
        "label": "\\n".join(line for part in title.split("\n") for line in wrap(part, TITLE_WRAP)),
        "labelloc": "t", "fontsize": "16", "size": f"{MAX_WIDTH_IN},1000"},
        node_attr={"fontname": "Helvetica", "fontsize": "10"}, edge_attr={"fontname": "Helvetica", "fontsize": "9"})
    with g.subgraph() as head_row:  # lane headers in a row, in lane order
        head_row.attr(rank="same")
        for lane_name in lanes:
            head_row.node(f"{lane_name}_h", (heads or {}).get(lane_name, lane_name), shape="box",
                          style="filled,bold", fillcolor="lightgrey")
        for a, b in zip(lanes, lanes[1:]):
            head_row.edge(f"{a}_h", f"{b}_h", style="invis")
    for i, events in enumerate(rows):
        with g.subgraph() as row:
            row.attr(rank="same")
            for lane_name in lanes:
                if lane_name in events:
                    node, text, style = events[lane_name]
                    row.node(node, text, **style)
                else:
                    row.node(f"{lane_name}_{i}", "", shape="point", width="0.02", color="grey",
                             **({"style": "invis"} if lane_name in unlined else {}))
    for lane_name in lanes:
        chain = [f"{lane_name}_h"] + [f"{lane_name}_{i}" for i in range(len(rows))]
        for a, b in zip(chain, chain[1:]):
            g.edge(a, b, dir="none", color="grey", weight="100", **({"style": "invis"} if lane_name in unlined else {}))
    for a, b, color in arrows:
        g.edge(a, b, color=color, constraint="false")
    for a, b, attrs in extra_edges:
        g.edge(a, b, **attrs)
    if note is not None:
        g.node("final", note, shape="note", style="filled", fillcolor="lightyellow")
        g.edge(f"{lanes[0]}_{len(rows) - 1}", "final", style="invis")
    return g.source


def holdings(cfg: GroupConfig, state) -> dict:
    """Per lane with a consumer: ``(owned, assigned)`` partition names, assigned being
    what the coordinator holds for its member id (empty when it holds none)."""
    view = state_view(cfg, state)
    members = view["coordinator"]["members"]
    out = {}
    for slot in range(len(state.procs)):
        p = view[lane(slot)]
        if "member_id" in p:
            out[lane(slot)] = (tuple(p["owned"]), tuple(members.get(p["member_id"], {}).get("assignment", ())))
    return out


def _holding_line(holding, bad=frozenset()) -> str:
    """``owns [t-0, t-1] · assigned [t-0]`` (escaped for an HTML label), the partitions
    in ``bad`` in bold red."""
    def names(xs):
        return "[" + ", ".join(f'<B><FONT COLOR="red">{escape(x)}</FONT></B>' if x in bad else escape(x)
                               for x in xs) + "]"
    owned, assigned = holding
    return f'<FONT POINT-SIZE="9" COLOR="darkgreen">owns {names(owned)} · assigned {names(assigned)}</FONT>'


def heartbeat_round_trips(path) -> dict:
    """The heartbeat round trips that change nothing in the group or in any member's
    partitions, drawn as one row: a member's Heartbeat, its delivery (the
    coordinator's group unchanged) and the HeartbeatResponse (the member's owned
    partitions unchanged; REBALANCE_IN_PROGRESS only makes it rejoin, which the
    JoinGroup after it shows). ``{step index: the trip's (heartbeat, delivery,
    response) step indices}``."""
    trips = {}
    for i, (a, _) in enumerate(path):
        if a is None or a.kind != "heartbeat" or i in trips:
            continue
        j = next((j for j in range(i + 1, len(path)) if path[j][0].kind == "deliver" and path[j][0].slot == a.slot), None)
        k = j and next((k for k in range(j + 1, len(path)) if path[k][0].kind == "reply" and path[k][0].slot == a.slot), None)
        if (k and type(path[j][0].detail).__name__ == "Heartbeat" and path[j - 1][1].group == path[j][1].group
                and type(path[k][0].detail).__name__ == "HeartbeatResponse"
                and _owned(path[k - 1][1], a.slot) == _owned(path[k][1], a.slot)):
            trips.update(dict.fromkeys((i, j, k), (i, j, k)))
    return trips


def _owned(state, slot: int) -> int:
    c = state.procs[slot].consumer
    return 0 if c is None else c.owned


def diagram(cfg: GroupConfig, path, title: str, loop_start: int | None = None, reason: str = "") -> str:
    """The sequence diagram of ``path`` (``[(Action | None, State), ...]``) as DOT
    source: a lane for the coordinator and one per client slot that acts or holds a
    consumer (unused lanes dropped); per lane the owned and assigned partitions at
    the start (in its header) and after each step that changes them; heartbeat round
    trips that change nothing collapsed to one row (``heartbeat_round_trips``). A
    counterexample's last step (``reason`` given, no loop) is the violating one:
    drawn red (SVG class ``violation``) with the partitions ``reason`` names bold red
    (class ``violating-partition`` on the lanes holding them); a lasso's loop
    (``loop_start``) is shaded (class ``loop``) with an edge back to where it starts."""
    slots = len(path[0][1].procs)
    collapsed = heartbeat_round_trips(path)
    bad = frozenset(re.findall(r"\b(?:%s)-\d+\b" % "|".join(re.escape(n) for n, _ in cfg.topics), reason))
    last = len(path) - 1
    violating = last if reason and loop_start is None else None
    order = SendOrder(path[0][1], tag="coordinator_0")
    arrows, rows, row_of, held, used = [], [], {}, {}, {"coordinator"}
    prev_state = None
    for i, (action, state) in enumerate(path):
        events: dict = {}
        r = len(rows)
        if action is not None:
            actor = "coordinator" if action.kind in ("deliver", "timer", "tick") else lane(action.slot)
            text = action_text(cfg, action).split(": ", 1)[-1]
            style = {"shape": "box", "style": "rounded,filled", "fillcolor": "white"}
            if i in collapsed:
                trip = collapsed[i]
                if i != trip[-1]:  # drawn at the response's row
                    order.step(prev_state, action, state)
                    prev_state = state
                    continue
                actor = lane(action.slot)
                order.step(prev_state, action, state, tag=f"{actor}_{r}")  # the rejoin's JoinGroup starts here
                style.update(fillcolor="whitesmoke", color="grey")
                lines = [escape(f"{trip[0]}-{i}. heartbeat round trip: {action.detail.error.name}")]
            else:
                if action.kind in FAULTS_DRAWN:
                    style.update(fillcolor="mistyrose", color="red", shape="octagon")
                    text = action.kind
                elif action.kind in ("timer", "tick"):
                    style.update(fillcolor="lightyellow", shape="note")
                lines = [escape(x) for x in wrap(f"{i}. {text}", NODE_WRAP)]
                sender = order.step(prev_state, action, state, tag=f"{actor}_{r}")
                if sender:
                    arrows.append((sender, f"{actor}_{r}", "blue" if action.kind == "deliver" else "darkgreen"))
            if i == violating:
                style.update({"class": "violation", "color": "red", "penwidth": "3", "fillcolor": "mistyrose"})
            elif loop_start is not None and i >= loop_start:
                style.update({"class": "loop", "fillcolor": "lightcyan"})
            events[actor] = [f"{actor}_{r}", lines, style]
            used.add(actor)
        holding_of = holdings(cfg, state)
        for name, holding in holding_of.items():
            used.add(name)
            if held.get(name) == holding and i != violating:
                continue
            held[name] = holding
            if i == 0:
                continue  # drawn in the header
            hot = bad if i == violating and bad & set(holding[0] + holding[1]) else frozenset()
            if name in events:
                events[name][1].append(_holding_line(holding, hot))
                if hot:
                    events[name][2]["class"] = "violation violating-partition"
            else:
                style = {"shape": "plain", "class": "violating-partition"} if hot else {"shape": "plain"}
                events[name] = [f"{name}_{r}", [_holding_line(holding, hot)], style]
        if events or i == 0:
            rows.append({k: (node, html_label(lines), style) for k, (node, lines, style) in events.items()})
            row_of[i] = r
        prev_state = state
    lanes = ["loop"] * (loop_start is not None) + ["coordinator"] + [lane(s) for s in range(slots) if lane(s) in used]
    first = holdings(cfg, path[0][1])
    heads = {name: html_label([f"<B>{name}</B>", _holding_line(h)]) for name, h in first.items() if name in lanes}
    arrows = [(a, b, c) for a, b, c in arrows if a.split("_")[0] in lanes and a != b]
    extra = []
    if loop_start is not None:  # the lasso's loop: one edge up its own lane, left of the coordinator's
        end, begin = len(rows) - 1, row_of.get(loop_start, min(r for i, r in row_of.items() if i >= loop_start))
        heads["loop"] = "loop" if loop_start < last else "stutter"
        extra.append((f"loop_{end}", f"loop_{begin}", {
            "color": "red", "penwidth": "2", "constraint": "false", "class": "loop", "headport": "w", "tailport": "w",
            "xlabel": f"back to {loop_start}" if loop_start < last else "forever"}))
    summary = _final_lines(cfg, path[-1][1])
    return sequence_dot("counterexample", title, lanes, rows, arrows, extra,
                        "\\l".join(summary) + "\\l", heads, unlined=("loop",))


def title_of(cfg: GroupConfig, head: str, configuration: dict | None = None) -> str:
    """A diagram's title: ``head``, then the configuration (protocol, assignor,
    members, topics, faults, mutations) from ``configuration`` (check's
    ``_config_summary``) or, without it, from ``cfg``."""
    c = configuration or {"protocol": cfg.protocol, "assignor": cfg.assignor, "topics": dict(cfg.topics),
                          "mutations": sorted(cfg.mutations)}
    parts = [f"protocol {c['protocol']} ({c['assignor']})", "topics " + ", ".join(f"{t}:{n}" for t, n in c["topics"].items())]
    if "members" in c:
        parts.append(f"{c['members']} members + {c['joiners']} joiner(s)")
    if c.get("faults") is not None:
        parts.append(f"faults {','.join(c['faults']) or 'none'} (budget {c['budget']})")
    parts.append("mutation " + ", ".join(c["mutations"]) if c["mutations"] else "no mutation")
    return head + "\n" + "; ".join(parts)


def to_dot(cfg: GroupConfig, v: Violation, configuration: dict | None = None) -> str:
    """The counterexample's sequence diagram as DOT source (``diagram``), titled with
    the property, the reason and the configuration."""
    return diagram(cfg, v.path, title_of(cfg, f"{v.property} violated: {v.reason}", configuration),
                   v.loop_start, v.reason)


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
    dot = to_dot(cfg, v, extra)
    atomic_write(Path(paths["dot"]), dot.encode())
    svg = svg_of(dot)
    if svg is None:
        paths["svg_error"] = NO_DOT
        return paths
    paths["svg"] = str(stem.with_suffix(".svg"))
    atomic_write(Path(paths["svg"]), svg)
    return paths


def _inline(svg: str) -> str:
    """An SVG document as an element to inline in HTML (no XML declaration, no DOCTYPE)."""
    return svg[svg.index("<svg"):]


def _changes_text(changes: dict) -> str:
    """One step's ``changes`` (to_json) as ``lane: field old → new; ...``."""
    parts = []
    for name, diff in changes.items():
        if isinstance(diff, dict):
            parts += [f"{name}.{k}: {json.dumps(old)} → {json.dumps(new)}" for k, (old, new) in diff.items()]
        else:
            parts.append(f"{name}: {json.dumps(diff[0])} → {json.dumps(diff[1])}")
    return "; ".join(parts)


def html_section(doc: dict, svg: str | None, heading: str) -> str:
    """One execution in an HTML report: ``heading``, its diagram (inline SVG), a table
    of its steps (number, lane, action, what changed) and its final state, from a
    to_json document ``doc``."""
    loop = doc.get("loop_start")
    rows = "".join(
        ("<tr class='loop'>" if loop is not None and s["step"] >= loop else "<tr>") +
        f"<td>{s['step']}</td><td>{escape(s['action']['lane']) if s['action'] else ''}</td>"
        f"<td>{escape(s['action']['text']) if s['action'] else 'initial state'}</td>"
        f"<td>{escape(_changes_text(s['changes'])) if s['action'] else ''}</td></tr>" for s in doc["steps"])
    return (f"<section><h2>{escape(heading)}</h2>"
            + (f"<div class='diagram'>{_inline(svg)}</div>" if svg else f"<p>{escape(NO_DOT)}</p>")
            + "<h3>Steps</h3><table><tr><th>step</th><th>lane</th><th>action</th><th>changes</th></tr>"
            + rows + "</table><h3>Final state</h3><pre>" + escape(json.dumps(doc["final_state"], indent=1))
            + "</pre></section>")


REPORT_STYLE = ("body{font-family:Helvetica,Arial,sans-serif;margin:2em;max-width:1700px}"
                "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;"
                "text-align:left;vertical-align:top}tr.loop{background:#e0ffff}.diagram{overflow-x:auto}"
                "td.violated{color:#b00;font-weight:bold}pre{background:#f6f6f6;padding:1em;font-size:12px}")


def write_report(path: str | Path, title: str, sections, properties=()) -> str:
    """Write one self-contained HTML report (no external file, script or style) to
    ``path``: ``title``, the ``properties`` table (check's ``--json`` rows) and each
    of ``sections`` (``html_section``). Returns the path. Raises OSError."""
    table = "".join(f"<tr><td>{escape(p['name'])}</td><td>{escape(p['kind'])}</td>"
                    f"<td class='{escape(p['status'])}'>{escape(p['status'])}</td><td>{escape(p['expected'])}</td></tr>"
                    for p in properties)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{REPORT_STYLE}</style></head><body><h1>{escape(title)}</h1>"
            + (f"<table><tr><th>property</th><th>kind</th><th>status</th><th>expected</th></tr>{table}</table>"
               if table else "") + "".join(sections) + "</body></html>")
    atomic_write(Path(path), page.encode())
    return str(path)


def write_check_report(out_dir: str | Path, title: str, files: dict, properties) -> str:
    """``<out_dir>/report.html`` for one ``check`` run: the property table and, per
    counterexample written (``files``: property -> ``write``'s paths), its diagram,
    steps and final state. Returns the path."""
    sections = []
    for prop, paths in files.items():
        doc = json.loads(Path(paths["json"]).read_text())
        svg = Path(paths["svg"]).read_text() if paths.get("svg") else None
        sections.append(html_section(doc, svg, f"{prop} violated: {doc['reason']} ({doc['length']} steps)"))
    return write_report(Path(out_dir) / "report.html", title, sections, properties)


def write_replay(cfg: GroupConfig, path, svg_path: str | Path, name: str) -> dict:
    """A replayed scenario (``replay --svg``): its diagram (``diagram``, titled with
    the scenario's ``name`` and ``cfg``) at ``svg_path`` and its HTML report beside
    it (``.html``), folders created. Returns ``{"svg": path, "html": path}``; raises
    ConfigError when graphviz's ``dot`` is missing or the path cannot be written."""
    svg = svg_of(diagram(cfg, path, title_of(cfg, f"replay: {name}")))
    if svg is None:
        raise ConfigError(f"--svg: {NO_DOT}")
    svg_path = Path(svg_path)
    try:
        svg_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(svg_path, svg)
        html = write_report(svg_path.with_suffix(".html"), f"rebalance replay: {name}",
                            [html_section(steps_json(cfg, path), svg.decode(), f"{name} ({len(path) - 1} steps)")])
    except OSError as e:
        raise ConfigError(f"--svg {svg_path}: cannot write there ({e.strerror or e})") from None
    return {"svg": str(svg_path), "html": html}
