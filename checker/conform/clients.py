"""The clients side of ``rebalance conform``: what applications observed, judged
without any broker trace (a managed Kafka gives none).

Input: observed logs (spec/OBSERVED.md, schema spec/observed.schema.json), JSONL
files the applications write themselves: rebalance callbacks, records consumed,
commits and their outcomes, and markers (closed, killed, paused, resumed).

Each partition's ownership is rebuilt per member as intervals of wall-clock ms,
Jepsen-Elle style (Kingsbury, Alvaro: Elle, VLDB 2020: judge only what clients
observed, and never more than they observed): an ``assigned`` callback opens an
interval at its entry, a ``revoked`` or ``lost`` callback closes it at its exit,
``closed`` and ``killed`` close every interval of the member, so an interval is
never shorter than the real one. Against those intervals:

- ``exclusive_ownership`` (R9, R41; spec/SPEC.md section 7): a commit acknowledged
  ``ok`` whose whole span (``sent_ms`` .. ``t_ms``) lies outside every interval in
  which its member owned that partition; or two commits of one partition
  acknowledged ``ok`` to two members, both spans inside the overlap of an
  interval of each. Either is DIVERGENT (exit 1): generation fencing
  (GroupCoordinator.handleCommitOffsets) accepts the commits of at most one of
  two owners.
- ``exclusive_processing``: two members' intervals of one partition overlap.
  Expected under pauses (a zombie processes on until it learns it was expelled,
  README "Why exclusive_processing is violated"): an overlap that begins or goes
  on while one of the two members is paused (between its ``paused`` and
  ``resumed`` markers, widened by the skew), or that a member paused while owning
  the partition is in after its resume until its first callback ends its
  ownership (a zombie owns until told), is reported (figures), not a
  divergence. One during which neither was paused is DIVERGENT: the model's
  members process a partition twice only as zombies (spec/SPEC.md section 7), so
  a member that resumed, lost its partitions and was given them again while
  another still owned them is double ownership no pause explains. Nor is an
  overlap of two processes run with one ``group_instance_id`` (KIP-345): the
  coordinator gives the newer process the static member's partitions
  (replaceStaticMember) while the older keeps them until its next request is
  answered FENCED_INSTANCE_ID (R24, R28), a zombie by replacement: an overlap in
  which the member that came first is the replaced one of that pair is reported
  (``replaced``), not a divergence.

An ``unknown`` commit outcome may have been accepted or not: it is never part of a
violation. Commits are only judged by outcome and time; a lost record (a member
resuming after another's commit) is not judged: see spec/OBSERVED.md.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from .verdict import CONFORMS, DIVERGENT, Divergence, Verdict

RULES = frozenset({"R9", "R41"})
INF = float("inf")
RECORD_KINDS = {"assigned": "callback", "revoked": "callback", "lost": "callback", "consumed": "consumed",
                "commit": "commit", "closed": "marker", "killed": "marker", "paused": "marker", "resumed": "marker"}


class ObservedError(ValueError):
    """Malformed observed log: ``str()`` is ``"FILE:LINE: problem"`` (exit 2)."""


class Record(NamedTuple):
    """One record as read: ``where`` is ``"FILE:LINE"`` (``"<records>:N"`` for
    records handed over in memory), ``line`` its 1-based line."""

    where: str
    line: int
    data: dict


class Interval(NamedTuple):
    """``member`` owned ``partition`` ("topic-n") from ``start`` to ``end`` (ms; INF:
    still at the end of the log), opened by the record at ``opened``."""

    member: str
    partition: str
    start: float
    end: float
    opened: Record


@cache
def _validators() -> dict:
    from jsonschema import Draft202012Validator

    schema = json.loads(resources.files("rebalance.spec").joinpath("observed.schema.json").read_text())
    return {kind: Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"],
                                        "$ref": f"#/$defs/{kind}"})
            for kind in ("header", "callback", "consumed", "commit", "marker")}


def _valid(kind: str, data, where: str) -> dict:
    errors = sorted(_validators()[kind].iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        at = "/".join(map(str, e.absolute_path))
        raise ObservedError(f"{where}: {kind} record{' at ' + at if at else ''}: {e.message}")
    return data


def read(sources) -> tuple[dict, list]:
    """Read observed logs: ``sources`` is a path, a list of paths, or a list of
    already-parsed dicts (a header first). Returns ``(topics, records)``:
    ``{topic: partitions}`` from the headers (which must agree) and every record in
    time order (stable: ties keep file order). Raises ObservedError naming
    ``FILE:LINE`` for a line that is not JSON, does not match
    spec/observed.schema.json, a missing or repeated header, a partition the
    header does not list, or ``sent_ms`` after ``t_ms``; OSError for a missing file."""
    if isinstance(sources, (str, Path)):
        sources = [sources]
    sources = list(sources)
    files = [("<records>", list(sources))] if sources and isinstance(sources[0], Mapping) else \
        [(str(p), _lines(Path(p))) for p in sources]
    topics: dict = {}
    records: list = []
    for name, lines in files:
        if not lines:
            raise ObservedError(f"{name}:1: empty log: the header is missing")
        for n, raw in enumerate(lines, 1):
            where = f"{name}:{n}"
            data = raw if isinstance(raw, Mapping) else _json(raw, where)
            if n == 1:
                header = _valid("header", data, where)
                these = {t["name"]: t["partitions"] for t in header["topics"]}
                if topics and these != topics:
                    raise ObservedError(f"{where}: topics {these} differ from another file's {topics}")
                topics = these
                continue
            kind = RECORD_KINDS.get(data.get("event")) if isinstance(data, Mapping) else None
            if kind is None:
                if isinstance(data, Mapping) and "format" in data:
                    raise ObservedError(f"{where}: a second header (only the first line is one)")
                raise ObservedError(f"{where}: not a record: 'event' must be one of {', '.join(RECORD_KINDS)}")
            _valid(kind, data, where)
            for topic, p in _partitions(data):
                if not 0 <= p < topics.get(topic, 0):
                    raise ObservedError(f"{where}: {topic}-{p} is not a partition the header lists")
            if data.get("sent_ms", 0) > data["t_ms"]:
                raise ObservedError(f"{where}: sent_ms {data['sent_ms']} is after t_ms {data['t_ms']}")
            records.append(Record(where, n, dict(data)))
    records.sort(key=lambda r: r.data["t_ms"])
    return topics, records


def _lines(path: Path) -> list:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _json(raw: str, where: str):
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ObservedError(f"{where}: not JSON ({e.msg} at column {e.colno}): a partial line?") from None


def _partitions(data: dict) -> list:
    if "partitions" in data:
        return [(tp["topic"], tp["partition"]) for tp in data["partitions"]]
    if "offsets" in data:
        return [(tp["topic"], tp["partition"]) for tp in data["offsets"]]
    if "partition" in data:
        return [(data["topic"], data["partition"])]
    return []


def ownership(records: Iterable[Record]) -> list:
    """Every ownership ``Interval``, from records in time order."""
    open_: dict = {}  # (member, partition) -> (start, record)
    out: list = []

    def close(member, partition, t):
        start, opened = open_.pop((member, partition))
        out.append(Interval(member, partition, start, t, opened))

    for r in records:
        d = r.data
        m, event, t = d["member"], d["event"], d["t_ms"]
        if event == "assigned":
            for topic, p in _partitions(d):
                open_.setdefault((m, f"{topic}-{p}"), (t, r))
        elif event in ("revoked", "lost"):
            for topic, p in _partitions(d):
                if (m, f"{topic}-{p}") in open_:
                    close(m, f"{topic}-{p}", t)
        elif event in ("closed", "killed"):
            for key in [k for k in open_ if k[0] == m]:
                close(*key, t)
    out.extend(Interval(m, p, start, INF, opened) for (m, p), (start, opened) in open_.items())
    return sorted(out, key=lambda i: (i.start, i.member, i.partition))


def check(sources, options: Mapping | None = None) -> Verdict:
    """Judge observed logs (see ``read`` for ``sources``). ``options``:
    ``{"skew_ms": N}``, the most two writers' clocks may differ (ms, default 0):
    intervals are widened by it before a commit is called outside its member's
    ownership, and overlaps narrowed by it before two commits are called shared.
    Returns a Verdict: DIVERGENT naming ``exclusive_ownership`` or
    ``exclusive_processing`` (every divergence, in time order), else CONFORMS;
    ``figures`` counts records, members, intervals, commits by outcome, and lists the
    ``exclusive_processing`` overlaps (partition, members, from/to ms, the members
    paused meanwhile, the member replaced by the other). Raises ObservedError (exit 2) for malformed input."""
    skew = (options or {}).get("skew_ms", 0) or 0
    topics, records = read(sources)
    intervals = ownership(records)
    by_partition: dict = {}
    for i in intervals:
        by_partition.setdefault(i.partition, []).append(i)
    commits = [r for r in records if r.data["event"] == "commit"]
    overlaps = _overlaps(by_partition, records, skew)
    found = _outside(commits, by_partition, skew) + _shared(commits, by_partition, skew) + \
        _unexplained(overlaps, by_partition)
    figures = {"records": len(records), "members": len({r.data["member"] for r in records}),
               "intervals": len(intervals),
               "commits": {o: sum(r.data["outcome"] == o for r in commits) for o in ("ok", "error", "unknown")},
               "exclusive_processing": overlaps}
    if not found:
        return Verdict(CONFORMS, len(records), RULES, figures=figures)
    ordered = tuple(d for _, d in sorted(found, key=lambda f: f[0]))
    return Verdict(DIVERGENT, len(records), RULES, divergence=ordered[0], figures=figures, divergences=ordered)


def _span(r: Record) -> tuple:
    return r.data.get("sent_ms", r.data["t_ms"]), r.data["t_ms"]


def _ok(commits) -> Iterable:
    """(record, partition) for every partition of every commit acknowledged ok."""
    for r in commits:
        if r.data["outcome"] == "ok":
            for tp in r.data["offsets"]:
                yield r, f"{tp['topic']}-{tp['partition']}"


def _outside(commits, by_partition, skew) -> list:
    found = []
    for r, p in _ok(commits):
        m, (sent, acked) = r.data["member"], _span(r)
        own = [i for i in by_partition.get(p, []) if i.member == m]
        if any(i.start - skew <= acked and sent <= i.end + skew for i in own):
            continue
        owned = ", ".join(f"{_ms(i.start)}..{_ms(i.end)}" for i in own) or "never"
        found.append(((acked, r.where), Divergence(
            r.line, r.data, "clients", "exclusive_ownership",
            (f"a commit of {p} acknowledged ok only while {m} owns it (owned {owned})",),
            f"{r.where}: {m}'s commit of {p} was acknowledged ok at {_ms(acked)} outside its ownership of {p}: "
            "generation fencing (R9) should have refused it",
            tuple((i.opened.line, i.opened.data) for i in own) + ((r.line, r.data),))))
    return found


def _shared(commits, by_partition, skew) -> list:
    found = []
    ok = sorted(_ok(commits), key=lambda c: (c[0].data["t_ms"], c[0].where))
    for k, (b, p) in enumerate(ok):
        for a, q in ok[:k]:
            if q != p or a.data["member"] == b.data["member"]:
                continue
            pair = _shared_interval(by_partition.get(p, []), a, b, skew)
            if pair is None:
                continue
            ia, ib = pair
            found.append(((b.data["t_ms"], b.where), Divergence(
                b.line, b.data, "clients", "exclusive_ownership",
                (f"commits of {p} acknowledged ok to at most one of two members owning it at once",),
                f"{b.where}: commits of {p} acknowledged ok to both {a.data['member']} ({a.where}, at "
                f"{_ms(a.data['t_ms'])}) and {b.data['member']} (at {_ms(b.data['t_ms'])}) while both owned it "
                f"({ia.member} {_ms(ia.start)}..{_ms(ia.end)}, {ib.member} {_ms(ib.start)}..{_ms(ib.end)})",
                ((ia.opened.line, ia.opened.data), (ib.opened.line, ib.opened.data), (a.line, a.data),
                 (b.line, b.data)))))
            break
    return found


def _shared_interval(intervals, a: Record, b: Record, skew):
    """An interval of a's member and one of b's whose overlap (narrowed by the
    skew) holds both commits' spans, or None."""
    for ia in (i for i in intervals if i.member == a.data["member"]):
        for ib in (i for i in intervals if i.member == b.data["member"]):
            lo, hi = max(ia.start, ib.start) + skew, min(ia.end, ib.end) - skew
            if all(lo <= _span(c)[0] and _span(c)[1] <= hi for c in (a, b)):
                return ia, ib
    return None


def pauses(records) -> dict:
    """``{member: [(paused ms, resumed ms or INF), ...]}`` from the markers, in time order."""
    out: dict = {}
    for r in records:
        event, m = r.data["event"], r.data["member"]
        if event == "paused":
            out.setdefault(m, []).append([r.data["t_ms"], INF])
        elif event == "resumed" and out.get(m) and out[m][-1][1] == INF:
            out[m][-1][1] = r.data["t_ms"]
    return {m: [tuple(x) for x in spans] for m, spans in out.items()}


def _learned(records) -> dict:
    """``{member: [(resumed ms, ms of its first callback or closed/killed marker after), ...]}``
    (INF when none follows): a resumed zombie processes the partitions it owned until it
    learns, at its next response, that they are gone (spec/SPEC.md section 7)."""
    out: dict = {}
    for r in records:
        event, m, t = r.data["event"], r.data["member"], r.data["t_ms"]
        if event == "resumed":
            out.setdefault(m, []).append([t, INF])
        elif (RECORD_KINDS[event] == "callback" or event in ("closed", "killed")) and out.get(m) \
                and out[m][-1][1] == INF:
            out[m][-1][1] = t
    return {m: [tuple(x) for x in spans] for m, spans in out.items()}


def _zombie(i: Interval, lo: float, hi: float, paused: dict, learned: dict, skew: float) -> bool:
    """Whether ``i``'s member was a zombie during the overlap ``lo..hi`` of ``i`` with another
    member's interval: paused meanwhile (widened by ``skew``), or paused while owning ``i``'s
    partition and, resumed before ``hi``, not yet told it lost it (``i`` ends at its first
    callback after the resume: the response that ends a zombie's ownership)."""
    for start, end in paused.get(i.member, ()):
        if start - skew <= hi and lo <= end + skew:
            return True
        if i.start - skew <= start and end <= hi and \
                any(r == end and i.end <= t + skew < INF for r, t in learned.get(i.member, ())):
            return True
    return False


def _first_seen(records) -> dict:
    """``{member: t_ms of its first record}``."""
    out: dict = {}
    for r in records:
        out.setdefault(r.data["member"], r.data["t_ms"])
    return out


def _replaced(a: Interval, b: Interval, first: dict) -> list:
    """``[the older member]`` when ``a`` and ``b`` were opened by two processes with one
    ``group_instance_id`` (KIP-345), the older one seen first: a replaced static member
    keeps its partitions until its next request is fenced (R28); else ``[]``."""
    iid = a.opened.data.get("group_instance_id")
    if iid is None or iid != b.opened.data.get("group_instance_id"):
        return []
    return [min((a.member, b.member), key=lambda m: (first[m], m))]


def _overlaps(by_partition, records, skew=0) -> list:
    """Every overlap of two members' intervals of one partition, with the members that
    were zombies during it (``_zombie``: paused meanwhile, or resumed and not yet told)
    and the member replaced by the other (``_replaced``)."""
    paused, learned, first = pauses(records), _learned(records), _first_seen(records)
    out = []
    for p, intervals in sorted(by_partition.items()):
        for k, a in enumerate(intervals):
            for b in intervals[k + 1:]:
                lo, hi = max(a.start, b.start), min(a.end, b.end)
                if a.member != b.member and lo < hi:
                    zombies = sorted(i.member for i in (a, b) if _zombie(i, lo, hi, paused, learned, skew))
                    out.append({"partition": p, "members": [a.member, b.member], "from_ms": lo,
                                "to_ms": None if hi == INF else hi, "paused": zombies,
                                "replaced": _replaced(a, b, first)})
    return out


def _unexplained(overlaps, by_partition) -> list:
    """An overlap that neither a pause nor a static member's replacement explains: a divergence."""
    found = []
    for o in overlaps:
        if o["paused"] or o["replaced"]:
            continue
        p, (a, b), lo = o["partition"], o["members"], o["from_ms"]
        hi = INF if o["to_ms"] is None else o["to_ms"]
        opened = [i.opened for i in by_partition[p] if i.member in (a, b) and i.start <= lo < i.end]
        last = max(opened, key=lambda r: r.data["t_ms"])
        found.append(((lo, last.where), Divergence(
            last.line, last.data, "clients", "exclusive_processing",
            (f"{p} owned by one member at a time, or by two only while one of them is paused or replaced by "
             "the other's group.instance.id (a zombie)",),
            f"{last.where}: {p} owned by both {a} and {b} from {_ms(lo)} to {_ms(hi)}, neither paused meanwhile "
            "nor one replaced by the other: double ownership no pause explains",
            tuple((r.line, r.data) for r in opened))))
    return found


def _ms(t: float) -> str:
    return "end" if t == INF else f"{t:.0f}"
