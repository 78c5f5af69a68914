"""Reading the files agent harnesses and proxies write: regular files only (a FIFO would block, a device never
ends), JSONL with the line of every record kept (errors name it), whole JSON documents (a string holding a
lone surrogate refused, naming the line and the field; JSON within `engine.traces.fields`' bounds), and their
timestamps (between the years 1 and 9999). `Read` is what a file-level reader returns: the requests and what
it skipped, said in words for the report."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import FieldError, JSONLimitError, loads
from engine.traces.request import TraceRequest

FIRST_EPOCH_S = dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc).timestamp()  # the years datetime can show
LAST_EPOCH_S = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc).timestamp()
NOT_REGULAR = {
    stat.S_ISDIR: "a folder",
    stat.S_ISFIFO: "a FIFO",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}


@dataclass
class Read:
    requests: list[TraceRequest]
    notes: list[str] = field(default_factory=list)  # what was skipped or is missing, one line each


def read_text(path: Path, what: str = "trace file") -> str:
    """The regular file at `path` as UTF-8 text, a leading byte-order mark dropped; anything else (missing,
    a folder, a FIFO, a device, a symlink loop, not UTF-8) refused in one line naming it as `what`."""
    try:  # opened without blocking, so that a FIFO is refused rather than waited on
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise TraceError(f"{what} {path} does not exist") from None
    except OSError as e:  # a symlink loop, no permission
        raise TraceError(f"{what} {path} cannot be read: {e.strerror or e}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):  # checked before fdopen, which raises on a folder
        os.close(fd)
        kind = next((name for test, name in NOT_REGULAR.items() if test(mode)), "not a regular file")
        raise TraceError(f"{what} {path} is {kind}: give a regular file")
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read().decode("utf-8-sig")
        except MemoryError:
            raise TraceError(f"{what} {path} is too large to read into memory") from None
        except (OSError, UnicodeDecodeError) as e:
            raise TraceError(f"{what} {path} cannot be read: {e}") from None


def json_lines(path: Path, text: str | None = None) -> list[tuple[int, Any]]:
    """(1-based line, value) of every non-empty line."""
    out = []
    for n, line in enumerate((read_text(path) if text is None else text).splitlines(), 1):
        if line.strip():
            try:
                value = loads(line)
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}: line {n} is not valid JSON: {e}") from None
            except (FieldError, JSONLimitError) as e:
                raise TraceError(f"{path}: line {n}: {e}") from None
            out.append((n, value))
    if not out:
        raise TraceError(f"{path}: the file holds no records")
    return out


def json_document(path: Path, text: str | None = None) -> Any:
    try:
        return loads(read_text(path) if text is None else text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path} is not valid JSON: {e}") from None
    except (FieldError, JSONLimitError) as e:
        raise TraceError(f"{path}: {e}") from None


def seconds(value: Any, field_path: str, unit: float = 1.0) -> float:
    """A time in seconds since the epoch: a finite number in `unit` seconds (1e-3: milliseconds, 1e-9:
    OTLP's nanoseconds, also as a decimal string) or an ISO 8601 string (UTC where it gives no offset)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise FieldError(field_path, f"expected a finite number of seconds, got {value!r}")
        return _in_range(float(value) * unit, value, field_path)
    if isinstance(value, str):
        if value.isascii() and value.isdigit() and len(value) <= 30:
            return _in_range(int(value) * unit, value, field_path)
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()
    raise FieldError(field_path, f"expected seconds or an ISO 8601 time, got {value!r:.40}")


def _in_range(s: float, value: Any, field_path: str) -> float:
    if not FIRST_EPOCH_S <= s <= LAST_EPOCH_S:
        raise FieldError(
            field_path, f"{str(value)[:40]} is outside the years 1 to 9999 (as seconds since 1970)"
        )
    return s


def counted(what: str, counts: dict[str, int]) -> list[str]:
    """One note line for skipped records, e.g. `skipped 3 records: 2 summary, 1 queue-operation`."""
    if not counts:
        return []
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return [f"skipped {sum(counts.values())} {what}: {parts}"]
