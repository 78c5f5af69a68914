"""Reading the files agent harnesses and proxies write: JSONL with the line of every record kept (errors
name it), whole JSON documents, and their timestamps. `Read` is what a file-level reader returns: the
requests and what it skipped, said in words for the report."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import FieldError
from engine.traces.request import TraceRequest


@dataclass
class Read:
    requests: list[TraceRequest]
    notes: list[str] = field(default_factory=list)  # what was skipped or is missing, one line each


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise TraceError(f"trace file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"trace file {path} cannot be read: {e}") from None


def json_lines(path: Path, text: str | None = None) -> list[tuple[int, Any]]:
    """(1-based line, value) of every non-empty line."""
    out = []
    for n, line in enumerate((read_text(path) if text is None else text).splitlines(), 1):
        if line.strip():
            try:
                out.append((n, json.loads(line)))
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}: line {n} is not valid JSON: {e}") from None
    if not out:
        raise TraceError(f"{path}: the file holds no records")
    return out


def json_document(path: Path, text: str | None = None) -> Any:
    try:
        return json.loads(read_text(path) if text is None else text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path} is not valid JSON: {e}") from None


def seconds(value: Any, field_path: str, unit: float = 1.0) -> float:
    """A time in seconds since the epoch: a number in `unit` seconds (1e-3: milliseconds, 1e-9: OTLP's
    nanoseconds, also as a decimal string) or an ISO 8601 string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) * unit
    if isinstance(value, str):
        if value.isdigit():
            return int(value) * unit
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise FieldError(field_path, f"expected a time (ISO 8601 or a number), got {value!r:.40}")


def counted(what: str, counts: dict[str, int]) -> list[str]:
    """One note line for skipped records, e.g. `skipped 3 records: 2 summary, 1 queue-operation`."""
    if not counts:
        return []
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return [f"skipped {sum(counts.values())} {what}: {parts}"]
