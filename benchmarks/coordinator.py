"""Coordinator figures on loopback: ``rebalance serve`` in its own process, 100
members (impl/member.py) in this one.

Prints:
* the time for 100 members to form a Stable group from nothing;
* rebalance latency: a 101st member joins a Stable group of 100; from its
  JoinGroup to every member Stable in the final generation (cooperative: two
  rounds), and the same when one member leaves;
* heartbeats/s: the 100 members' ids and generation, heartbeating back to back
  on 100 connections for a few seconds (the client shares the machine).

Usage: python benchmarks/coordinator.py [--members 100] [--seconds 5]
"""
from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

from rebalance.impl.member import MemberRuntime, Wire
from rebalance.impl.wire import Api
from rebalance.model.member import MemberPhase

REBALANCE = Path(sys.executable).parent / "rebalance"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def settled(members, above: int, timeout: float = 120) -> int:
    """Wait until every member is Stable in one generation above ``above``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        gens = {m.state.generation for m in members}
        if all(m.state.phase == MemberPhase.STABLE for m in members) and len(gens) == 1 and max(gens) > above:
            return max(gens)
        await asyncio.sleep(0.005)
    raise TimeoutError("the group did not settle")


async def main(n: int, seconds: float, port: int) -> None:
    def member(i):
        return MemberRuntime(f"127.0.0.1:{port}", "bench", ["t"], client_id=f"m{i}", heartbeat_ms=100,
                             session_ms=30_000, rebalance_ms=60_000)

    members = [member(i) for i in range(n)]
    t0 = time.perf_counter()
    await asyncio.gather(*(m.start() for m in members))
    generation = await settled(members, 0)
    print(f"{n} members formed a Stable group in {time.perf_counter() - t0:.2f} s (generation {generation})")

    extra = member(n)
    t0 = time.perf_counter()
    await extra.start()
    members.append(extra)
    new = await settled(members, generation)
    print(f"a member joins {n}: Stable again in {(time.perf_counter() - t0) * 1000:.0f} ms "
          f"({new - generation} rounds; heartbeat.interval.ms 100)")

    t0 = time.perf_counter()
    await members.pop().close()
    generation, new = new, await settled(members, new)
    print(f"a member leaves {n + 1}: Stable again in {(time.perf_counter() - t0) * 1000:.0f} ms "
          f"({new - generation} rounds)")

    for m in members:  # quiet the members' own heartbeats: the probe heartbeats for them
        m._beat.cancel()
    wires = [await Wire.open("127.0.0.1", port, f"hb{i}") for i in range(n)]
    count = 0
    stop = time.perf_counter() + seconds

    async def beat(w, m):
        nonlocal count
        while time.perf_counter() < stop:
            r = await w.call(Api.HEARTBEAT, 4, group_id="bench", generation_id=m.state.generation,
                             member_id=m.names[m.state.member_id], group_instance_id=None)
            assert r.error_code == 0, r
            count += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(beat(w, m) for w, m in zip(wires, members)))
    print(f"heartbeats: {count / (time.perf_counter() - t0):,.0f}/s on {n} connections "
          "(one client process, one server process)")
    for w in wires:
        w.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=100)
    p.add_argument("--seconds", type=float, default=5)
    args = p.parse_args()
    port = free_port()
    server = subprocess.Popen([str(REBALANCE), "serve", "--port", str(port), "--topic", "t:200", "--store",
                               ":memory:", "--initial-rebalance-delay-ms", "0"], stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        asyncio.run(main(args.members, args.seconds, port))
    finally:
        server.terminate()
        server.wait()
