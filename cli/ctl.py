"""``rebalance ctl``: steer a running ``rebalance serve`` through its control endpoint
(``serve --control-port``, impl/control.py; the operations are impl/faults.py's).

Exit codes: 0 done, 1 done but without the effect asked (an expired member that a
barrier keeps, R11), 2 bad input (an unknown group, member, API or error: the
server's message), 3 the endpoint did not answer.
"""
from __future__ import annotations

import json

import click

EXIT_OK, EXIT_NO_EFFECT, EXIT_BAD_INPUT, EXIT_INCOMPLETE = 0, 1, 2, 3


@click.group()
@click.option("--control", "address", default="127.0.0.1:9093", show_default=True, metavar="HOST:PORT",
              help="serve's control endpoint (serve --control-port).")
@click.option("--token", envvar="REBALANCE_CONTROL_TOKEN", metavar="TOKEN",
              help="The endpoint's token (env REBALANCE_CONTROL_TOKEN); default: read from the file serve wrote "
                   "for that port ($XDG_RUNTIME_DIR/rebalance/control-PORT.token, else ~/.cache/rebalance/).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.pass_context
def ctl(ctx, address, token, as_json):
    """Inject faults into a running `rebalance serve` (serve --control-port).

    Every request carries the endpoint's token, read from the file serve wrote
    (or --token).

    \b
    rebalance serve --port 9092 --control-port 9093 --topic t:4 &
    rebalance ctl expire my-group consumer-1-8f3c...
    rebalance ctl rebalance my-group
    rebalance ctl inject Heartbeat --error REBALANCE_IN_PROGRESS --count 3
    rebalance ctl inject SyncGroup --delay-ms 2000 --member consumer-1
    rebalance ctl inject Fetch --drop --for-ms 5000
    rebalance ctl away --error NOT_COORDINATOR; rebalance ctl back
    rebalance ctl pause; rebalance ctl resume
    """
    ctx.obj = (address, token, as_json)


def _run(operation: str, args: dict | None = None, effect=None) -> None:
    # imported here, not with the CLI: `rebalance check` has no use for the wire library (kio, loaded by
    # impl/__init__.py without hypothesis) and does not load it
    from rebalance.impl.control import Unreachable, request
    from rebalance.impl.faults import FaultError
    ctx = click.get_current_context()
    address, token, as_json = ctx.obj
    try:
        result = request(address, operation, args, token=token)
    except FaultError as e:
        _fail(ctx, as_json, str(e), EXIT_BAD_INPUT)
    except Unreachable as e:
        _fail(ctx, as_json, str(e), EXIT_INCOMPLETE)
    except ValueError:  # an address without a port
        _fail(ctx, as_json, f"--control {address}: expected HOST:PORT", EXIT_BAD_INPUT)
    if as_json:
        click.echo(json.dumps(result))
    else:
        for key, value in result.items():
            click.echo(f"{key}: {json.dumps(value) if isinstance(value, (dict, list)) else value}")
    ctx.exit(EXIT_OK if effect is None or effect(result) else EXIT_NO_EFFECT)


def _fail(ctx, as_json: bool, message: str, code: int):
    if as_json:
        click.echo(json.dumps({"error": {"message": message, "exit_code": code, "command": "ctl"}}))
    click.echo(f"error: {message}", err=True)
    ctx.exit(code)


@ctl.command()
def status():
    """Pause, coordinator and rules in force, and every group (state, generation, members' assignments)."""
    _run("status")


@ctl.command()
@click.argument("group")
@click.argument("member_id")
def expire(group, member_id):
    """Expire MEMBER_ID of GROUP now (its session timeout fires, R11); exit 1 if a barrier keeps it."""
    _run("expire", {"group": group, "member_id": member_id}, lambda r: r["expired"])


@ctl.command()
@click.argument("group")
def rebalance(group):
    """Force GROUP to rebalance (R56)."""
    _run("rebalance", {"group": group})


@ctl.command()
@click.argument("api")
@click.option("--error", help="Answer with this Kafka error (name or code) instead of the coordinator.")
@click.option("--delay-ms", type=click.IntRange(1), help="Delay the responses this long (ms).")
@click.option("--drop", is_flag=True, help="Drop the responses (the client's request times out).")
@click.option("--member", help="Only the requests of this member.id or client.id (default: every member).")
@click.option("--count", type=click.IntRange(1), help="For the next N requests (default: until cleared).")
@click.option("--for-ms", type=click.IntRange(1), help="For this long (ms; default: until cleared).")
def inject(api, error, delay_ms, drop, member, count, for_ms):
    """Inject a fault into the responses of API (a Kafka API name: Heartbeat, SyncGroup, Fetch, ...)."""
    _run("inject", {"api": api, "error": error, "delay_ms": delay_ms, "drop": drop, "member": member,
                    "count": count, "for_ms": for_ms})


@ctl.command()
def clear():
    """Remove every injection rule."""
    _run("clear")


@ctl.command()
@click.option("--error", default="NOT_COORDINATOR", show_default=True,
              type=click.Choice(["NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"]))
def away(error):
    """Take the coordinator away: group requests get ERROR, FindCoordinator COORDINATOR_NOT_AVAILABLE."""
    _run("coordinator-away", {"error": error})


@ctl.command()
def back():
    """Bring the coordinator back."""
    _run("coordinator-back")


@ctl.command()
def pause():
    """Hold every request before dispatch (timers keep running)."""
    _run("pause")


@ctl.command()
def resume():
    """Release the held requests."""
    _run("resume")
