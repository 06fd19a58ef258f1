"""A recorded trace (spec/TRACE.md) as a timeline a person reads, for a bug report:
one line per group request answered (its client, API, what it said, what it was
answered), a line per fault or restart; heartbeats answered NONE left out.

    python -m catalogue.timeline TRACE.jsonl [--group G]   (from tests/)
    python -m catalogue.timeline --update ../docs/kafka-findings.md

The second form rewrites each ``<!-- timeline: TRACE -->`` block of a page from its
trace, so the bug reports' logs come from the recorded runs, not from a hand.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path


def _short(member_id: str) -> str:
    return member_id[:10] + "…" if len(member_id) > 11 else member_id or "''"


def _partitions(a) -> str:
    if not isinstance(a, dict):
        return "-"
    return ",".join(str(p) for t in a.get("assigned_partitions", ()) for p in t["partitions"]) or "none"


def _request(q: dict) -> str:
    b = q["body"]
    if q["api"] == "JoinGroup":
        meta = (b["protocols"] or [{}])[0].get("metadata") or {}
        owned = [p for t in meta.get("owned_partitions", ()) for p in t["partitions"]]
        return f"JoinGroup(member {_short(b['member_id'])}, instance {b['group_instance_id']}, owns {owned})"
    if q["api"] == "SyncGroup":
        given = "; ".join(f"{_short(a['member_id'])}: {_partitions(a['assignment'])}" for a in b["assignments"])
        return f"SyncGroup(gen {b['generation_id']}, member {_short(b['member_id'])}{', assigns ' + given if given else ''})"
    if q["api"] == "LeaveGroup":
        return "LeaveGroup(" + ", ".join(f"{_short(m['member_id'])}/{m['group_instance_id']}" for m in b["members"]) + ")"
    if q["api"] in ("Heartbeat", "OffsetCommit"):
        return f"{q['api']}(gen {b['generation_id']}, member {_short(b['member_id'])})"
    return f"{q['api']}({', '.join(map(str, b.get('groups', ())))})"


def _response(q: dict, r: dict) -> str:
    b = r["body"]
    if q["api"] == "JoinGroup":
        if b["error"] != "NONE":
            return b["error"] + (f" (member id {_short(b['member_id'])})" if b["member_id"] else "")
        lead = " (leader" + (f", {len(b['members'])} members)" if b["members"] else ")") if b["leader"] == b["member_id"] \
            else f", leader {_short(b['leader'])}"
        return f"NONE gen {b['generation_id']} as {_short(b['member_id'])}{lead}" + \
            (", skip_assignment" if b.get("skip_assignment") else "")
    if q["api"] == "SyncGroup":
        return f"{b['error']}" + (f", assigned {_partitions(b['assignment'])}" if b["error"] == "NONE" else "")
    if q["api"] == "OffsetCommit":
        return ",".join(sorted({p["error"] for t in b["topics"] for p in t["partitions"]}))
    if q["api"] == "DeleteGroups":
        return ", ".join(f"{x['group_id']}: {x['error']}" for x in b["results"])
    return b.get("error", "")


def timeline(path: Path, group: str | None = None) -> list[str]:
    records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    t0, lines, asked, clients = None, [], {}, {}
    for r in records[1:]:
        t0 = t0 if t0 is not None else r["t_ms"]
        at = f"{(r['t_ms'] - t0) / 1000:8.3f} s"
        if r["type"] == "request":
            clients[r["connection"]] = r.get("client_id") or "?"
            asked[(r["connection"], r["correlation_id"])] = r
        elif r["type"] == "response":
            q = asked.pop((r["connection"], r["correlation_id"]), None)
            if q is None or (group and q["body"].get("group_id", group) != group):
                continue
            quiet = q["api"] == "Heartbeat" and r["body"]["error"] == "NONE" or q["api"] == "OffsetCommit" and \
                _response(q, r) == "NONE"
            if quiet or q["api"] in ("OffsetFetch", "DescribeGroups"):
                continue
            lines.append(f"{at}  {clients.get(r['connection'], '?'):>6}  {_request(q)}  ->  {_response(q, r)}")
        elif r["type"] in ("fault", "restart"):
            what = r["fault"] + (f" {r.get('api')} response" if r.get("api") else "") if r["type"] == "fault" \
                else "the broker restarted (loads " + ", ".join(r["groups"]) + ")"
            lines.append(f"{at}  {'':>6}  [{what}]")
    return lines


BLOCK = re.compile(r"(<!-- timeline: (?P<trace>\S+) -->\n```text\n)(.*?)(```\n<!-- /timeline -->)", re.S)


def update(doc: Path) -> int:
    """Rewrite every ``<!-- timeline: TRACE -->`` block of ``doc`` from its trace (a path
    relative to the repository's root); the number of blocks."""
    root = Path(__file__).resolve().parents[2]
    text, n = BLOCK.subn(lambda m: m.group(1) + "\n".join(timeline(root / m.group("trace"))) + "\n" + m.group(4),
                         doc.read_text())
    doc.write_text(text)
    return n


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m catalogue.timeline", description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path, nargs="?")
    p.add_argument("--group")
    p.add_argument("--update", type=Path, metavar="DOC.md", help="rewrite DOC.md's timeline blocks instead")
    a = p.parse_args(argv)
    if a.update:
        print(f"{update(a.update)} timelines written into {a.update}")
    else:
        print("\n".join(timeline(a.trace, a.group)))


if __name__ == "__main__":
    main()
