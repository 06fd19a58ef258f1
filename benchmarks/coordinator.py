"""Coordinator figures on loopback: ``rebalance serve`` in its own process, 100
members (impl/member.py) in this one.

Prints:
* the time for 100 members to form a Stable group from nothing;
* rebalance latency: a 101st member joins a Stable group of 100; from its
  JoinGroup to every member Stable in the final generation (cooperative: two
  rounds), and the same when one member leaves;
* heartbeats per server CPU-second: the 100 members' ids and generation,
  heartbeating back to back on 100 connections (one request in flight on each)
  from 2 client processes for a few seconds; the server's CPU time is read from
  /proc/PID/stat (utime + stime), so the clients' cost does not count.

Usage: python benchmarks/coordinator.py [--members 100] [--seconds 5]
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from rebalance.impl.member import MemberRuntime
from rebalance.impl.wire import Api, request_frame
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


async def main(n: int, port: int) -> tuple:
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

    for m in members:  # quiet the members' own heartbeats: the probes heartbeat for them
        m._beat.cancel()
    ids = [m.ids.member_names[m.state.member_id] for m in members]
    return members[0].state.generation, ids


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, s (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def probe(port: int, generation: int, ids: list, seconds: float, out) -> None:
    """A client process: one connection per member id, each heartbeating back to back
    (one request in flight); puts its count of answered heartbeats on ``out``."""
    async def beat(member_id: str, stop: float) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frame = request_frame(Api.HEARTBEAT, 4, 1, "probe", dict(group_id="bench", generation_id=generation,
                                                                  member_id=member_id, group_instance_id=None))
        count = 0
        while time.perf_counter() < stop:
            writer.write(frame)
            size = int.from_bytes(await reader.readexactly(4), "big")
            assert (await reader.readexactly(size))[-2:] == b"\0\0", "heartbeat refused"  # error_code NONE
            count += 1
        writer.close()
        return count

    async def run():
        stop = time.perf_counter() + seconds
        return sum(await asyncio.gather(*(beat(m, stop) for m in ids)))
    out.put(asyncio.run(run()))


def heartbeats(server_pid: int, port: int, generation: int, ids: list, seconds: float, processes: int = 2) -> None:
    out = multiprocessing.Queue()
    probes = [multiprocessing.Process(target=probe, args=(port, generation, ids[i::processes], seconds, out))
              for i in range(processes)]
    cpu0, t0 = cpu_seconds(server_pid), time.perf_counter()
    for p in probes:
        p.start()
    count = sum(out.get() for _ in probes)
    cpu, wall = cpu_seconds(server_pid) - cpu0, time.perf_counter() - t0
    for p in probes:
        p.join()
    print(f"heartbeats: {count:,} in {wall:.1f} s on {len(ids)} connections from {processes} client processes: "
          f"{count / cpu:,.0f} per server CPU-second ({cpu:.2f} CPU-s), {count / wall:,.0f}/s")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=100)
    p.add_argument("--seconds", type=float, default=5)
    args = p.parse_args()
    port = free_port()
    server = subprocess.Popen([str(REBALANCE), "serve", "--port", str(port), "--topic", "t:200", 
                               "--initial-rebalance-delay-ms", "0"], stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        generation, ids = asyncio.run(main(args.members, port))
        heartbeats(server.pid, port, generation, ids, args.seconds)
    finally:
        server.terminate()
        server.wait()
