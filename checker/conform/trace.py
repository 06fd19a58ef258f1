"""Reading a v2 trace (spec/TRACE.md): every line parsed and validated against
spec/trace.schema.json, plus what a schema cannot say about a sequence of lines.

``read(path) -> Trace(header, records)``; ``records`` is ``((line, record), ...)``
with 1-based line numbers, the header excluded. Raises ``TraceError(line,
reason)`` for the first malformed line (the command prints
``trace.jsonl:LINE: reason`` and exits 2):

* a line that is not JSON (a partial last line: the recorder was killed mid-line);
* a line the schema rejects (the first error jsonschema finds, with its path);
* no header on line 1 (a v1 trace), or a header anywhere else;
* ``t_ms`` smaller than the previous record's ("reordered");
* a record on a connection not opened before (``open``), or after its ``close``;
* a response without its request before it on that connection (same
  ``correlation_id``), or a second response to one request.

Validation is per record against the schema branch its ``type`` (and ``api``)
select, built once from the normative schema: the branches of the schema's
``oneOf`` are mutually exclusive by ``type`` and ``api`` constants, so this is
the same judgement as the whole schema, without trying every branch (and its
error names the field, not "not valid under any of the given schemas").
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import jsonschema

from rebalance import spec as spec_package

SCHEMA_PATH = Path(spec_package.__file__).resolve().parent / "trace.schema.json"
RECORD_TYPES = ("header", "open", "close", "request", "response", "restart", "expire", "topics", "fault")
APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch", "DescribeGroups", "DeleteGroups",
        "ConsumerGroupHeartbeat", "ConsumerGroupDescribe")


class TraceError(Exception):
    """A malformed trace: ``line`` (1-based; 0 for the file as a whole) and ``reason``."""

    def __init__(self, line: int, reason: str):
        super().__init__(f"line {line}: {reason}")
        self.line, self.reason = line, reason


class Trace(NamedTuple):
    """``header``: the header record (dict); ``records``: ((line, record), ...) after it."""

    header: dict
    records: tuple
    path: str = ""

    @property
    def settings(self) -> dict:
        return self.header["settings"]


class _Validators:
    """One jsonschema validator per (record type, api), built once from the schema."""

    def __init__(self):
        schema = json.loads(SCHEMA_PATH.read_text())
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        self.by_key, self.bodies = {}, {}
        defs = schema["$defs"]
        inline = _Inliner(defs)
        for kind in RECORD_TYPES:
            if kind in ("request", "response"):
                for branch in defs[kind]["oneOf"]:
                    # the one branch this api selects, merged into the record's schema: with a single
                    # branch, unevaluatedProperties over root and branch is additionalProperties over both
                    api = branch["properties"]["api"]["const"]
                    root = {k: v for k, v in defs[kind].items() if k not in ("oneOf", "unevaluatedProperties")}
                    root["properties"] = dict(root["properties"], **branch["properties"])
                    root["additionalProperties"] = False
                    self.by_key[(kind, api)] = cls(inline(root))
                    self.bodies[(kind, api)] = cls(inline(branch["properties"]["body"]))
            else:
                self.by_key[(kind, None)] = cls(inline(defs[kind]))

    def error(self, record) -> str | None:
        """The first schema error of ``record``, readable, or None if it is valid."""
        if not isinstance(record, dict) or record.get("type") not in RECORD_TYPES:
            kind = record.get("type") if isinstance(record, dict) else None
            return f"schema: unknown record type {kind!r} (expected one of {', '.join(RECORD_TYPES)})"
        kind = record["type"]
        api = record.get("api") if kind in ("request", "response") else None
        if kind in ("request", "response") and api not in APIS:
            return f"schema: unknown api {api!r} (expected one of {', '.join(APIS)})"
        validator = self.by_key[(kind, api)]
        if validator.is_valid(record):
            return None
        body = self.bodies.get((kind, api))
        if body is not None and isinstance(record.get("body"), dict) and not body.is_valid(record["body"]):
            best, prefix = jsonschema.exceptions.best_match(body.iter_errors(record["body"])), ["body"]
        else:
            best, prefix = jsonschema.exceptions.best_match(validator.iter_errors(record)), []
        where = "/".join(str(p) for p in prefix + list(best.absolute_path))
        message = best.message if len(best.message) <= 200 else best.message[:200] + "..."
        return f"schema: {message}" + (f" (at {where})" if where else "")


class _Inliner:
    """The schema's local ``$ref``s (``#/$defs/NAME``, none recursive) replaced by
    what they name, so validation resolves no reference per record."""

    def __init__(self, defs: dict):
        self.defs = defs

    def __call__(self, node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref is not None and ref.startswith("#/$defs/") and len(node) == 1:
                return self(self.defs[ref[len("#/$defs/"):]])
            return {k: self(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self(v) for v in node]
        return node


_validators: _Validators | None = None


def validators() -> _Validators:
    global _validators
    if _validators is None:
        _validators = _Validators()
    return _validators


def parse(lines, path: str = "") -> Trace:
    """A Trace from an iterable of text lines (each with or without its ``\\n``).
    Raises TraceError."""
    v = validators()
    header = None
    records = []
    last_t = None
    open_conns: set = set()
    ended: set = set()  # connections a restart ended, not yet closed by their recorder
    seen_conns: set = set()
    pending: dict = {}  # (connection, correlation_id) -> line of a request not yet answered
    answered: set = set()
    lineno = 0
    for lineno, text in enumerate(lines, 1):
        complete = text.endswith("\n")
        text = text.strip()
        if not text:
            if complete:
                raise TraceError(lineno, "empty line")
            continue
        try:
            record = json.loads(text)
        except ValueError as e:
            if not complete:
                raise TraceError(lineno, f"partial last line (the recorder stopped mid-line): {e}") from None
            raise TraceError(lineno, f"not JSON: {e}") from None
        if lineno == 1 and not (isinstance(record, dict) and record.get("type") == "header"):
            raise TraceError(1, "trace format v1 (no header): record it again with this version")
        error = v.error(record)
        if error is not None:
            raise TraceError(lineno, error)
        kind = record["type"]
        if kind == "header":
            if lineno != 1:
                raise TraceError(lineno, "a header after line 1 (one trace per file; the header comes first, once)")
            header = record
            continue
        t = record["t_ms"]
        if last_t is not None and t < last_t:
            raise TraceError(lineno, f"reordered: t_ms {t} is before the previous record's {last_t}")
        last_t = t
        conn = record.get("connection")
        if kind == "open":
            if conn in seen_conns:
                raise TraceError(lineno, f"connection {conn!r} opened twice")
            seen_conns.add(conn)
            open_conns.add(conn)
        elif kind == "restart":
            ended |= open_conns  # a restarted coordinator starts with no connection
            open_conns.clear()
        elif kind in ("expire", "topics") or (kind == "fault" and conn is None):
            pass  # names groups or topics, or the whole server (impl/faults.py): no connection
        elif kind == "close" and conn in ended:
            ended.discard(conn)  # a proxy closes its side of a connection the restart ended when it notices
        elif conn not in open_conns:
            raise TraceError(lineno, f"connection {conn!r} used before it was opened"
                             if conn not in seen_conns else f"connection {conn!r} used after it closed")
        elif kind == "close":
            open_conns.discard(conn)
        elif kind == "request":
            key = (conn, record["correlation_id"])
            if key in pending:
                raise TraceError(lineno, f"a second request with correlation_id {key[1]} on {conn!r} "
                                         f"(line {pending[key][0]}) before its response")
            pending[key] = (lineno, record["api"])
        elif kind == "response":
            key = (conn, record["correlation_id"])
            if key not in pending:
                raise TraceError(lineno, f"a second response to correlation_id {key[1]} on {conn!r}"
                                 if key in answered else
                                 f"reordered: a response on {conn!r} (correlation_id {key[1]}) before its request")
            request_line, api = pending.pop(key)
            answered.add(key)
            if api != record["api"]:
                raise TraceError(lineno, f"a {record['api']} response to a {api} request (line {request_line})")
        records.append((lineno, record))
    if header is None:
        raise TraceError(lineno, "empty trace: no header")
    return Trace(header, tuple(records), path)


def read(path) -> Trace:
    """Read and check the trace at ``path``. Raises TraceError (OSError and bad UTF-8
    included, as line 0)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return parse(f, str(path))
    except OSError as e:
        raise TraceError(0, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TraceError(0, f"not UTF-8: {e}") from None
