"""Run the whole scenario catalogue on each target and write the side-by-side table.

    python -m catalogue [--target kafka --target serve] [--only NAME ...] [--findings | --connect | --streams]
                        [--out results/catalogue] [--table docs/oracle/side-by-side.md]

(from tests/, as ``make catalogue`` does). One broker per target and distinct group
settings; each scenario variant runs on each target in ``--out/<target>/<scenario>-<variant>/``
(trace, observed log, result.json); the table (table.py) is written from the results, with
the machine and the date. Exit 0 when every result passed (situation reached, both
conform sides conforming or a documented departure), 1 otherwise. ``--connect`` runs the
Kafka Connect scenarios (connect.py, docs/connect.md) instead, ``--table`` then writing
the Connect table (connect_table.py); ``--streams`` the Kafka Streams scenarios
(streams.py, docs/streams.md) and their table (streams_table.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import scenarios  # noqa: F401  (registers the catalogue)
from .findings import FINDINGS
from .runner import CATALOGUE, run
from .table import write_table
from .targets import target


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m catalogue", description=__doc__.splitlines()[0])
    p.add_argument("--target", action="append", choices=["kafka", "serve"], help="default: both")
    p.add_argument("--only", action="append", help="scenario names (default: all)")
    p.add_argument("--findings", action="store_true",
                   help="run SPEC section 11's findings (findings.py) instead of the conformance catalogue")
    p.add_argument("--connect", action="store_true",
                   help="run the Kafka Connect scenarios (connect.py) instead; --table writes the Connect table")
    p.add_argument("--out", default="results/catalogue", type=Path)
    p.add_argument("--table", default=None, type=Path, help="also write the Markdown table here")
    p.add_argument("--streams", action="store_true",
                   help="run the Kafka Streams scenarios (streams.py) instead; --table writes the Streams table")
    a = p.parse_args(argv)
    if a.connect:
        return connect_main(a)
    if a.streams:
        return streams_main(a)
    registry = FINDINGS if a.findings else CATALOGUE
    chosen = [registry[n] for n in (a.only or registry)]
    results = []
    started = time.monotonic()
    for where in a.target or ["kafka", "serve"]:
        by_settings: dict = {}
        for s in chosen:
            by_settings.setdefault(tuple(sorted(s.settings.items())), []).append(s)
        for n, (settings, group) in enumerate(by_settings.items()):
            t = target(where, dict(settings), a.out / where / f"broker-{n}")
            print(f"{where} {dict(settings) or ''} started in {t.startup_s:.2f} s", flush=True)
            try:
                for s in group:
                    for v in s.variants:
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
        write_table(results, a.table, time.monotonic() - started)
    failed = [r for r in results if not r.passed]
    print(f"{len(results) - len(failed)} of {len(results)} passed in {time.monotonic() - started:.0f} s")
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
