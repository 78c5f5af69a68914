"""Read a trace file (a JSON list of requests, or JSONL with one request per line as proxies log them) into
`TraceRequest`s, in any of the formats of `engine.traces.formats`, auto-detected unless forced.

A request may be wrapped in a log envelope: `{"timestamp": ..., "session_id": ..., "body": {...}}` (or
`"request"` for `"body"`). Timestamps are numbers of seconds or ISO 8601 strings, read from the envelope
(`timestamp`, `ts`, `time`, `created_at`); the session from `session_id`/`session` or `metadata.session_id`,
else the file's name. Anything malformed is refused naming the request (1-based) and the field. Files
that harnesses, proxies and tracers write (Claude Code, Codex, claude-trace, HAR, OpenTelemetry) are
detected as a whole and read by their own readers (`engine.traces.file_readers`).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.file_readers import read_file
from engine.traces.formats import FILE_FORMATS, FORMATS, PARSERS, detect, detect_file
from engine.traces.records import read_text
from engine.traces.request import FieldError, TraceRequest

TIME_KEYS = ("timestamp", "ts", "time", "created_at")
SESSION_KEYS = ("session_id", "session")


def read_entries(path: Path) -> list[Any]:
    try:
        text = path.read_text()
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
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise TraceError(f"{path}: line {n} is not valid JSON: {e}") from None
    if not entries:
        raise TraceError(f"{path}: expected a non-empty JSON list of requests (or one JSON request per line)")
    return entries


def _timestamp(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise FieldError("timestamp", f"expected seconds or an ISO 8601 time, got {value!r:.40}")


def unwrap(entry: Any) -> tuple[Any, float | None, str | None]:
    """(request body, timestamp, session) of one entry, envelope or not."""
    if not isinstance(entry, dict):
        return entry, None, None
    body = next((entry[k] for k in ("body", "request") if isinstance(entry.get(k), (dict, list))), entry)
    meta = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
    when = _timestamp(next((entry[k] for k in TIME_KEYS if k in entry), None))
    session = next((str(d[k]) for d in (entry, meta) for k in SESSION_KEYS if d.get(k) is not None), None)
    return body, when, session


def load_trace(path: Path, fmt: str | None = None) -> list[TraceRequest]:
    """Every request of the file, in order, in the file's one format (`fmt` forces it)."""
    if fmt is not None and fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r}; choose from {', '.join(FORMATS)}")
    kind = fmt if fmt in FILE_FORMATS else detect_file(read_text(path)) if fmt is None else None
    if kind == "mooncake":
        raise TraceError(f"{path} is a hash-id trace (no text): it is analyzed with --analyze, as hash ids")
    if kind is not None:
        return read_file(path, kind).requests
    requests, found = [], fmt
    for i, entry in enumerate(read_entries(path)):
        try:
            body, when, session = unwrap(entry)
            kind = fmt or detect(body)
            if found is None:
                found = kind
            elif kind is not None and kind != found:
                raise TraceError(
                    f"{path}: request {i + 1} looks like {kind} but request 1 on are {found}; "
                    "pass --format to read them all as one"
                )
            req = PARSERS[found or "openai-chat"](body)
        except FieldError as e:
            raise TraceError(f"{path}: request {i + 1}: {e}") from None
        requests.append(replace(req, timestamp=when, session=session or path.stem))
    return requests
