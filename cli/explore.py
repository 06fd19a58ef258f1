"""``rebalance explore``: a configuration's state space and its counterexamples as a local
web page on loopback, as Stateright's Explorer does (the browsing: checker/explorer.py).

A page is a position: ``/?path=1.0.4`` is the initial state, then the successors 1, 0
and 4 in turn (the model's handlers run live for each request). It shows the properties
broken there, each lane's process, member id, state (phase and generation, or KIP-848's
state and epoch) and owned and assigned partitions, the enabled actions (each a link one step further), a link one step back,
the counterexample's steps (each a link to that step) and the path so far drawn by the
counterexamples' own renderer (checker/counterexample.py: the SVG, the steps and the
final state of ``check``'s report.html).
"""
from __future__ import annotations

import json
import threading
import urllib.parse
from collections import Counter
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click

from rebalance import examples
from rebalance.checker import counterexample
from rebalance.checker.explorer import Explorer
from rebalance.checker.render import state_view
from rebalance.checker.settings import load_toml, resolve
from rebalance.model.config import ConfigError
from rebalance.model.mutations import REGISTRY

HOST = "127.0.0.1"  # loopback only: the page runs the model for whoever asks
STYLE = counterexample.REPORT_STYLE + (
    "nav a,section.cx a{margin-right:1em}.current{font-weight:bold;background:#ffffb0}"
    "li.broken,.twice{color:#b00;font-weight:bold}td.owned,td.assigned{font-family:monospace}")


def href(choices) -> str:
    """The page of a position (successor indices from the initial state)."""
    return "/?path=" + ".".join(map(str, choices)) if choices else "/"


def parse(query: str) -> list:
    """The successor indices of a page's ``path`` parameter. Raises ConfigError."""
    value = urllib.parse.parse_qs(query).get("path", [""])[0]
    try:
        return [int(x) for x in value.split(".")] if value else []
    except ValueError:
        raise ConfigError(f"path {value!r}: expected successor indices separated by dots, e.g. 1.0.4") from None


class Page:
    """The pages of one configuration (``explorer``) and, if given, one counterexample
    (``cx``: its document, ``check``'s JSON; ``cx_choices``: its steps as successor
    indices); ``name``: what the title calls the configuration."""

    def __init__(self, explorer: Explorer, name: str, cx: dict | None = None, cx_choices=()):
        self.explorer, self.name, self.cx, self.cx_choices = explorer, name, cx, list(cx_choices)
        self.lock = threading.Lock()  # one page at a time: the system's memos are shared

    def render(self, choices: list) -> str:
        """The HTML page of position ``choices``. Raises ConfigError (not a position)."""
        with self.lock:
            e, cfg = self.explorer, self.explorer.cfg
            path = e.path(choices)
            state = path[-1][1]
            broken = e.broken(path)
            dot = e.diagram(path, broken)
            enabled = e.enabled(state)
        svg = counterexample.svg_of(dot)
        view = state_view(cfg, state)
        holdings = counterexample.holdings(cfg, state)
        step = len(choices)
        nav = (f"<nav><a id='initial' href='/'>initial state</a>"
               + (f"<a id='back' href='{href(choices[:-1])}'>step back</a>" if choices else "")
               + f"<span id='step'>step {step}</span></nav>")
        rows = (f"<tr data-lane='coordinator'><td>coordinator</td><td></td><td></td>"
                f"<td>{_fields(view['coordinator'])}</td><td></td><td></td></tr>")
        owners = Counter(x for owned, _ in holdings.values() for x in owned)
        twice = {x for x, n in owners.items() if n > 1}
        for name, p in view.items():
            if name in ("coordinator", "faults_left"):
                continue
            owned, assigned = holdings.get(name, ((), ()))
            rows += (f"<tr data-lane='{name}'><td>{name}</td><td>{escape(p['process'])}</td>"
                     f"<td>{escape(p.get('member_id', ''))}</td><td>{_fields(p, ('process', 'member_id'))}</td>"
                     f"<td class='owned'>{_partitions(owned, twice)}</td>"
                     f"<td class='assigned'>{_partitions(assigned)}</td></tr>")
        lanes = ("<section id='lanes'><h2>Lanes</h2><table><tr><th>lane</th><th>process</th><th>member id</th>"
                 "<th>state</th><th>owned</th><th>assigned (coordinator)</th></tr>"
                 f"{rows}</table><p>faults left: {view['faults_left']}</p></section>")
        props = ("<section id='broken'><h2>Properties broken here</h2>"
                 + ("<ul>" + "".join(f"<li class='broken' data-property='{b.name}'>{b.name}: {escape(b.reason)}</li>"
                                     for b in broken) + "</ul>" if broken
                    else "<p>none of the invariants and step checks (liveness is `rebalance check`'s)</p>")
                 + "</section>")
        actions = ("<section id='actions'><h2>Enabled actions</h2>"
                   + ("<ol start='0'>" + "".join(
                       f"<li><a class='action' data-kind='{kind}' data-lane='{lane}' href='{href(choices + [i])}'>"
                       f"{escape(text)}</a></li>" for i, (kind, lane, text) in enumerate(enabled))
                      + "</ol>" if enabled else "<p>none: the execution ends here</p>") + "</section>")
        doc = counterexample.steps_json(cfg, path)
        body = (f"<h1>rebalance explore: {escape(self.name)}</h1>{nav}{self._cx(choices)}{props}{lanes}{actions}"
                + counterexample.html_section(doc, svg and svg.decode(), f"The path to step {step}"))
        return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>rebalance explore: step {step}</title>"
                f"<style>{STYLE}</style></head><body>{body}</body></html>")

    def _cx(self, choices: list) -> str:
        """The counterexample's steps, each a link to its position; the violating one
        ``#violating-step``, the one shown marked ``current``."""
        if self.cx is None:
            return ""
        last = len(self.cx_choices)
        items = []
        for k, s in enumerate(self.cx["steps"]):
            mark = " current" if choices == self.cx_choices[:k] else ""
            ident = " id='violating-step'" if k == last and self.cx.get("loop_start") is None else ""
            text = s["action"]["text"] if s["action"] else "initial state"
            items.append(f"<li><a class='cx-step{mark}'{ident} data-step='{k}' href='{href(self.cx_choices[:k])}'>"
                         f"{escape(text)}</a></li>")
        loop = self.cx.get("loop_start")
        loop = "" if loop is None else f" (a lasso: the loop starts at step {loop})"
        return (f"<section class='cx' id='counterexample'><h2>Counterexample: {escape(self.cx['property'])} "
                f"violated: {escape(self.cx['reason'])}{loop}</h2><ol start='0'>{''.join(items)}</ol></section>")


def _fields(view: dict, skip=()) -> str:
    """A lane's one-value fields (``state_view``'s: phase, generation, leader, ...; the
    consumer protocol's state and epochs) as ``name value`` pairs."""
    return ", ".join(f"{escape(k)} {escape(str(v))}" for k, v in view.items()
                     if k not in skip and not isinstance(v, (dict, list)) and v is not None)


def _partitions(names, twice=frozenset()) -> str:
    """Partition names as spans, those in ``twice`` (owned by two lanes) marked red."""
    return ", ".join(f"<span class='partition{' twice' if n in twice else ''}'>{escape(n)}</span>" for n in names)


def handler(page: Page):
    """The HTTP handler of ``page``'s positions: GET ``/`` (``?path=``) only."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):  # a page per click: no log line each
            pass

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path != "/":
                return self._answer(404, f"<p>no page {escape(url.path)}: <a href='/'>the initial state</a></p>")
            try:
                return self._answer(200, page.render(parse(url.query)))
            except ConfigError as e:
                return self._answer(404, f"<p class='error'>{escape(str(e))}: <a href='/'>the initial state</a></p>")

        def _answer(self, status: int, html: str) -> None:
            body = html.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _counterexample(explorer: Explorer, path: str) -> tuple:
    """``(document, choices)`` of a counterexample file. Raises ConfigError."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"--counterexample {path}: cannot read it ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"--counterexample {path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("property"), str) or "reason" not in doc:
        raise ConfigError(f"--counterexample {path}: not a counterexample written by `rebalance check` "
                          "(no property and reason)")
    return doc, explorer.choices_of(doc, f"--counterexample {path}")


@click.command()
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--example", metavar="NAME",
              help=f"A shipped configuration by name instead of CONFIG: {', '.join(examples.names('check'))}.")
@click.option("--mutation", "mutations", multiple=True, type=click.Choice(sorted(REGISTRY)), metavar="NAME",
              help="Switch on a known-bad behaviour, as check's --mutation (its --help lists them; repeatable).")
@click.option("--counterexample", "cx_path", type=click.Path(dir_okay=False), metavar="JSON",
              help="A counterexample `rebalance check` wrote for this configuration (OUT/<property>.json): "
                   "every page lists its steps as links, and the URL printed opens its violating step.")
@click.option("--port", default=3000, show_default=True, type=click.IntRange(0, 65535),
              help="Port on 127.0.0.1 (loopback only); 0: a free one, the URL printed says which.")
def explore(config, example, mutations, cx_path, port):
    """Browse the state space in a web browser, one step at a time.

    Serves a page on http://127.0.0.1:PORT/ that starts at the initial state
    `rebalance check` explores from (the same CONFIG, --example or defaults) and
    lists the actions enabled there; each is a link one step further, run live
    by the model's own handlers, with a link one step back. Each page shows the
    properties broken at that step, every lane's member id, generation and
    owned and assigned partitions, and the path so far drawn as a counterexample
    is (sequence diagram, steps, final state).

    \b
    rebalance check wrong.toml --out out           writes out/exclusive_ownership.json, ...
    rebalance explore wrong.toml --counterexample out/exclusive_ownership.json
    rebalance explore --example default --port 0

    With --counterexample, the file's steps are replayed against CONFIG first
    (exit 2 if one is not an enabled action there) and listed as links on every
    page. Stop with Ctrl-C. Exit codes: 0 stopped, 1 the port is taken, 2 bad input.
    """
    if example and config:
        raise click.UsageError("give a CONFIG file or --example NAME, not both")
    if example:
        config = examples.path(example, "check")
    explorer = Explorer(resolve(load_toml(config) if config else {}, mutations=mutations))
    doc, choices = _counterexample(explorer, cx_path) if cx_path else (None, [])
    page = Page(explorer, str(config or "the defaults"), doc, choices)
    try:
        server = ThreadingHTTPServer((HOST, port), handler(page))
    except OSError as e:
        raise click.ClickException(f"cannot listen on {HOST}:{port}: {e.strerror or e}")
    server.daemon_threads = True
    base = f"http://{HOST}:{server.server_address[1]}"
    click.echo(f"exploring {page.name} on {base}/ (Ctrl-C stops)")
    if doc is not None:
        click.echo(f"{doc['property']}'s counterexample, its last step: {base}{href(choices)}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
