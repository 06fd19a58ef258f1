"""Run the whole scenario catalogue on each target and write the side-by-side table.

    python -m catalogue [--target kafka --target serve ...] [--only NAME[/VARIANT] ...]
                        [--protocol classic|consumer]
                        [--findings | --connect | --streams] [--out results/catalogue]
                        [--table docs/oracle/side-by-side.md] [--fidelity docs/doubles/fidelity.md]

(from tests/, as ``make catalogue`` does). One broker per target and distinct group
settings; each scenario variant runs on each target in ``--out/<target>/<scenario>-<variant>/``
(trace, observed log, result.json); the table (table.py) is written from the results, with
the machine and the date. Exit 0 when every result passed (situation reached, both
conform sides conforming or a documented departure), 1 otherwise. ``--connect`` runs the
Kafka Connect scenarios (connect.py, docs/connect.md) instead, ``--table`` then writing
the Connect table (connect_table.py); ``--protocol consumer`` only the KIP-848 variants
(group.protocol=consumer, make catalogue-kip848); ``--streams`` the Kafka Streams scenarios
(streams.py, docs/streams.md) and their table (streams_table.py). ``--fidelity`` writes
the test doubles' fidelity table (fidelity.py, docs/doubles.md): the runs on a test
double (``--target kfake``, ``--target librdkafka-mock``) are scored there, not counted:
a double that diverges is a finding, not a failure.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import scenarios  # noqa: F401  (registers the catalogue)
from .findings import FINDINGS
from .fidelity import write_fidelity
from .runner import CATALOGUE, Result, run, settings_of
from .table import write_table
from .targets import DOUBLES, TARGETS, CannotRun, target


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m catalogue", description=__doc__.splitlines()[0])
    p.add_argument("--target", action="append", choices=list(TARGETS), help="default: kafka and serve")
    p.add_argument("--only", action="append", help="scenario names, or NAME/VARIANT (default: all)")
    p.add_argument("--findings", action="store_true",
                   help="run SPEC section 11's findings (findings.py) instead of the conformance catalogue")
    p.add_argument("--connect", action="store_true",
                   help="run the Kafka Connect scenarios (connect.py) instead; --table writes the Connect table")
    p.add_argument("--out", default="results/catalogue", type=Path)
    p.add_argument("--table", default=None, type=Path, help="also write the Markdown table here")
    p.add_argument("--streams", action="store_true",
                   help="run the Kafka Streams scenarios (streams.py) instead; --table writes the Streams table")
    p.add_argument("--fidelity", default=None, type=Path, help="also write the test doubles' fidelity table here")
    p.add_argument("--protocol", choices=("classic", "consumer"),
                   help="only the variants of this group.protocol (consumer: the KIP-848 variants)")
    a = p.parse_args(argv)
    if a.connect:
        return connect_main(a)
    if a.streams:
        return streams_main(a)
    registry = FINDINGS if a.findings else CATALOGUE
    chosen = [(registry[n.split("/")[0]], n.split("/")[1] if "/" in n else None) for n in (a.only or registry)]
    results = []
    started = time.monotonic()
    for where in a.target or ["kafka", "serve"]:
        by_settings: dict = {}
        for s, key in chosen:
            for v in s.variants:
                if key in (None, v.key) and (a.protocol is None or v.protocol == a.protocol):
                    by_settings.setdefault(tuple(sorted(settings_of(s, v).items())), []).append((s, v))
        for n, (settings, group) in enumerate(by_settings.items()):
            try:
                t = target(where, dict(settings), a.out / where / f"broker-{n}")
            except CannotRun as e:
                results += [Result(s.name, v.key, where, [], False, {}, {}, None, 0.0, f"CannotRun: {e}")
                            for s, v in group]
                print(f"{where} {dict(settings)}: cannot run ({e})", flush=True)
                continue
            print(f"{where} {dict(settings) or ''} started in {t.startup_s:.2f} s", flush=True)
            try:
                for s, v in group:
                    t.ensure_up()
                    r = run(s, v, t, a.out / where / f"{s.name}-{v.key}")
                    results.append(r)
                    verdicts = (f"coordinator {r.conform['coordinator']['verdict']}, clients "
                                f"{r.conform['clients']['verdict']}") if r.conform else "not judged"
                    print(f"  {'pass' if r.passed else 'FAIL'} {s.name} {v.key} ({r.seconds} s): situation "
                          f"{'reached' if r.reached else 'NOT reached'}, {verdicts}"
                          f"{'; ' + r.error if r.error else ''}", flush=True)
            finally:
                t.close()
    (a.out / "results.json").write_text(json.dumps([r.__dict__ for r in results], indent=1))
    if a.table:
        write_table([r for r in results if r.target not in DOUBLES], a.table, time.monotonic() - started,
                    a.protocol == "consumer")
    if a.fidelity:
        write_fidelity(results, a.fidelity, time.monotonic() - started)
    judged = [r for r in results if r.target not in DOUBLES]
    failed = [r for r in judged if not r.passed]
    print(f"{len(judged) - len(failed)} of {len(judged)} passed, {len(results) - len(judged)} runs on test doubles "
          f"scored, in {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


def connect_main(a) -> int:
    """The Connect scenarios on each target (default: serve and kafka), one broker each."""
    from .connect import CONNECT, run_connect
    from .connect_table import write_connect_table

    def summary(r) -> str:
        return (f"coordinator {r.conform['coordinator']['verdict']}, members {r.conform['members']['verdict']}, "
                f"tasks {'none lost' if r.none_lost else 'LOST'}"
                f"{', the real rounds match ' + r.model['matches'] if r.model else ''}")
    return _suite(a, CONNECT, run_connect, summary, write_connect_table)


def streams_main(a) -> int:
    """The Streams scenarios on each target (default: serve and kafka), one broker each."""
    from .streams import STREAMS, run_streams
    from .streams_table import write_streams_table

    def summary(r) -> str:
        return (f"coordinator {r.conform['coordinator']['verdict']}, members {r.conform['members']['verdict']}, "
                f"counts {'correct' if r.counts.get('correct') else 'WRONG'} ({r.counts.get('records')} records)")
    return _suite(a, STREAMS, run_streams, summary, write_streams_table)


def _suite(a, registry: dict, run_one, summary, write_table) -> int:
    """``registry``'s scenarios (``--only``: some) on each target, one broker each, each
    played by ``run_one(scenario, target, directory)``; a line per run (``summary(result)``)
    and the table by ``write_table(results, path, seconds)``."""
    results, started = [], time.monotonic()
    for where in a.target or ["serve", "kafka"]:
        t = target(where, {}, a.out / where / "broker")
        print(f"{where} started in {t.startup_s:.2f} s", flush=True)
        try:
            for name in a.only or registry:
                r = run_one(registry[name], t, a.out / where / name)
                results.append(r)
                print(f"  {'pass' if r.passed else 'FAIL'} {name} ({r.seconds} s): situation "
                      f"{'reached' if r.reached else 'NOT reached'}, {summary(r)}"
                      f"{'; ' + r.error if r.error else ''}", flush=True)
        finally:
            t.close()
    if a.table:
        write_table(results, a.table, time.monotonic() - started)
    failed = [r for r in results if not r.passed]
    print(f"{len(results) - len(failed)} of {len(results)} passed in {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
