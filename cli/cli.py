"""The ``rebalance`` command line.

Exit codes (the design brief's command-line contract): 0 every property holds (or breaks only where the
configuration expects it to), 1 a property is violated (counterexample written),
2 bad input (the message names the problem), 3 incomplete (a limit was hit).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from rebalance import examples
from rebalance.checker import counterexample, junit, prove_bounds, replay as replaying, streams_replay, vectors as vectors_module
from rebalance.checker.campaign import DEFAULT_SIZES
from rebalance.checker.simulation import DEFAULT_HORIZON_MS, Timing
from rebalance.checker.situations import SITUATIONS
from rebalance.checker.streams_simulation import (
    DEFAULT_RESTORE_MS, DEFAULT_SCALE_DOWN_MS, DEFAULT_SIZES as STREAMS_SIZES, SITUATIONS as STREAMS_SITUATIONS,
    VARIANTS,
)
from rebalance.checker.render import lane, partitions as partition_names
from rebalance.checker.engines.checkpoint import INTERVAL_S as CHECKPOINT_INTERVAL_S, Checkpoint, run_key
from rebalance.checker.engines.explore import explore, fair_except_timers, storm_result
from rebalance.checker.engines.guards import DEFAULT_MAX_MEMORY_MB, Guard, peak_rss_mb, reach_warning
from rebalance.checker.findings import covers as finding_covers, declared, pinned
from rebalance.checker.properties import applicable, applicable_covers, concrete_reason
from rebalance.checker.settings import ALL_PROTOCOLS, ENGINES, CheckSettings, load_toml, resolve
from rebalance.checker.system import FAULTS, KIP345_FAULTS, Storm, System
from rebalance.extras import DISTRIBUTION, require
from rebalance.progress import Reporter
from rebalance.model.config import CONSUMER_PROTOCOLS, ConfigError
from rebalance.model.mutations import REGISTRY
from rebalance.spec.actions import SPEC_MUTATIONS
from rebalance.spec.consumer_actions import SPEC_MUTATIONS as KIP848_SPEC_MUTATIONS

EXIT_HOLDS, EXIT_VIOLATED, EXIT_BAD_INPUT, EXIT_INCOMPLETE = 0, 1, 2, 3

err = Console(stderr=True, soft_wrap=True)  # no hard wrapping: a log line stays one line
out = Console(soft_wrap=True)


class _PipeSafe:
    """stdout whose reader may go away (``rebalance check ... | head``): once a write or a
    flush meets the closed pipe, the rest of the output goes to /dev/null, so the command
    ends with its own exit code (3 stays 3) instead of a BrokenPipeError's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())  # what is still buffered, and the exit's flush, go nowhere
        os.close(devnull)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class Group(click.Group):
    """Bad input, for every command: a ConfigError or a click usage error (a bad
    option) exits 2 with the message on stderr and, when the command line asks
    for ``--json``, one object ``{"error": {"message", "exit_code": 2, "command"}}``
    on stdout (the design brief: every command prints one JSON object under
    --json, errors included); another click error (e.g. serve's "cannot listen")
    keeps its exit code, in the same shape. ``conform`` adds the trace's ``line``
    and ``reason`` (checker/conform/run.py malformed_error). A command's own exits
    (0, 1, 3) pass untouched."""

    def main(self, *args, **kwargs):
        if not isinstance(sys.stdout, _PipeSafe):
            sys.stdout = _PipeSafe(sys.stdout)
        return super().main(*args, **kwargs)

    def parse_args(self, ctx, args):
        ctx.meta["json"] = "--json" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (ConfigError, click.ClickException) as e:
            message = e.format_message() if isinstance(e, click.ClickException) else str(e)
            if ctx.meta.get("json"):
                code = e.exit_code if isinstance(e, click.ClickException) else EXIT_BAD_INPUT
                click.echo(json.dumps({"error": {"message": message, "exit_code": code,
                                                 "command": ctx.invoked_subcommand}}))
            if isinstance(e, click.ClickException):
                raise
            err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
            ctx.exit(EXIT_BAD_INPUT)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name=DISTRIBUTION)
def main():
    """Kafka-style group rebalancing: specification, model checker, reference.

    \b
    rebalance check                      model-check the default bound
    rebalance check --example default    a shipped configuration (the main job); or a CONFIG.toml
    rebalance check --protocol eager --faults join,leave,crash --json
    rebalance replay --example design1_member_joins   a shipped scenario; or a SCENARIO.toml
    rebalance prove                      z3 proofs: assignors, stickiness, inductive invariant
    rebalance conform trace.jsonl        a recorded trace against the model: every divergence and its rule
    """


def _summary(settings: CheckSettings, result, props, covers, files) -> dict:
    expected = settings.expect_violated
    unexpected = [v for v in result.violations if v.property not in expected]
    if unexpected:
        verdict = "violated"
    elif result.limit:
        verdict = "incomplete"
    else:
        verdict = "holds"
    chosen = (unexpected or result.violations or [None])[0]
    return {
        "verdict": verdict,
        "distinct_states": result.distinct_states,
        "transitions": result.transitions,
        "max_depth": result.max_depth,
        "seconds": round(result.seconds, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        # the visited set's 64-bit fingerprints (checker/engines/interning.py; None: the engine does not say)
        "collision_probability": result.collision_probability,
        "limit": result.limit,
        "properties": [{"name": p.name, "kind": p.kind, "status": result.statuses[p.name],
                        "expected": "violated" if p.name in expected else "holds"} for p in props],
        "actions_fired": dict(sorted(result.actions_fired.items())),
        "covers": [{"name": c.name, "description": c.description, "reached": result.covers.get(c.name, False)}
                   for c in covers],
        "counterexample": None if chosen is None else {
            "property": chosen.property, "reason": chosen.reason, "length": len(chosen.path) - 1,
            "loop_start": chosen.loop_start, "files": files[chosen.property]},
        "counterexamples": [{"property": v.property, "length": len(v.path) - 1, "files": files[v.property]}
                            for v in result.violations],
        "configuration": _config_summary(settings),
    }


def _config_summary(s: CheckSettings) -> dict:
    return {"protocol": s.group.protocol, "assignor": s.group.assignor,
            "topics": dict(s.group.topics), "members": s.members, "joiners": s.joiners,
            "static": sorted(lane(x) for x in s.static),
            "faults": list(s.faults), "budget": s.budget, "mutations": sorted(s.group.mutations),
            "spec_mutations": sorted(s.spec_mutations),
            "timer_fairness": s.timer_fairness, "engine": s.engine, "workers": s.workers,
            "max_states": s.max_states, "max_depth": s.max_depth} | (
                {"upgrade": True} if s.group.upgrade else {}) | ({} if s.timing is None else {"timed": {
                    "tick_ms": s.timing.tick_ms, "session_timeout_ms": s.timing.timeouts.session_ms,
                    "rebalance_timeout_ms": s.timing.timeouts.rebalance_ms,
                    "initial_rebalance_delay_ms": s.timing.initial_delay_ms} | (
                    {"heartbeat_interval_ms": s.timing.heartbeat_interval_ms} if s.group.protocol == "consumer"
                    else {})}) | ({} if s.initial is None else {
                "initial": {"generation": s.initial.generation, "leader": lane(s.initial.leader),
                            "owned": {lane(k): partition_names(s.group, v) for k, v in sorted(s.initial.owned.items())}},
                "prefix": [f"{lane(slot)} {action}" if slot >= 0 else action for action, slot, _ in s.prefix]})


def _print_report(settings: CheckSettings, summary: dict, result, show_trace) -> None:
    c = summary["configuration"]
    out.print(f"[bold]rebalance check[/]: {c['protocol']} ({c['assignor']}), {c['members']} members + "
              f"{c['joiners']} joiner(s), topics {c['topics']}, faults {','.join(c['faults']) or 'none'} "
              f"(budget {c['budget']})" + (f", mutations {','.join(c['mutations'])}" if c["mutations"] else ""),
              highlight=False)
    if "initial" in c:
        i = c["initial"]
        owned = ", ".join(f"{m}({', '.join(ps)})" for m, ps in i["owned"].items())
        out.print(f"from [initial]: generation {i['generation']}, leader {i['leader']}, {owned}"
                  + (f"; after [[prefix]]: {', '.join(c['prefix'])}" if c["prefix"] else ""),
                  highlight=False, markup=False)
    table = Table(show_edge=False)
    for col in ("property", "kind", "status", "expected"):
        table.add_column(col)
    colors = {"holds": "green", "violated": "red", "incomplete": "yellow"}
    for p in summary["properties"]:
        status = p["status"]
        table.add_row(p["name"], p["kind"], f"[{colors[status]}]{status}[/]", p["expected"])
    out.print(table)
    rate = result.distinct_states / max(result.seconds, 1e-9)
    out.print(f"{result.distinct_states:,} distinct states, {result.transitions:,} transitions, "
              f"depth {result.max_depth}, {result.seconds:.1f} s ({rate:,.0f} states/s), "
              f"peak RSS {summary['peak_rss_mb']:,.0f} MB", highlight=False)
    if result.collision_probability is not None:
        out.print(f"fingerprint collision probability (TLC's optimistic estimate): "
                  f"{result.collision_probability:.1e}", highlight=False)
    out.print("actions fired: " + ", ".join(f"{k} {v:,}" for k, v in summary["actions_fired"].items()),
              highlight=False)
    out.print("covers: " + ", ".join(f"{c['name']} [{'green' if c['reached'] else 'yellow'}]"
                                    f"{'reached' if c['reached'] else 'not reached'}[/]" for c in summary["covers"]))
    if result.limit:
        out.print(f"[yellow]incomplete:[/] stopped at {result.limit}", highlight=False)
    for v in result.violations:
        files = next(x["files"] for x in summary["counterexamples"] if x["property"] == v.property)
        if show_trace:
            out.print(counterexample.text_trace(settings.group, v), highlight=False, markup=False)
        out.print(f"counterexample files: {files['json']} {files['dot']} {files.get('svg') or ''} {files['html']}",
                  highlight=False)
        if files.get("svg_error"):
            err.print(f"[yellow]warning:[/] no SVG: {files['svg_error']}")
    verdict = summary["verdict"]
    out.print(f"verdict: [bold {colors[verdict]}]{verdict}[/]")


@main.command()
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--protocol", type=click.Choice(ALL_PROTOCOLS), help="Rebalance protocol (default: the file's, else cooperative).")
@click.option("--assignor", help="Leader's assignor: range, roundrobin, sticky, cooperative-sticky (streams: streams, "
                                 "or KIP-441's high-availability), or your own as module:function (model/assignors.py assign_plugin gives its signature).")
@click.option("--members", type=int, help="Members running at the start (default 3).")
@click.option("--joiners", type=int, help="Further client slots a join fault can start (default 1).")
@click.option("--partitions", type=int, help="One topic 't' with this many partitions (default 4).")
@click.option("--timed/--no-timed", "timed", default=None,
              help="The timed mode (docs/timed.md): a discrete clock, each coordinator timer firing at its deadline "
                   "([time] tick_ms, session_timeout_ms, rebalance_timeout_ms), instead of at any time once the "
                   "members it waits for are silent.")
@click.option("--connectors", type=int,
              help="Deferred and incremental: Kafka Connect's connectors (topic 'connector'), a resource kind "
                   "balanced apart from the partitions, its tasks (default 0: one kind; spec R66).")
@click.option("--static", "static", is_flag=True, default=None,
              help="Every member is static (KIP-345 group.instance.id).")
@click.option("--tasks", type=int, help="Streams: tasks (default 4, the last one stateless).")
@click.option("--stateless", type=int, help="Streams: how many of the tasks (the last ones) are stateless (default 1).")
@click.option("--standby", type=int, help="Streams: num.standby.replicas (default 1, at most --members).")
@click.option("--streams-version", help="Streams: the seed's algorithm version, 1.0 or 2.0 (default 2.0).")
@click.option("--rejoin", help="Streams: conservative (rejoin once all learners are ready, default) or eager.")
@click.option("--max-warmup", type=int, help="Streams, --assignor high-availability (KIP-441): max.warmup.replicas "
                                             "(default 2, at least 1).")
@click.option("--faults", help=f"Comma-separated fault kinds: {','.join(FAULTS)} (the default, all of them; "
                               "under streams, leave is the scale-down tool marking a member leaving soon); also, "
                               "off unless named: subscribe (a member switches to one of [faults] resubscriptions, "
                               "R63), create-topic (one of [group] created_topics is created, R62), "
                               "delete-connector (one of [group] deletable_connectors is deleted, R81), and "
                               f"KIP-345's {','.join(KIP345_FAULTS)}: an admin client removes a static member by "
                               "group.instance.id, the coordinator fails over to its stored record, a crashed static "
                               "member restarts without group.instance.id.")
@click.option("--max-faults", "budget", type=int, help="Fault budget: faults per execution (default 2).")
@click.option("--mutation", "mutations", multiple=True, type=click.Choice(sorted(REGISTRY)),
              help="Switch on a known-bad behaviour (repeatable).")
@click.option("--spec-mutation", "spec_mutations", multiple=True,
              type=click.Choice(sorted({**SPEC_MUTATIONS, **KIP848_SPEC_MUTATIONS})),
              help="Check the model against a deliberately wrong spec action (the refinement check then "
                   "fails naming it; repeatable).")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="local: one process (or --workers); spark: partition owners on Spark, one per core, "
                   "exchanging successors per BFS level (same counts, verdicts and counterexamples).")
@click.option("--workers", type=int, default=1, show_default=True,
              help="Processes of the local engine: states partitioned among them by fingerprint, each with its "
                   "own visited table, successors exchanged per BFS level (same counts, verdicts and "
                   "counterexamples as one). Liveness is decided in the main process on the gathered graph.")
@click.option("--spark-master", default="local[*]", show_default=True,
              help="Spark master URL for --engine spark (local mode by default; one partition owner per core).")
@click.option("--max-states", type=int, help="Stop after this many distinct states (0: no limit).")
@click.option("--max-depth", type=int, help="Explore at most this many steps deep (0: no limit).")
@click.option("--max-seconds", type=click.FloatRange(0, min_open=True),
              help="Stop after this many wall seconds (exit 3 with the figures reached).")
@click.option("--max-memory", type=click.IntRange(0),
              help=f"Stop past this resident set, MB (exit 3; default 80% of physical memory, "
                   f"{DEFAULT_MAX_MEMORY_MB:,} MB here; 0: no limit).")
@click.option("--checkpoint", "checkpoint_dir", type=click.Path(file_okay=False),
              help="Save the exploration into DIR (new or empty) at the end of a breadth-first level, every "
                   "--checkpoint-interval seconds and before the liveness analysis, atomically (a run killed while "
                   "writing one keeps the one before), so that a run killed, or stopped by --max-seconds, "
                   "--max-memory or --max-states, goes on with --resume DIR. DIR grows with the states and "
                   "transitions explored. Exhaustive exploration by the local engine in one process only "
                   "(not --walks, --workers, --engine spark).")
@click.option("--checkpoint-interval", type=click.FloatRange(0),
              help="With --checkpoint or --resume: the least seconds between two checkpoints (0: every level; "
                   f"default {CHECKPOINT_INTERVAL_S:.0f}).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False),
              help="Go on from the last checkpoint in DIR (written by --checkpoint DIR), checkpointing on into it: "
                   "the same counts, verdicts and counterexamples as a run that never stopped. Give the options the "
                   "run was started with (the limits may differ): a checkpoint of another configuration, property "
                   "set or rebalance version is refused (exit 2), as is a missing or corrupt one. E.g. "
                   "`rebalance check --max-faults 3 --checkpoint ck --max-seconds 600`, then "
                   "`rebalance check --max-faults 3 --resume ck`.")
@click.option("--walks", type=click.IntRange(1),
              help="Instead of exploring every interleaving, check the safety properties along this many random "
                   "walks (TLC's simulation mode: for configurations beyond exhaustive reach).")
@click.option("--depth", type=click.IntRange(1), help="Steps per walk (--walks; default 100).")
@click.option("--seed", type=int, default=1, show_default=True,
              help="Seed of the walks (--walks): the same seed gives the same walks and verdict.")
@click.option("--continue", "keep_going", is_flag=True, default=None,
              help="Keep exploring after a violation, so every property gets a definite status.")
@click.option("--expect-finding", "findings", multiple=True,
              help="A known finding of Kafka's protocol (spec/SPEC.md section 11: F1, F2, F4) to expect: states of "
                   "its shape are no violation of its property (repeatable; none: expect none; default: those the "
                   "configuration reaches).")
@click.option("--no-timer-fairness", "timer_fairness", flag_value=False, default=None,
              help="Drop weak fairness on timers (eventual_balance then fails by stuttering).")
@click.option("--require-covers", is_flag=True,
              help="Exit 1 when a cover is not reached, as for a violation: in CI, a pass over nothing fails.")
@click.option("--example", metavar="NAME",
              help="Check a shipped example configuration by name instead of a CONFIG file: "
                   f"{', '.join(examples.names('check'))} (rebalance.examples).")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False),
              help="Also write a JUnit XML report, one test case per property (a violated one a failure with "
                   "its counterexample), for CI.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--out", "out_dir", default="out", show_default=True, type=click.Path(file_okay=False),
              help="Where counterexample files go.")
def check(config, protocol, assignor, members, joiners, partitions, timed, connectors, static, tasks, stateless,
          standby, streams_version,
          rejoin, max_warmup, faults, budget, mutations, spec_mutations, engine, workers, spark_master, max_states,
          max_depth, max_seconds,
          max_memory, checkpoint_dir, checkpoint_interval, resume_dir, walks, depth, seed, keep_going, findings,
          timer_fairness, require_covers, example, junit_path, as_json, out_dir):
    """Model-check every interleaving within the bound.

    Explores, breadth first, every interleaving of message deliveries, heartbeats,
    coordinator timers, offset commits and faults (join, leave, crash, restart,
    pause/resume) within the fault budget, up to renaming of generations and
    member ids, checking exclusive_ownership (no two members that can both
    commit a partition at one instant), exclusive_commits (on the commits the
    coordinator accepts), exclusive_processing, single_leader, revoke_before_assign
    (cooperative), quiescent_balance and, under weak fairness of the protocol's
    own actions once faults stop, eventual_balance (◇□ balanced) and
    no_rebalance_storm (finitely many rebalances); and refinement: every
    step is an action of the declarative spec (spec/actions.py: pre- and
    post-condition over the abstract state) and every state satisfies the spec's
    inductive invariant (--spec-mutation NAME breaks a spec action on purpose:
    the check then fails naming it). With --walks N, the safety properties are
    checked along N random walks of --depth steps instead (checker/engines/walks.py),
    the violation found shortened. A violation's shortest
    counterexample (a lasso for a liveness property) is written under --out as
    JSON, ITF (Apalache ADR-015, <property>.itf.json), DOT and SVG. --junit FILE
    writes a JUnit XML report (checker/junit.py) for CI.

    \b
    Exit codes: 0 holds, 1 violated (or, with --require-covers, a cover not
    reached: `uncovered` in --json), 2 bad input, 3 incomplete (a limit was hit:
    --max-states, --max-depth, --max-seconds, --max-memory).

    A long run can be checkpointed at every breadth-first level (--checkpoint
    DIR) and resumed after a kill or a limit (--resume DIR), as TLC's -recover:
    docs/explanation/checking.md, "Checkpoint and resume".
    """
    if example and config:
        raise click.UsageError("give a CONFIG file or --example NAME, not both")
    if example:
        config = examples.path(example, "check")
    data = load_toml(config) if config else {}
    settings = resolve(data, protocol=protocol, assignor=assignor, members=members, partitions=partitions,
                       faults=faults, budget=budget, mutations=mutations, engine=engine, workers=workers,
                       max_states=max_states, max_depth=max_depth, keep_going=keep_going,
                       timer_fairness=timer_fairness, static=static, spec_mutations=spec_mutations,
                       connectors=connectors, joiners=joiners, timed=timed, findings=findings,
                       streams={k: v for k, v in (("tasks", tasks), ("stateless", stateless), ("standby_replicas", standby),
                                                  ("version", streams_version), ("rejoin", rejoin),
                                                  ("max_warmup_replicas", max_warmup)) if v is not None})
    max_memory = DEFAULT_MAX_MEMORY_MB if max_memory is None else max_memory or None
    guard = Guard(max_seconds, max_memory)
    if depth is not None and walks is None:
        raise click.UsageError("--depth is the length of each random walk: it needs --walks")
    if walks and settings.workers > 1:
        raise click.UsageError("--workers splits an exhaustive exploration; --walks runs on one process "
                               "(or on Spark: --engine spark)")
    if checkpoint_interval is not None and not (checkpoint_dir or resume_dir):
        raise click.UsageError("--checkpoint-interval needs --checkpoint DIR or --resume DIR")
    if checkpoint_dir and resume_dir:
        raise click.UsageError("--resume DIR goes on checkpointing into DIR: give it without --checkpoint")
    if (checkpoint_dir or resume_dir) and (walks or settings.workers > 1 or settings.engine != "local"):
        raise click.UsageError("--checkpoint and --resume apply to an exhaustive exploration by the local engine "
                               "in one process (not --walks, --workers or --engine spark)")
    warnings = [w for w in (None if walks else reach_warning(settings, max_seconds, max_memory),) if w]
    for w in warnings:
        err.print(f"[yellow]warning:[/] {w}", highlight=False)
    system = settings.system()
    expected = declared(system, settings.findings)  # known findings, excused in their shape only
    props = pinned(applicable(system), expected)
    covers = applicable_covers(system) + finding_covers(expected)
    try:
        system.initial()  # settled once here: an initial group that never settles is a violation, not a crash
    except Storm as storm:
        storm_at_start = storm
    else:
        storm_at_start = None
    if walks and not storm_at_start:
        _walks(settings, system, props, walks, depth or 100, seed, spark_master, guard, as_json, out_dir,
               junit_path and (junit_path, _suite(config)))
    # a property decided by its own lasso search needs the whole space: it never stops the run
    stop_on = frozenset() if settings.keep_going else frozenset(
        p.name for p in props if p.name not in settings.expect_violated and not p.lasso)
    fair = None if settings.timer_fairness else fair_except_timers
    kwargs = dict(max_states=settings.max_states, max_depth=settings.max_depth, stop_on=stop_on,
                  covers=covers, fair=fair, guard=guard)
    if settings.engine == "spark":
        from rebalance.checker.engines.spark import explore_spark
        engine = lambda **more: explore_spark(system, props, master=spark_master, **kwargs, **more)  # noqa: E731
    elif settings.workers > 1:
        from rebalance.checker.engines.workers import explore_workers
        engine = lambda **more: explore_workers(system, props, settings.workers, **kwargs, **more)  # noqa: E731
    else:
        engine = lambda **more: explore(system, props, **kwargs, **more)  # noqa: E731
    if checkpoint_dir or resume_dir:
        kwargs["checkpoint"] = ck = Checkpoint(checkpoint_dir or resume_dir, resume=bool(resume_dir),
                                               interval_s=CHECKPOINT_INTERVAL_S if checkpoint_interval is None
                                               else checkpoint_interval)
        ck.bind(run_key(system, props, covers, stop_on, fair))  # a mismatch refused before anything runs
        if ck.last is not None:
            err.print(f"resuming from {resume_dir}: the checkpoint at depth {ck.last[0]} ({ck.last[1]:,} states)",
                      highlight=False)
    with Reporter(err, checkpoint=kwargs.get("checkpoint")) as reporter:  # a live line, else one every INTERVAL_S
        if storm_at_start:  # the initial state never settles: a violation, with its lasso (exit 1)
            result = storm_result(system, props, storm_at_start, covers)
        else:
            result = engine(progress=reporter.update)
        reporter.enter("counterexamples")
        result.violations = [dataclasses.replace(v, reason=concrete_reason(system, v)) for v in result.violations]
        files = {v.property: counterexample.write(settings.group, v, out_dir, _config_summary(settings))
                 for v in result.violations}
    summary = _summary(settings, result, props, covers, files) | {"warnings": warnings}
    if kwargs.get("checkpoint") is not None:
        ck = kwargs["checkpoint"]
        summary["checkpoint"] = {"dir": checkpoint_dir or resume_dir, "resumed": bool(resume_dir),
                                 "written": ck.written, "depth": ck.last and ck.last[0],
                                 "distinct_states": ck.last and ck.last[1]}
    if files:  # one self-contained HTML report per run: every counterexample's diagram, steps and final state
        report = counterexample.write_check_report(out_dir, _suite(config), files, summary["properties"])
        summary["report"] = report
        for paths in files.values():
            paths["html"] = report
    uncovered = [c["name"] for c in summary["covers"] if not c["reached"]]
    if require_covers and uncovered and summary["verdict"] == "holds":
        summary |= {"verdict": "violated", "uncovered": uncovered}  # vacuity, by the user's own standard
    if junit_path:
        junit.write(junit_path, _suite(config), junit.check_cases(summary), summary["seconds"])
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        _print_report(settings, summary, result, show_trace=True)
        if summary.get("uncovered"):
            err.print(f"[bold red]covers not reached (--require-covers):[/] {', '.join(uncovered)}", highlight=False)
    sys.exit({"holds": EXIT_HOLDS, "violated": EXIT_VIOLATED, "incomplete": EXIT_INCOMPLETE}[summary["verdict"]])


def _suite(config) -> str:
    """The JUnit suite's name: the command that was checked."""
    return f"rebalance check {config or ''}".strip()


def _walks(settings, system, props, walks, depth, seed, spark_master, guard, as_json, out_dir, junit_to=None):
    """``check --walks``: the walks engine (checker/engines/walks.py), its report and exit code;
    ``junit_to``: ``(path, suite name)`` for a JUnit XML report, or None."""
    from rebalance.checker.engines import walks as walking
    names = walking.checked_names(props, settings.expect_violated)
    if settings.engine == "spark":
        result = walking.walks_spark(system, names, walks, depth, seed, spark_master, guard)
    else:
        result = walking.walks_local(system, names, walks, depth, seed, guard)
    v = result.violation
    files = v and counterexample.write(settings.group, v, out_dir, _config_summary(settings))
    if files:
        files["html"] = counterexample.write_check_report(
            out_dir, f"rebalance check --walks {walks} --seed {seed}", {v.property: files}, ())
    summary = walking.summary(result, props, settings.expect_violated, walks, depth, seed, files) | {
        "peak_rss_mb": round(peak_rss_mb(), 1), "configuration": _config_summary(settings), "warnings": []}
    if junit_to:
        junit.write(*junit_to, junit.check_cases(summary), summary["seconds"])
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        colors = {"violated": "red", "not violated": "green", "not checked": "yellow", "holds": "green",
                  "incomplete": "yellow"}
        for p in summary["properties"]:
            out.print(f"{p['name']:<28} {p['kind']:<10} [{colors[p['status']]}]{p['status']}[/]")
        out.print(f"{result.walks:,} walks (seed {seed}, depth {depth}), {result.steps:,} steps, "
                  f"{result.seconds:.1f} s ({summary['walks_per_second']:,} walks/s), "
                  f"peak RSS {summary['peak_rss_mb']:,.0f} MB", highlight=False)
        if result.limit:
            out.print(f"[yellow]incomplete:[/] stopped at {result.limit}", highlight=False)
        if v:
            out.print(f"walk {result.walks - 1} violates {v.property} after {result.prefix_length} steps; "
                      f"shortened to {len(v.path) - 1}", highlight=False)
            out.print(counterexample.text_trace(settings.group, v), highlight=False, markup=False)
            out.print(f"counterexample files: {files['json']} {files['dot']} {files.get('svg') or ''}",
                      highlight=False)
        out.print(f"verdict: [bold {colors[summary['verdict']]}]{summary['verdict']}[/]")
    sys.exit({"holds": EXIT_HOLDS, "violated": EXIT_VIOLATED, "incomplete": EXIT_INCOMPLETE}[summary["verdict"]])


@main.command()
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--mutation", "mutations", multiple=True,
              help="Switch on a mutation (model/mutations.py REGISTRY), e.g. connect-leader-state to replay a "
                   "Design II scenario as Kafka Connect behaves; repeatable.")
@click.option("--assignor", help="The leader's assignor instead of the scenario's: a built-in name or your own as "
                                "module:function (model/assignors.py assign_plugin).")
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False),
              help="Also draw the replay as a sequence diagram (SVG) at this path, with an HTML report beside it.")
@click.option("--example", metavar="NAME",
              help="Replay a shipped scenario by name instead of a SCENARIO file: "
                   f"{', '.join(examples.names('replay'))} (rebalance.examples).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def replay(scenario, mutations, assignor, svg_path, example, as_json):
    """Run one scripted scenario deterministically, checking every property.

    The scenario (TOML) gives the group, the members with the partitions they own
    and the generation they own them in ([initial]), steps played exactly as
    written ([[prefix]]), then a list of events (join, leave, crash, restart,
    pause, resume; each settles the group afterwards unless it says settle =
    false). Every safety property is checked at every step; each completed round
    is compared with its [[expect]] block (assigned, revoked, lost per member).
    Prints every rebalance round with each member's assigned and revoked
    partitions, and the final ownership. --svg FILE draws every step (a lane per
    member, owned and assigned partitions, heartbeat round trips collapsed) and
    writes FILE.html beside it (diagram, steps, final state).

    \b
    Exit codes: 0 holds and every expectation met, 1 a property violated or a
    round not as expected (named: round, member, field), 2 bad input.
    """
    if bool(example) == bool(scenario):
        raise click.UsageError("give a SCENARIO file or --example NAME" + (", not both" if example else ""))
    if example:
        scenario = str(examples.path(example, "replay"))
    if replaying.parse_toml(scenario, "scenario").get("group", {}).get("protocol") == "streams":
        report = streams_replay.run(streams_replay.load(scenario))  # seed 001's rounds, in its notation
        if as_json:
            click.echo(json.dumps(report, indent=2))
        else:
            out.print(streams_replay.text(report), highlight=False, markup=False)
        return
    loaded = replaying.load(scenario, mutations, assignor)
    steps = [(None, loaded["initial"])]
    report = replaying.run(loaded, steps)
    if svg_path:
        report["files"] = counterexample.write_replay(loaded["system"].cfg, steps, svg_path, report["name"])
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        out.print(replaying.text(report), highlight=False, markup=False)
        if svg_path:
            out.print(f"diagram: {report['files']['svg']} {report['files']['html']}", highlight=False, markup=False)
    sys.exit(EXIT_VIOLATED if report["verdict"] == "violated" else EXIT_HOLDS)


@main.command()
@click.option("--out", "out_dir", required=True, type=click.Path(),
              help="Directory to write the cases into (created if missing).")
@click.option("--itf", "with_itf", is_flag=True,
              help="Also write each coordinator case as an ITF trace, OUT/coordinator/<name>.itf.json.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def vectors(out_dir, with_itf, as_json):
    """Write golden test vectors generated from the model (spec/VECTORS.md).

    \b
    OUT/coordinator/*.json  an initial group, inputs (requests, timer firings) and
                            the coordinator's expected responses and group after each
    OUT/assignor/*.json     members' claims and the properties the assignment must meet
    OUT/consumer/*.json     KIP-848's consumer group coordinator: an initial group, inputs
                            (ConsumerGroupHeartbeat, OffsetCommit, timeouts) and the
                            expected responses and group after each
    OUT/index.json          every case with its kind and file
    OUT/vectors.schema.json the JSON Schema of a case (spec/vectors.schema.json)
    OUT/coordinator/*.itf.json with --itf: the coordinator cases as ITF traces
                            (Apalache ADR-015; spec/itf.schema.json)

    The same bytes on every run. Exit 0 written, 2 bad input (OUT is a file).
    """
    path = Path(out_dir)
    problem = f"--out {out_dir}: is a file, expected a directory" if path.exists() and not path.is_dir() else None
    if problem is None:
        try:
            index = vectors_module.write(path, with_itf)
        except OSError as e:
            problem = f"--out {out_dir}: cannot write there ({e.strerror or e})"
    if problem is not None:
        raise ConfigError(problem)
    summary = {"out": str(path), "total": index["total"], "counts": index["counts"],
               "from_seed_examples": index["from_seed_examples"], "index": str(path / "index.json")}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        counts = index["counts"]
        out.print(f"{index['total']} cases ({counts['coordinator']} coordinator, {index['from_seed_examples']} of "
                  f"them the seeds' worked examples; {counts['assignor']} assignor; {counts['consumer']} consumer, "
                  f"KIP-848's) written to {path}", highlight=False, markup=False)


def _topic(ctx, param, values):
    from rebalance.impl.broker import parse_topic
    try:
        return tuple(parse_topic(value) for value in values)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=9092, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free port, printed).")
@click.option("--topic", "topics", multiple=True, required=True, callback=_topic, metavar="NAME:PARTITIONS",
              help="A topic this broker serves (repeatable); its partitions' logs start empty.")
@click.option("--store", type=click.Path(file_okay=False),
              help="Keep groups, committed offsets, topics and records in this folder across runs (created if "
                   "missing). Default: a fresh temporary folder, deleted on exit, so every run starts empty.")
@click.option("--initial-rebalance-delay-ms", "initial_delay_ms", default=3000, show_default=True,
              type=click.IntRange(0), help="group.initial.rebalance.delay.ms (KIP-134); 0 switches it off.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Record every connection and group request and response to this file (JSON lines, format v2: "
                   "spec/TRACE.md); a restart on the same file appends a restart record.")
@click.option("--mutation", "mutations", multiple=True, type=click.Choice(sorted(REGISTRY)),
              help="Switch on a known-bad coordinator behaviour (repeatable).")
@click.option("--group-min-session-timeout-ms", "min_session_ms", default=6_000, show_default=True,
              type=click.IntRange(1), help="group.min.session.timeout.ms: shorter JoinGroups get INVALID_SESSION_TIMEOUT.")
@click.option("--group-max-session-timeout-ms", "max_session_ms", default=1_800_000, show_default=True,
              type=click.IntRange(1), help="group.max.session.timeout.ms: longer JoinGroups get INVALID_SESSION_TIMEOUT.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Log lines as escaped text or one JSON object each; warnings are rate-limited (10 a minute per kind).")
@click.option("--queued-max-request-bytes", "queued_bytes", default=100 * 1024 * 1024, show_default=True,
              type=click.IntRange(1), help="queued.max.request.bytes: bytes of request frames above 1 MiB (Produce, "
                                           "Metadata, Fetch, ListOffsets) read and not yet decoded, over all "
                                           "connections; such a frame waits to be read beyond it.")
@click.option("--max-connections", default=10_000, show_default=True, type=click.IntRange(1),
              help="max.connections: connections beyond it are closed when accepted.")
@click.option("--connections-max-idle-ms", "idle_ms", default=600_000, show_default=True, type=click.IntRange(1),
              help="connections.max.idle.ms: a connection that sends no request for this long is closed.")
@click.option("--offsets-retention-ms", "retention_ms", default=3_600_000, show_default=True, type=click.IntRange(1),
              help="offsets.retention.minutes, in ms: an Empty group's committed offsets, and the group, are removed "
                   "this long after it became Empty (Kafka: 7 days; a test server's groups live for a session).")
@click.option("--auto-create-topics/--no-auto-create-topics", default=False, show_default=True,
              help="auto.create.topics.enable: a Metadata request naming an unknown topic creates it (1 partition).")
@click.option("--offsets-retention-check-interval-ms", "check_ms", default=600_000, show_default=True,
              type=click.IntRange(1), help="offsets.retention.check.interval.ms: how often expired groups are removed "
                                           "(an Empty group with no offsets goes at the next check).")
@click.option("--message-max-bytes", default=1_048_588, show_default=True, type=click.IntRange(64),
              help="message.max.bytes: a larger record batch is refused with MESSAGE_TOO_LARGE (its records may take "
                   "32 times as much decompressed).")
@click.option("--fetch-max-bytes", default=57_671_680, show_default=True, type=click.IntRange(1),
              help="fetch.max.bytes: the most record bytes in one Fetch response, whatever the request asks.")
@click.option("--log-retention-ms", "log_retention_ms", default=604_800_000, show_default=True,
              type=click.IntRange(-1), help="log.retention.ms: records older are deleted (-1: never); a topic's "
                                            "retention.ms (CreateTopics) wins.")
@click.option("--log-retention-bytes", "log_retention_bytes", default=-1, show_default=True, type=click.IntRange(-1),
              help="log.retention.bytes: a partition's oldest records are deleted past this size (-1: never); a "
                   "topic's retention.bytes wins.")
@click.option("--log-retention-check-interval-ms", "log_check_ms", default=300_000, show_default=True,
              type=click.IntRange(1), help="log.retention.check.interval.ms: how often retention is applied.")
@click.option("--group-consumer-session-timeout-ms", "consumer_session_ms", default=45_000, show_default=True,
              type=click.IntRange(1), help="group.consumer.session.timeout.ms: a KIP-848 consumer group's member "
                                           "that sends no heartbeat for this long is fenced.")
@click.option("--group-consumer-heartbeat-interval-ms", "consumer_heartbeat_ms", default=5_000, show_default=True,
              type=click.IntRange(1), help="group.consumer.heartbeat.interval.ms: how often KIP-848 consumer group "
                                           "members are told to heartbeat.")
@click.option("--control-port", type=click.IntRange(0, 65535),
              help="Serve the fault-injection control endpoint (JSON over HTTP, `rebalance ctl`) on this "
                   "loopback port (0: any free one, logged); every request needs the random token it prints.")
@click.option("--control-token-file", type=click.Path(dir_okay=False),
              help="Write the control endpoint's token to this file (mode 0600) instead of "
                   "$XDG_RUNTIME_DIR/rebalance/control-PORT.token (else ~/.cache/rebalance/), where ctl looks.")
def serve(host, port, topics, store, initial_delay_ms, trace_path, mutations, min_session_ms, max_session_ms,
          log_format, queued_bytes, max_connections, idle_ms, retention_ms, check_ms, auto_create_topics,
          message_max_bytes, fetch_max_bytes, log_retention_ms, log_retention_bytes, log_check_ms,
          consumer_session_ms, consumer_heartbeat_ms, control_port, control_token_file):
    """Run the group coordinator on real sockets, speaking Kafka's wire protocol.

    A one-broker Kafka cluster: any Kafka client (librdkafka, kafka-python,
    aiokafka, kafkajs: the ones tested) can bootstrap from it, produce and
    fetch records (a log per partition on disk, impl/records.py), join
    groups, heartbeat, commit and fetch offsets, and list, create and delete
    topics and groups. Every group request is an input to the same coordinator
    handler the checker explores (model/coordinator.py); KIP-848's
    ConsumerGroupHeartbeat (group.protocol=consumer) goes to the consumer group
    coordinator's (model/consumer_group/coordinator.py).

    --trace records what the broker saw in Kafka's terms (member.id strings,
    the consumer protocol decoded), for `rebalance conform`; a new or empty
    file starts with a header (topics, initial delay, mutations), and serve
    restarted on the same file and store appends a restart record naming the
    groups it loaded.

    \b
    rebalance serve --port 9092 --topic orders:6 --topic audit:3
    rebalance serve --port 0 --topic t:4 --store ./serve-data --trace trace.jsonl
    """
    import asyncio
    import signal

    from rebalance.impl import logs
    from rebalance.impl.broker import Cluster
    from rebalance.impl.coordinator import Coordinator
    from rebalance.impl.limits import Limits
    from rebalance.impl.store import Store
    from rebalance.impl.trace import Recorder
    from rebalance.model.consumer_group.timing import ConsumerTimeouts
    from rebalance.model.timing import SessionBounds

    if min_session_ms > max_session_ms:
        raise click.BadParameter(f"{min_session_ms} > {max_session_ms}", param_hint="--group-min-session-timeout-ms")
    logs.configure(log_format)

    limits = Limits(queued_max_request_bytes=queued_bytes, max_connections=max_connections,
                    connections_max_idle_ms=idle_ms, offsets_retention_ms=retention_ms,
                    offsets_retention_check_interval_ms=check_ms, message_max_bytes=message_max_bytes,
                    fetch_max_bytes=fetch_max_bytes, log_retention_ms=log_retention_ms,
                    log_retention_bytes=log_retention_bytes, log_retention_check_interval_ms=log_check_ms)

    async def run():
        coordinator = Coordinator(Cluster(host, port, topics), Store(store), Recorder(trace_path, "serve", append=True),
                                  initial_delay_ms, mutations, SessionBounds(min_session_ms, max_session_ms), limits,
                                  auto_create_topics, ConsumerTimeouts(consumer_session_ms, consumer_heartbeat_ms))
        try:
            await coordinator.start()
        except OSError as e:
            await coordinator.close()
            raise click.ClickException(f"cannot listen on {host}:{port}: {e.strerror or e}")
        except ConfigError:  # the store's records do not decode (StoreError)
            await coordinator.close()
            raise
        control = None
        if control_port is not None:
            from rebalance.impl.control import ControlServer
            control = ControlServer(coordinator.faults, asyncio.get_running_loop(), port=control_port,
                                    token_file=control_token_file)
            try:
                control.start()
            except OSError as e:
                await coordinator.close()
                raise click.ClickException(f"cannot listen on 127.0.0.1:{control_port}: {e.strerror or e}")
        stop = asyncio.Event()  # SIGTERM closes the store and the worker process as Ctrl-C does
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        try:
            await stop.wait()
        finally:
            if control is not None:
                control.close()
            await coordinator.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass


@main.command()
@click.option("--bootstrap", default="127.0.0.1:9092", show_default=True, help="A broker's host:port.")
@click.option("--group", required=True, help="The group.id to join.")
@click.option("--topic", "topics", multiple=True,
              help="A topic to consume (repeatable; required but under streams, where it names the tasks' topic, "
                   "default task).")
@click.option("--protocol", type=click.Choice(["cooperative", "eager", "streams"]), default="cooperative",
              show_default=True, help="Rebalance protocol: cooperative (Design I, protocol name cooperative-sticky), "
                                      "eager, or streams (seed 001: a Kafka Streams instance with learner tasks).")
@click.option("--instance-id", help="group.instance.id: a static member (KIP-345).")
@click.option("--client-id", default="rebalance-member", show_default=True, help="client.id.")
@click.option("--session-timeout-ms", "session_ms", default=10_000, show_default=True, type=click.IntRange(1))
@click.option("--heartbeat-interval-ms", "heartbeat_ms", default=1_000, show_default=True, type=click.IntRange(1))
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Record this member's connection to the coordinator, its group requests and the responses "
                   "to this file (replaced; JSON lines, format v2: spec/TRACE.md).")
@click.option("--observe", "observe_path", type=click.Path(dir_okay=False),
              help="Append the rebalance callbacks and commits this member sees to this observed log "
                   "(spec/OBSERVED.md; several members may share one file), for conform --side clients.")
@click.option("--mutation", "mutations", multiple=True, type=click.Choice(sorted(REGISTRY)),
              help="Run the model's member handler with a known-bad behaviour (repeatable), e.g. "
                   "keep-owned-on-unknown-member-id (KAFKA-12983), to record a wrong member's trace.")
@click.option("--tasks", type=int, help="Streams: tasks T1..TN, the partitions of the tasks' topic (default 4).")
@click.option("--stateless", type=int, help="Streams: how many of the tasks (the last ones) are stateless (default 1).")
@click.option("--standby", type=int, help="Streams: num.standby.replicas (default 1, at most --members).")
@click.option("--members", type=int, help="Streams: the instances the application runs (default 3); a standby "
                                          "count above it is refused.")
@click.option("--streams-version", help="Streams: the seed's algorithm version, 1.0 or 2.0 (default 2.0).")
@click.option("--rejoin", help="Streams: rejoin once every learner is ready (conservative, default) or as each is "
                               "(eager).")
@click.option("--restore-size", type=int, help="Streams: records a learner's state store restores (default 10000).")
@click.option("--restore-rate", type=float, help="Streams: records restored per second (default 5000).")
@click.option("--scale-down-timeout-ms", "scale_down_ms", type=int,
              help="Streams: a member marked leaving (SIGUSR1, the scale-down tool) shuts down at the latest this "
                   "long after (default 30000).")
def member(bootstrap, group, topics, protocol, instance_id, client_id, session_ms, heartbeat_ms, trace_path,
           observe_path, mutations, tasks, stateless, standby, members, streams_version, rejoin, restore_size,
           restore_rate, scale_down_ms):
    """Join a consumer group as a member running the model's member handler.

    Speaks Kafka's wire protocol and consumer-protocol bytes, so it can share a
    group with librdkafka or Java consumers (cooperative-sticky). Prints each
    rebalance callback and the assignment as it changes; Ctrl-C leaves the group
    gracefully (a static member sends no LeaveGroup).

    Under --protocol streams it is a Kafka Streams instance (seed 001): the
    model's Streams member and, as leader, its Streams assignor, with the Streams
    user data in the consumer protocol (spec/STREAMS_WIRE.md). A learner task
    restores --restore-size records at --restore-rate a second, then is ready
    (R55). It prints a line each time its active, learning, ready or standby
    tasks change; SIGUSR1 is the scale-down tool (R53: leaving soon), and it
    exits once it has shut itself down (R54).

    \b
    rebalance member --group g --topic orders
    rebalance member --group g --topic orders --instance-id host-1 --client-id host-1
    rebalance member --group app --protocol streams --tasks 8 --client-id S1
    """
    import asyncio
    import signal

    from rebalance.impl.member import MemberRuntime
    from rebalance.impl.observed import ObservedLog
    from rebalance.impl.trace import Recorder

    def show(kind, partitions):
        names = ", ".join(f"{t}-{p}" for t, p in partitions) or "nothing"
        owns = ", ".join(f"{t}-{p}" for t, p in runtime.owned) or "nothing"
        click.echo(f"[{client_id}] {kind} {names}; owns {owns}")

    common = dict(instance_id=instance_id, client_id=client_id, session_ms=session_ms, heartbeat_ms=heartbeat_ms,
                  trace=Recorder(trace_path, "member"),
                  observe=ObservedLog(observe_path, client_id, instance_id) if observe_path else None)
    streams_options = dict(tasks=tasks, stateless=stateless, standby=standby, members=members,
                           streams_version=streams_version, rejoin=rejoin, restore_size=restore_size,
                           restore_rate=restore_rate, scale_down_ms=scale_down_ms)
    if protocol == "streams":
        runtime = _streams_runtime(bootstrap, group, topics, mutations, heartbeat_ms, common, **streams_options)
    else:
        given = [k for k, v in streams_options.items() if v is not None]
        if given:
            raise ConfigError(f"--{given[0].replace('_', '-')} is for --protocol streams, not {protocol}")
        if not topics:
            raise click.UsageError("Missing option '--topic'.")
        runtime = MemberRuntime(bootstrap, group, topics, protocol, listener=show, mutations=mutations, **common)

    async def run():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if protocol == "streams":  # the scale-down tool (R53); before the member runs, it changes nothing
            loop.add_signal_handler(signal.SIGUSR1, lambda: asyncio.ensure_future(runtime.scale_down()))
        try:
            await runtime.start()
        except (OSError, ValueError) as e:
            raise click.ClickException(f"cannot join {group!r} through {bootstrap}: {e}")
        if protocol == "streams":
            finished = asyncio.ensure_future(runtime.finished.wait())
            await asyncio.wait([finished, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        else:
            await stop.wait()
        await runtime.close()
        if runtime.observe is not None:
            runtime.observe.marker("closed")

    asyncio.run(run())


def _streams_runtime(bootstrap, group, topics, mutations, heartbeat_ms, common, *, tasks, stateless, standby, members,
                     streams_version, rejoin, restore_size, restore_rate, scale_down_ms):
    """``rebalance member --protocol streams``: the StreamsMemberRuntime its options
    describe, printing its task lines. ConfigError naming a bad option."""
    import math

    from rebalance.checker.settings import streams_settings
    from rebalance.impl.streams_member import StreamsMemberRuntime
    from rebalance.model.config import GroupConfig

    if len(topics) > 1:
        raise ConfigError(f"--protocol streams takes one --topic (the tasks' topic), got {len(topics)}")
    restore_size = 10_000 if restore_size is None else restore_size
    restore_rate = 5_000.0 if restore_rate is None else restore_rate
    scale_down_ms = 30_000 if scale_down_ms is None else scale_down_ms
    if restore_size < 0:
        raise ConfigError(f"--restore-size must be a number of records, at least 0, got {restore_size}")
    if not restore_rate > 0:
        raise ConfigError(f"--restore-rate must be positive (records per second), got {restore_rate}")
    if scale_down_ms < 1:
        raise ConfigError(f"--scale-down-timeout-ms must be at least 1, got {scale_down_ms}")
    values = {k: v for k, v in (("tasks", tasks), ("stateless", stateless), ("standby_replicas", standby),
                                ("version", streams_version), ("rejoin", rejoin)) if v is not None}
    values["scale_down_ticks"] = math.ceil(scale_down_ms / heartbeat_ms)
    if members is not None and members < 1:
        raise ConfigError(f"--members must be at least 1, got {members}")
    ((_, count),), extra = streams_settings(values, 3 if members is None else members)
    cfg = GroupConfig(topics=((topics[0] if topics else "task", count),), protocol="streams", assignor="streams",
                      mutations=frozenset(mutations), **extra)
    return StreamsMemberRuntime(bootstrap, group, cfg, 1000 * restore_size / restore_rate, click.echo, **common)


def _address(ctx, param, value):
    host, _, port = (value or "").rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{value!r}: expected HOST:PORT, e.g. 127.0.0.1:9092", ctx, param)
    return host, int(port)


@main.command()
@click.option("--listen", required=True, callback=_address, metavar="HOST:PORT",
              help="Where clients connect (port 0: any free port, printed). Clients are told this host: use an "
                   "address they can reach.")
@click.option("--upstream", required=True, callback=_address, metavar="HOST:PORT",
              help="The broker to forward to (its bootstrap address).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Record every client connection and group request and response to this file (replaced; JSON "
                   "lines, format v2: spec/TRACE.md).")
@click.option("--initial-delay-ms", "initial_delay_ms", default=3000, show_default=True, type=click.IntRange(0),
              help="The upstream's group.initial.rebalance.delay.ms, for the trace header (the proxy cannot see "
                   "it; 3000 is Kafka's default).")
@click.option("--group-min-session-timeout-ms", "min_session_ms", default=6000, show_default=True,
              type=click.IntRange(1), help="The upstream's group.min.session.timeout.ms, for the trace header "
                                           "(Kafka's default).")
@click.option("--group-max-session-timeout-ms", "max_session_ms", default=1_800_000, show_default=True,
              type=click.IntRange(1), help="The upstream's group.max.session.timeout.ms, for the trace header "
                                           "(Kafka's default).")
@click.option("--group-consumer-session-timeout-ms", "consumer_session_ms", default=45_000, show_default=True,
              type=click.IntRange(1), help="The upstream's group.consumer.session.timeout.ms (KIP-848), for the "
                                           "trace header (Kafka's default).")
def proxy(listen, upstream, trace_path, initial_delay_ms, min_session_ms, max_session_ms, consumer_session_ms):
    """Forward Kafka clients to a broker unchanged, recording group traffic.

    A transparent Kafka-wire proxy in front of any broker (rebalance serve,
    Apache Kafka, another implementation), so that `rebalance conform` can
    judge that broker from what its clients saw. Each client connection gets
    its own upstream connection; frames pass unchanged and in order, except
    Metadata and FindCoordinator responses, whose broker addresses become the
    proxy's so clients stay on it, and ApiVersions, capped at the versions the
    proxy reads. With --trace, group requests and responses (JoinGroup,
    SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
    DescribeGroups, DeleteGroups, ConsumerGroupHeartbeat,
    ConsumerGroupDescribe) are recorded as forwarded upstream; the header holds the
    upstream's topics (asked at start) and --initial-delay-ms.

    Several brokers: the --listen port stands for --upstream; every other broker
    a Metadata or FindCoordinator response names gets its own port on the
    listening host (any free port, opened when first named). A restart of the
    upstream broker is not seen: no restart record.

    \b
    rebalance serve --port 9092 --topic orders:6 --initial-rebalance-delay-ms 0 &
    rebalance proxy --listen 127.0.0.1:9093 --upstream 127.0.0.1:9092 --trace proxy.jsonl \\
                    --initial-delay-ms 0 &
    rebalance member --bootstrap 127.0.0.1:9093 --group shop --topic orders

    Exit 2 on a bad or unreachable address.
    """
    import asyncio
    import logging

    from rebalance.impl.proxy import Proxy
    from rebalance.impl.trace import Recorder
    from rebalance.model.timing import SessionBounds

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)

    async def run():
        p = Proxy(listen, upstream, Recorder(trace_path, "proxy"), initial_delay_ms,
                  SessionBounds(min_session_ms, max_session_ms), consumer_session_ms)
        try:
            await p.start()
        except (OSError, ConnectionError) as e:
            await p.close()
            return f"cannot proxy {'%s:%d' % listen} to {'%s:%d' % upstream}: {getattr(e, 'strerror', None) or e}"
        try:
            await asyncio.Event().wait()
        finally:
            await p.close()

    try:
        problem = asyncio.run(run())
    except KeyboardInterrupt:
        return
    if problem:
        err.print(f"[bold red]error:[/] {escape(problem)}", highlight=False)
        sys.exit(EXIT_BAD_INPUT)


@main.command("prove")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--mutation", "mutations", multiple=True, type=click.Choice(sorted(REGISTRY)),
              help="Run the assignors with a known-bad behaviour (e.g. assign-before-revoke); repeatable.")
@click.option("--spec-mutation", "spec_mutations", multiple=True, type=click.Choice(sorted(SPEC_MUTATIONS)),
              help="Use a deliberately wrong spec action in the induction (e.g. granted-keeps-revoked).")
@click.option("--max-members", type=int,
              help=f"Assignor proofs: every member count up to this (at most {prove_bounds.LIMITS[0]}; default "
                   f"{prove_bounds.MAX_MEMBERS}, with --assignor {prove_bounds.PLUGIN_MEMBERS}).")
@click.option("--max-partitions", type=int,
              help=f"Assignor proofs: every partition count up to this (at most {prove_bounds.LIMITS[1]}; default "
                   f"{prove_bounds.MAX_PARTITIONS}, with --assignor {prove_bounds.PLUGIN_PARTITIONS}).")
@click.option("--max-counting-partitions", type=int, default=prove_bounds.COUNTING_PARTITIONS, show_default=True,
              help="Balance and minimal-moves proofs (counting arguments, slow in z3): partitions up to this.")
@click.option("--assignor", "plugin",
              help="Your own assignor, module:function (model/assignors.py assign_plugin gives its signature): "
                   "prove its obligations instead (exhaustive up to the bound, then a hypothesis search).")
@click.option("--protocol", type=click.Choice(["eager", "cooperative", "consumer"]), default="cooperative",
              show_default=True, help="With --assignor: the protocol it runs under (cooperative: it must withhold "
                                      "moving partitions). consumer: KIP-848's obligations instead (the server "
                                      "assignors uniform and range, reconciliation's release rule).")
@click.option("--examples", type=click.IntRange(1), default=prove_bounds.PLUGIN_EXAMPLES, show_default=True,
              help="With --assignor: inputs the hypothesis search tries beyond the exhaustive bound.")
def prove_command(as_json, mutations, spec_mutations, max_members, max_partitions, max_counting_partitions, plugin,
                  protocol, examples):
    """Discharge the proof obligations with z3 (spec/SPEC.md, section 9).

    \b
    (a) assignors, every input up to the bound (any claims, any generations):
        every partition assigned exactly once, loads within one, and the
        cooperative adjustment never assigns a partition whose newest claim is
        another member's; range and roundrobin by exhaustive enumeration, sticky
        and cooperative-sticky symbolically (z3 searches for a breaking input
        to prove's transcription of the model, which one more obligation
        compares with the model's assignors, generations 0..7 included);
    (b) stickiness: moves of the cooperative sticky target against z3's minimum
        for a balanced assignment, as a ratio over a sample, and proven minimal
        for every input up to the counting bound;
    (c) the inductive invariant of spec/actions.py at a fixed size:
        init => inv, inv and next => inv', inv => exclusive_ownership.

    (e) with --protocol consumer, instead: KIP-848's (spec/KIP848.md K5, K16),
        exhaustively within the bound: uniform (exactly once, balanced, the
        fewest moves) and range (exactly once, balanced per topic) on every
        input, and reconciliation (a partition assigned only once released,
        epochs within the target's) on every member record, target, holding
        and report over 4 partitions.

    (d) with --assignor module:function, instead: your own assignor's
        obligations (exactly once, loads within one, never assigning a claimed
        partition), exhaustively over every input up to --max-members and
        --max-partitions (default 3 x 4, claims at generations 1..2), then a
        hypothesis search on larger inputs, shrunk: z3 cannot see inside a
        Python function.

    Each obligation prints its status, what exactly it covers and its time.
    A counterexample is concrete: the input (each member's claims and
    generation) with the model's own assignment, or the abstract states and the
    spec action. Try `--mutation assign-before-revoke`,
    `--mutation generation-mod-4` or
    `--spec-mutation granted-keeps-revoked` to see one.

    \b
    Exit codes: 0 every obligation proved, 1 a counterexample, 2 bad input,
    3 incomplete (z3 gave up on an obligation).
    """
    require("prove", "rebalance prove")
    from rebalance.checker import consumer_prove, prove

    if plugin:
        max_members = prove_bounds.PLUGIN_MEMBERS if max_members is None else max_members
        max_partitions = prove_bounds.PLUGIN_PARTITIONS if max_partitions is None else max_partitions
    max_members = prove_bounds.MAX_MEMBERS if max_members is None else max_members
    max_partitions = prove_bounds.MAX_PARTITIONS if max_partitions is None else max_partitions
    for name, value, top in (("--max-members", max_members, prove_bounds.LIMITS[0]),
                             ("--max-partitions", max_partitions, prove_bounds.LIMITS[1]),
                             ("--max-counting-partitions", max_counting_partitions, prove_bounds.LIMITS[1])):
        if not 1 <= value <= top:
            raise ConfigError(f"{name} must be between 1 and {top}, got {value}")
    run = dict(max_members=max_members, max_partitions=max_partitions, mutations=frozenset(mutations),
               spec_mutations=frozenset(spec_mutations), counting_partitions=max_counting_partitions)
    results = []
    show = err.is_terminal and not as_json
    with (Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                   transient=True) if show else contextlib.nullcontext()) as progress:
        task = progress.add_task("proving", total=None) if show else None
        sizes = (lambda name, m, n: progress.update(task, description=f"{name}: {m} members, {n} partitions")) \
            if show else None
        if protocol == "consumer":
            if plugin:
                raise ConfigError("--assignor is a classic protocol's plug-in; the consumer protocol's assignors are "
                                  "the coordinator's (uniform, range)")
            chosen = consumer_prove.obligations(max_members, max_partitions, frozenset(mutations))
        elif plugin:
            chosen = prove.plugin_obligations(resolve({"group": {"protocol": protocol}}, assignor=plugin).group,
                                              max_members, max_partitions, examples=examples)
        else:
            chosen = prove.obligations(**run, on_size=sizes)
        for ob in chosen:
            results.append(ob)
            if not as_json:
                _print_obligation(ob)
    statuses = {ob.status for ob in results}
    code = EXIT_VIOLATED if "counterexample" in statuses else EXIT_INCOMPLETE if "unknown" in statuses else EXIT_HOLDS
    if as_json:
        click.echo(json.dumps({"obligations": [ob.as_json() for ob in results],
                               "seconds": round(sum(ob.seconds for ob in results), 3)}, indent=2))
    else:
        total = sum(ob.seconds for ob in results)
        verdict = {EXIT_HOLDS: "[bold green]all proved[/]", EXIT_VIOLATED: "[bold red]counterexample[/]",
                   EXIT_INCOMPLETE: "[bold yellow]incomplete[/]"}[code]
        out.print(f"{len(results)} obligations, {total:.1f} s: {verdict}")
    sys.exit(code)


def _print_obligation(ob) -> None:
    color = {"proved": "green", "not violated": "green", "counterexample": "red", "unknown": "yellow"}[ob.status]
    out.print(f"[{color}]{ob.status:>14}[/] {ob.seconds:6.2f} s  [bold]{ob.name}[/]", highlight=False)
    out.print(f"{'':24}{ob.bound} ({ob.method})" + (f"; {ob.detail}" if ob.detail else ""),
              highlight=False, markup=False)
    if ob.counterexample is not None:
        out.print(json.dumps(ob.counterexample, indent=2), highlight=False, markup=False)



@main.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for runs.parquet, table.md, table.csv and the PNG plots (created if missing).")
@click.option("--runs", type=int,
              help="Runs in the campaign, going round the grid's cells; fewer than the cells is refused with the "
                   "smallest that covers them. [default: 1,000 rounded up to a multiple of the cells]")
@click.option("--seed", default=1, show_default=True, type=int, help="Seed: the same runs, seed and grid give the same results.")
@click.option("--situations", default=None,
              help=f"Comma-separated situations (checker/situations.py). [default: {','.join(SITUATIONS)}; "
                   f"with --streams: {','.join(STREAMS_SITUATIONS)}]")
@click.option("--protocols", default=",".join(CONSUMER_PROTOCOLS), show_default=True,
              help="Comma-separated protocols.")
@click.option("--sizes", default=None,
              help="Comma-separated MEMBERSxPARTITIONS, up to 100x1000 (with --streams MEMBERSxTASKS, up to 100x400). "
                   f"[default: {','.join(f'{m}x{p}' for m, p in DEFAULT_SIZES)}; with --streams: "
                   f"{','.join(f'{m}x{p}' for m, p in STREAMS_SIZES)}]")
@click.option("--streams", is_flag=True,
              help="Kafka Streams with restore times (seed 001): the Streams situations over --variants.")
@click.option("--variants", default=",".join(VARIANTS), show_default=True,
              help="With --streams: comma-separated variants (checker/streams_simulation.py): "
                   + "; ".join(f"{name}: {v.doc}" for name, v in VARIANTS.items()) + ".")
@click.option("--restore-ms", default=DEFAULT_RESTORE_MS, show_default=True, type=int,
              help="With --streams: the mean state-store restore time, ms (drawn uniformly within ±50%).")
@click.option("--scale-down-timeout-ms", "scale_down_ms", default=DEFAULT_SCALE_DOWN_MS, show_default=True,
              type=int, help="With --streams: the scale-down timeout (R54), ms.")
@click.option("--mutation", "mutations", multiple=True, type=click.Choice(sorted(REGISTRY)),
              help="With --streams: run the Streams variants' model with a known-bad rule (model/mutations.py).")
@click.option("--static", "static", type=click.Choice(["both", "yes", "no"]), default="both", show_default=True,
              help="Static membership (KIP-345): with and without, only with, only without.")
@click.option("--horizon-ms", default=DEFAULT_HORIZON_MS, show_default=True, type=int,
              help="Simulated ms after a run's last scripted action at which a run whose group is not yet "
                   "balanced and quiet is cut and reported censored (counted, not averaged).")
@click.option("--scheduled-rebalance-max-delay-ms", "scheduled_delay_ms", default=Timing().scheduled_delay_ms,
              show_default=True, type=int,
              help="The deferred protocol's scheduled.rebalance.max.delay.ms (Kafka Connect's setting; 0: lost "
                   "partitions are reassigned at once and revoking rounds do not back off).")
@click.option("--spark-master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--rejoin-flag", is_flag=True, help="The cooperative protocols' leaders tell every member to rejoin "
                                                  "at once when a second round is owed (seed 000, Design I; R74).")
@click.option("--json", "as_json", is_flag=True, help="Print the table as one JSON object on stdout.")
def simulate(out_dir, runs, seed, situations, protocols, sizes, streams, variants, restore_ms, scale_down_ms,
             mutations, static, horizon_ms, scheduled_delay_ms, spark_master, rejoin_flag, as_json):
    """Run a simulation campaign on Spark: the seeds' situations, timed.

    Each run drives the model's coordinator and member handlers with a virtual
    clock (ms; results in ticks of 100 ms) through one situation — rolling
    bounce, process death (killed, back 5-60 s later), scale up, scale down
    (and, static, by an admin's removal 1-3 s after the stop),
    host swap — and measures rebalances, partitions moved, partition-ticks of
    unavailability and ticks until the group is balanced again. A run goes on
    until the group is balanced and quiet (Stable, every partition owned once,
    loads within one, every member in the current generation, no rebalance
    scheduled or in flight), or is cut at --horizon-ms after its last scripted
    action and counted as censored: the table's means are over the other runs.
    Runs go over protocols x static membership x sizes, on Spark (local mode by
    default).

    \b
    With --streams, Kafka Streams (seed 001) with state-store restores: scale
    up, scale down, online host swap and a leader crash during scaling, over
    Streams eager, cooperative without learners (KIP-429) and the seed's
    learners, measuring task-ticks unavailable (no restored active), task-ticks
    of double processing (a learner beside the active) and the same counts.

    \b
    rebalance simulate --out results/ --runs 10000
    rebalance simulate --out big/ --runs 40 --sizes 100x1000 --situations rolling_bounce,process_death
    rebalance simulate --streams --out streams/ --runs 400 --restore-ms 60000

    Exit codes: 0 done, 2 bad input (the [spark] extra missing among them).
    """
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn

    require("spark", "rebalance simulate")

    from rebalance.checker.campaign import Campaign, default_runs, parse_sizes, run_campaign

    from rebalance.checker.streams_simulation import StreamsCampaign

    split = lambda text: tuple(filter(None, (s.strip() for s in text.split(","))))  # noqa: E731
    given = lambda name: click.get_current_context().get_parameter_source(name).name != "DEFAULT"  # noqa: E731
    if streams:
        for name, option in (("protocols", "--protocols"), ("static", "--static"),
                             ("scheduled_delay_ms", "--scheduled-rebalance-max-delay-ms"),
                             ("rejoin_flag", "--rejoin-flag")):
            if given(name):
                raise ConfigError(f"{option} does not apply with --streams (its variants are --variants)")
        campaign = StreamsCampaign(runs=runs or 0, seed=seed, situations=split(situations or ",".join(STREAMS_SITUATIONS)),
                                   sizes=parse_sizes(sizes) if sizes else STREAMS_SIZES, variants=split(variants),
                                   horizon_ms=horizon_ms, restore_ms=restore_ms, scale_down_ms=scale_down_ms,
                                   mutations=frozenset(mutations))
    else:
        for name, option in (("variants", "--variants"), ("restore_ms", "--restore-ms"),
                             ("scale_down_ms", "--scale-down-timeout-ms"), ("mutations", "--mutation")):
            if given(name):
                raise ConfigError(f"{option} applies only with --streams")
        campaign = Campaign(runs=runs or 0, seed=seed, situations=split(situations or ",".join(SITUATIONS)),
                            sizes=parse_sizes(sizes) if sizes else DEFAULT_SIZES, protocols=split(protocols),
                            static={"both": (False, True), "yes": (True,), "no": (False,)}[static],
                            horizon_ms=horizon_ms, timing=Timing(scheduled_delay_ms=scheduled_delay_ms),
                            rejoin_flag=rejoin_flag)
    if runs is None:
        campaign = campaign._replace(runs=default_runs(len(campaign.grid())))
    runs = campaign.runs
    campaign.validate()
    started = time.monotonic()
    if err.is_terminal:
        with Progress(SpinnerColumn(), TextColumn("simulating"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("Spark tasks"), TimeElapsedColumn(), console=err, transient=True) as bar:
            task = bar.add_task("runs", total=None)
            table = run_campaign(campaign, Path(out_dir), spark_master,
                                 progress=lambda done, total: bar.update(task, completed=done, total=total))
    else:
        table = run_campaign(campaign, Path(out_dir), spark_master)
    seconds = time.monotonic() - started
    if as_json:
        click.echo(json.dumps({"runs": runs, "seed": seed, "horizon_ms": horizon_ms, "seconds": round(seconds, 1),
                               "out": str(out_dir), "table": table}, indent=2))
    else:
        out.print(Path(out_dir, "table.md").read_text(), highlight=False, markup=False)
        out.print(f"{runs:,} runs in {seconds:.0f} s; written to {out_dir}/: runs.parquet, table.md, table.csv, "
                  + ", ".join(f"{m.name}.png" for m in campaign.measures), highlight=False)


@main.command("conform")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--side", type=click.Choice(["coordinator", "members", "both", "clients"]), default="coordinator",
              show_default=True, help="Which behaviour to judge: the broker's responses, the clients' requests, both, "
                                      "or what applications observed.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout (errors too).")
@click.option("--out", "out_dir", default="out", show_default=True, type=click.Path(file_okay=False),
              help="Where a divergence's lane SVG and JSON (and a corpus's tables) go.")
@click.option("--slack-ms", default=1000.0, show_default=True, type=click.FloatRange(0),
              help="How far from its deadline a coordinator timer may have fired (ms).")
@click.option("--max-candidates", default=10_000, show_default=True, type=click.IntRange(1),
              help="Bound on the candidate states kept, and on those a record's search between two "
                   "records visits, over all of them together (exit 3 when hit).")
@click.option("--engine", type=click.Choice(["local", "spark"]), default="local", show_default=True,
              help="For a directory: judge its traces here, or one Spark task per trace.")
@click.option("--spark-master", default="local[2]", show_default=True, help="Spark master URL (--engine spark).")
@click.option("--skew-ms", type=click.IntRange(0), default=0, show_default=True,
              help="Clients side: the most the applications' clocks may differ (ms).")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False),
              help="Also write a JUnit XML report, one test case per trace (a divergent one a failure naming the "
                   "record and rule), for CI. Not with --side clients.")
def conform(paths, side, as_json, out_dir, slack_ms, max_candidates, engine, spark_master, skew_ms, junit_path):
    """Hold a recorded trace (spec/TRACE.md, v2) against the model and name the
    first record and rule (R.., spec/SPEC.md) where they part.

    \b
    rebalance serve --topic orders:6 --trace run.jsonl     record (or: rebalance proxy --trace)
    rebalance conform run.jsonl                  the broker's responses (coordinator side)
    rebalance conform run.jsonl --side both      and the clients' requests (member side)
    rebalance conform run.jsonl --json           {verdict, records_checked, rules, divergence, ...}
    rebalance conform traces/ --engine spark     a corpus: one row per trace, table.md under --out
    rebalance conform --side clients a.jsonl b.jsonl   applications' observed logs (spec/OBSERVED.md)

    \b
    --side clients judges one or more observed logs instead of a trace: each partition's
    ownership intervals per member, rebuilt from the rebalance callbacks; a commit
    acknowledged ok outside its member's ownership, or to two members owning the
    partition at once, is divergent (exclusive_ownership); overlapping ownership alone
    (a zombie) is reported as exclusive_processing.

    \b
    Exit: 0 conforms, 1 divergent (lane SVG of the trace up to that record under --out),
    2 malformed trace (trace.jsonl:LINE: reason), 3 incomplete (a bound hit, or records
    the side cannot interpret, named).
    """
    from rebalance.checker.conform import run as conform_run

    if side == "clients":
        if junit_path:
            return _conform_error(as_json, "--junit: one test case per trace; --side clients judges observed logs")
        doc, code = conform_run.judge_observed(paths, {"skew_ms": skew_ms})
        _conform_done(doc, code, as_json)
    if len(paths) != 1:
        return _conform_error(as_json, f"one trace or directory at a time ({len(paths)} given); "
                                       "several files are for --side clients")
    (path,) = paths
    options = {"slack_ms": slack_ms, "max_candidates": max_candidates}
    target = Path(path)
    if target.is_dir():
        paths = conform_run.traces_in(target)
        if not paths:
            return _conform_error(as_json, f"{path}: no *.jsonl traces in this directory")
        started = time.perf_counter()
        if engine == "spark":
            rows = conform_run.corpus_spark(paths, side, options, Path(out_dir), spark_master)
        else:
            rows = conform_run.corpus_local(paths, side, options)
            conform_run.write_tables(rows, Path(out_dir))
        code = conform_run.exit_code(r["verdict"] for r in rows)
        if junit_path:
            junit.write(junit_path, f"rebalance conform {path}", junit.conform_cases(rows),
                        time.perf_counter() - started)
        counts: dict = {}
        for r in rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        if as_json:
            click.echo(json.dumps({"verdict": {0: "conforms", 1: "divergent", 2: "malformed", 3: "incomplete"}[code],
                                   "side": side, "engine": engine, "traces": rows, "counts": counts,
                                   "seconds": round(time.perf_counter() - started, 3)}, indent=2))
        else:
            for r in rows:
                where = f" line {r['line']}" + (f" ({r['rule']})" if r["rule"] else "") if r["line"] else ""
                out.print(f"{r['verdict']:>10}  {r['path']}{where}", highlight=False, markup=False)
            out.print(", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + f"; tables in {out_dir}/",
                      highlight=False)
        sys.exit(code)
    if not target.exists():
        return _conform_error(as_json, f"{path}: no such file or directory")
    doc, code = conform_run.judge(target, side, options, out_dir)
    if junit_path and doc["verdict"] != "malformed":
        junit.write(junit_path, f"rebalance conform {path}",
                    junit.conform_cases([conform_run.row(doc) | {"reason": (doc["divergence"] or {}).get("reason")}]),
                    doc["seconds"])
    _conform_done(doc, code, as_json)


def _conform_done(doc: dict, code: int, as_json: bool):
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    elif doc["verdict"] != "malformed":
        _print_conform(doc)
    if doc["verdict"] == "malformed":
        err.print(f"error: {doc['error']['message']}", highlight=False, markup=False)
    sys.exit(code)


def _conform_error(as_json: bool, message: str):
    from rebalance.checker.conform import run as conform_run

    if as_json:
        click.echo(json.dumps({"verdict": "malformed", "error": conform_run.malformed_error(message, 0, message)}))
    err.print(f"error: {message}", highlight=False, markup=False)  # on stderr either way, as every command's
    sys.exit(EXIT_BAD_INPUT)


def _print_conform(doc: dict) -> None:
    color = {"conforms": "green", "divergent": "red", "incomplete": "yellow"}[doc["verdict"]]
    out.print(f"[bold {color}]{doc['verdict']}[/] ({doc['side']} side): {doc['records_checked']:,} of "
              f"{doc['records']:,} records checked in {doc['seconds']:.2f} s", highlight=False)
    out.print("rules exercised: " + (", ".join(doc["rules"]) or "none"), highlight=False)
    for item in doc["uninterpreted"]:
        out.print(f"[yellow]not interpreted:[/] {item}", highlight=False)
    for o in doc["figures"].get("exclusive_processing", ()):  # clients side: overlaps, a zombie's
        zombie = f" (paused: {', '.join(o['paused'])})" if o["paused"] else ""
        out.print(f"exclusive_processing: {o['partition']} owned by {' and '.join(o['members'])} from "
                  f"{o['from_ms']} to {o['to_ms'] or 'the end'}{zombie}", highlight=False, markup=False)
    from rebalance.checker.conform.report import divergence_lines

    for line in divergence_lines(doc):
        out.print(line, highlight=False, markup=False)


from rebalance.ctl import ctl  # noqa: E402  (rebalance ctl: cli/ctl.py)

main.add_command(ctl)
from rebalance.kafka_broker import kafka  # noqa: E402  (rebalance kafka: cli/kafka_broker.py)

main.add_command(kafka)
from rebalance.explore import explore as explore_command  # noqa: E402  (rebalance explore: cli/explore.py)

main.add_command(explore_command)
