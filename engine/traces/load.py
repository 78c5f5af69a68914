"""Read a trace file (a JSON list of requests, one JSON request, or JSONL with one request per line as
proxies log them; UTF-8, a byte-order mark allowed) into `TraceRequest`s, in any of the formats of
`engine.traces.formats`, auto-detected unless forced.

A request may be wrapped in a log envelope: `{"timestamp": ..., "session_id": ..., "body": {...}}` (or
`"request"` for `"body"`). Timestamps are finite numbers of seconds or ISO 8601 strings (one without an
offset is UTC), read from the envelope (`timestamp`, `ts`, `time`, `created_at`); the session from
`session_id`/`session` or `metadata.session_id`, else the trace's path as given (two files of one name in
two folders are two sessions; one file given twice is refused). Anything malformed, a lone surrogate
included, is refused naming the file, the request (1-based) and the field.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.formats import PARSERS, detect
from engine.traces.request import FieldError, TraceRequest
from engine.traces.shipped import trace_path

TIME_KEYS = ("timestamp", "ts", "time", "created_at")
SESSION_KEYS = ("session_id", "session")


def read_entries(path: Path) -> list[Any]:
    """The entries of a trace file: a JSON list, JSONL (one per line), or one JSON request over any lines."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a leading byte-order mark is dropped
    except FileNotFoundError:
        raise TraceError(f"trace file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"trace file {path} cannot be read: {e}") from None
    if text.lstrip().startswith("["):
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as e:
            raise TraceError(f"trace file {path} is not valid JSON: {e}") from None
    else:
        entries = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError as e:
                if entries:
                    raise TraceError(f"{path}: line {n} is not valid JSON: {e}") from None
                entries = [_one_request(path, text, f"line {n}: {e}")]
                break
    if not entries:
        raise TraceError(f"{path}: expected a non-empty JSON list of requests (or one JSON request per line)")
    return entries


def _one_request(path: Path, text: str, as_lines: str) -> Any:
    """The whole text as one JSON request (pretty-printed over several lines); `as_lines` is why it did
    not read as one request per line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(
            f"{path} is not valid JSON, neither as one request ({e}) nor as one request per line ({as_lines})"
        ) from None


def _timestamp(value: Any) -> float | None:
    """Seconds: a finite number, or an ISO 8601 time (UTC where it gives no offset)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise FieldError("timestamp", f"expected a finite number of seconds, got {value!r}")
        return float(value)
    if isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()
    raise FieldError("timestamp", f"expected seconds or an ISO 8601 time, got {value!r:.40}")


def _lone_surrogate(value: Any, where: str = "") -> Iterator[tuple[str, str, int]]:
    """(field, text, index) of each string under `value` holding a lone surrogate (a JSON `\\ud800` escape
    decodes to one; it is not Unicode text and cannot be tokenized)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            yield where or "body", value, e.start
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _lone_surrogate(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _lone_surrogate(item, f"{where}[{i}]")


def unwrap(entry: Any) -> tuple[Any, float | None, str | None]:
    """(request body, timestamp, session) of one entry, envelope or not."""
    if not isinstance(entry, dict):
        return entry, None, None
    body = next((entry[k] for k in ("body", "request") if isinstance(entry.get(k), (dict, list))), entry)
    meta = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
    when = _timestamp(next((entry[k] for k in TIME_KEYS if k in entry), None))
    session = next((str(d[k]) for d in (entry, meta) for k in SESSION_KEYS if d.get(k) is not None), None)
    return body, when, session


def load_trace(path: Path, fmt: str | None = None, name: str | None = None) -> list[TraceRequest]:
    """Every request of the file, in order, in the file's one format (`fmt` forces it); a request without
    a session id is in the session `name` (default: the path as given)."""
    if fmt is not None and fmt not in PARSERS:
        raise TraceError(f"unknown trace format {fmt!r}; choose from {', '.join(PARSERS)}")
    requests, found, first = [], fmt, 0  # `first`: the request that decided the format
    for i, entry in enumerate(read_entries(path)):
        try:
            bad = next(_lone_surrogate(entry), None)
            if bad is not None:
                field, text, at = bad
                raise FieldError(
                    field, f"holds a lone surrogate {text[at]!r} at character {at}: not valid Unicode text"
                )
            body, when, session = unwrap(entry)
            kind = fmt or detect(body)
            if found is None:
                found, first = kind, i
            elif kind is not None and kind != found:
                raise TraceError(
                    f"{path}: request {i + 1} looks like {kind} but request {first + 1} looks like {found}; "
                    "pass --format to read them all as one"
                )
            req = PARSERS[found or "openai-chat"](body)
        except FieldError as e:
            raise TraceError(f"{path}: request {i + 1}: {e}") from None
        requests.append(replace(req, timestamp=when, session=session or name or str(path)))
    return requests


def load_traces(names: Sequence[str], fmt: str | None = None) -> list[TraceRequest]:
    """Every request of every trace, file by file; `example:<format>` names a shipped example. A file named
    twice (by any path) is refused: its requests would be counted twice, as one longer session."""
    seen: dict[Path, str] = {}
    requests = []
    for name in names:
        path = trace_path(name)
        real = path.resolve()
        if real in seen:
            also = f" (as {seen[real]})" if seen[real] != name else ""
            raise TraceError(f"trace {name} is given twice{also}: give each file once")
        seen[real] = name
        requests += load_trace(path, fmt, name)
    return requests
