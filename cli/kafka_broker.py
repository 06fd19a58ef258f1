"""``rebalance kafka``: start the real Apache Kafka 4.4.0 broker the oracle uses
(rebalance.oracle.broker), so a user can run a scenario on Kafka and on ``rebalance
serve`` with one switch of the bootstrap address.

Exit codes: 0 stopped cleanly (Ctrl-C or SIGTERM) or built, 2 bad input or no
Java/Maven (the message names it), 3 the broker did not start.
"""
from __future__ import annotations

import json
import signal
import sys

import click

EXIT_OK, EXIT_BAD_INPUT, EXIT_INCOMPLETE = 0, 2, 3


def _setting(ctx, param, values):
    settings = {}
    for value in values:
        key, sep, v = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", ctx, param)
        settings[key] = v
    return settings


def _fail(message: str, code: int, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"error": {"message": message, "exit_code": code, "command": "kafka"}}))
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="The client listener on 127.0.0.1 (0: any free port, printed).")
@click.option("--set", "settings", multiple=True, callback=_setting, metavar="KEY=VALUE",
              help="A broker property, e.g. --set group.initial.rebalance.delay.ms=3000 (repeatable).")
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Keep its config, storage and broker.log here (default: a temporary folder, deleted on exit).")
@click.option("--build", "build_only", is_flag=True,
              help="Only resolve Kafka's jars and build the Java agents (Maven), then exit.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout once the broker answers.")
def kafka(port, settings, directory, build_only, as_json):
    """Run a real Apache Kafka 4.4.0 broker on loopback (the oracle).

    One KRaft node, broker and controller in one JVM, from Maven Central's jars
    (built once into ~/.cache/rebalance by Maven; Java 17 and Maven needed). The
    defaults suit tests: one __consumer_offsets partition, replication factor 1,
    group.initial.rebalance.delay.ms 0 and group.min.session.timeout.ms 100; --set
    overrides any broker property. Ready once it answers ApiVersions; prints its
    bootstrap address and start-up time, then runs until Ctrl-C or SIGTERM.

    \b
    rebalance kafka --port 9092 &
    rebalance proxy --listen 127.0.0.1:9094 --upstream 127.0.0.1:9092 --trace kafka.jsonl --initial-delay-ms 0 &
    # ... run clients against 127.0.0.1:9094, then:
    rebalance conform kafka.jsonl
    """
    from rebalance.oracle.broker import KafkaBroker
    from rebalance.oracle.maven import OracleError, classpath

    try:
        if build_only:
            path = classpath()
            click.echo(json.dumps({"classpath": path}) if as_json else path)
            return
        broker = KafkaBroker(settings, port=port, directory=directory, start=False)
    except (OracleError, ValueError) as e:
        _fail(str(e), EXIT_BAD_INPUT, as_json)
    try:
        broker.start()
    except OracleError as e:
        broker.close()
        _fail(str(e), EXIT_INCOMPLETE, as_json)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(EXIT_OK))
    if as_json:
        click.echo(json.dumps({"bootstrap": broker.bootstrap, "startup_s": round(broker.startup_s, 3),
                               "directory": str(broker.directory), "log": str(broker.log_path)}), nl=True)
    else:
        click.echo(f"Kafka 4.4.0 listening on {broker.bootstrap} (started in {broker.startup_s:.2f} s; "
                   f"log {broker.log_path})", err=True)
    sys.stdout.flush()
    try:
        code = broker.proc.wait()
    except (KeyboardInterrupt, SystemExit):
        broker.close()
        return
    tail = broker.log_tail()
    broker.close()
    _fail(f"the broker exited by itself ({code}):\n{tail}", EXIT_INCOMPLETE, as_json)
