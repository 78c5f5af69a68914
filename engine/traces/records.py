"""Reading the files agent harnesses and proxies write: JSONL with the line of every record kept (errors
name it), whole JSON documents (a string holding a lone surrogate refused, naming the line and the field),
and their timestamps. `Read` is what a file-level reader returns: the requests and what it skipped, said in
words for the report."""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import FieldError, refuse_lone_surrogates
from engine.traces.request import TraceRequest


@dataclass
class Read:
    requests: list[TraceRequest]
    notes: list[str] = field(default_factory=list)  # what was skipped or is missing, one line each


def read_text(path: Path) -> str:
    """The file as UTF-8 text, a leading byte-order mark dropped."""
    try:
        return path.read_text(encoding="utf-8-sig")
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
                value = json.loads(line)
                refuse_lone_surrogates(value)
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}: line {n} is not valid JSON: {e}") from None
            except FieldError as e:
                raise TraceError(f"{path}: line {n}: {e}") from None
            out.append((n, value))
    if not out:
        raise TraceError(f"{path}: the file holds no records")
    return out


def json_document(path: Path, text: str | None = None) -> Any:
    try:
        value = json.loads(read_text(path) if text is None else text)
        refuse_lone_surrogates(value)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path} is not valid JSON: {e}") from None
    except FieldError as e:
        raise TraceError(f"{path}: {e}") from None
    return value


def seconds(value: Any, field_path: str, unit: float = 1.0) -> float:
    """A time in seconds since the epoch: a finite number in `unit` seconds (1e-3: milliseconds, 1e-9:
    OTLP's nanoseconds, also as a decimal string) or an ISO 8601 string (UTC where it gives no offset)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise FieldError(field_path, f"expected a finite number of seconds, got {value!r}")
        return float(value) * unit
    if isinstance(value, str):
        if value.isdigit():
            return int(value) * unit
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()
    raise FieldError(field_path, f"expected seconds or an ISO 8601 time, got {value!r:.40}")


def counted(what: str, counts: dict[str, int]) -> list[str]:
    """One note line for skipped records, e.g. `skipped 3 records: 2 summary, 1 queue-operation`."""
    if not counts:
        return []
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return [f"skipped {sum(counts.values())} {what}: {parts}"]
