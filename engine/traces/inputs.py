"""Every trace file a command was given, read: `example:<format>` names resolved, folders expanded (every
`.jsonl`, `.json` and `.har` file under them: a Claude Code project folder, a Codex sessions folder), a file
given twice (by any path, or inside a folder also given) refused, since its requests would count twice, as
one longer session; each file's format detected (or forced), Claude Code transcripts read together (a
resumed session's copied history is one request, not two), hash-id traces kept apart (they hold no text),
and what each reader skipped kept as notes, with every request that sends tool calls without their
results (`engine.traces.tool_calls`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from engine.errors import TraceError
from engine.traces.claude_code import read_claude_code
from engine.traces.file_readers import REQUEST_FILES, read_file
from engine.traces.formats import FILE_FORMATS, detect_file
from engine.traces.load import load_trace
from engine.traces.mooncake import HashTrace, read_hash_trace
from engine.traces.records import Read, read_text
from engine.traces.request import TraceRequest
from engine.traces.shipped import trace_path
from engine.traces.supplied import Supplied
from engine.traces.tool_calls import unanswered_calls, unanswered_notes

T = TypeVar("T")
SUFFIXES = (".jsonl", ".json", ".har", ".traj")
NEEDS_SUPPLIED = ("claude-code", "codex", "mini-swe-agent", "swe-agent")  # formats without the tools
MAX_SESSION_CHARS = 256  # a longer session name is shortened (`short_session`): it labels tables and plots


@dataclass
class Inputs:
    requests: list[TraceRequest] = field(default_factory=list)
    hash_traces: list[tuple[Path, HashTrace]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)  # the formats read, in order of first appearance


def is_metadata(path: Path) -> bool:
    """A file a folder of traces holds that is no trace: Claude Code's `subagents/agent-<id>.meta.json` (the
    subagent's type and the tool call that started it)."""
    return path.parent.name == "subagents" and path.name.endswith(".meta.json")


def expand(names: Sequence[str | Path], skipped: list[Path] | None = None) -> list[tuple[Path, str]]:
    """(file, name as given) of every trace file: a file or `example:<format>` as given; a folder as every
    trace file under it, sorted, each named by its path (metadata files left out, and added to `skipped`).
    A file reached twice is refused."""
    out: list[tuple[Path, str]] = []
    seen: dict[Path, str] = {}  # resolved file -> the name it was first given as
    for name in names:
        path = trace_path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
            if skipped is not None:
                skipped += [p for p in found if is_metadata(p)]
            found = [p for p in found if not is_metadata(p)]
            if not found:
                raise TraceError(f"{path}: the folder holds no {', '.join(SUFFIXES)} files")
            files = [(p, str(p)) for p in found]
        else:
            files = [(path, str(name))]
        for file, given in files:
            try:
                real = file.resolve(strict=True)
            except FileNotFoundError:
                raise TraceError(f"trace file {given} does not exist") from None
            except (OSError, RuntimeError) as e:  # a symlink loop (RuntimeError before Python 3.13)
                raise TraceError(
                    f"trace file {given} cannot be read: {getattr(e, 'strerror', None) or e}"
                ) from None
            if real in seen:
                also = f" (as {seen[real]})" if seen[real] != given else ""
                raise TraceError(f"trace {given} is given twice{also}: give each file once")
            seen[real] = given
            out.append((file, given))
    return out


def _kind(path: Path, fmt: str | None) -> str:
    """A file-level format, or "body" for a file of request bodies."""
    if fmt is not None:
        return fmt if fmt in FILE_FORMATS else "body"
    return detect_file(read_text(path)) or "body"


def load_inputs(
    names: Sequence[str | Path],
    fmt: str | None = None,
    supplied: Supplied | None = None,
    hash_block: int | None = None,
) -> Inputs:
    """Every trace of `names` (files, folders, `example:<format>`); a request body without a session id is
    in the session of its file's name as given. A file found in a folder that cannot be read is skipped
    with a note naming it and why (a file named itself is refused)."""
    supplied = supplied or Supplied()
    metadata: list[Path] = []
    given = {str(n) for n in names}
    out = Inputs()
    files = []
    for p, name in expand(names, metadata):
        kind = _skipping(out, p, name not in given, _kind, p, fmt)
        if kind is not None:
            files.append((p, name, kind))
    kinds = list(dict.fromkeys(k for _, _, k in files))
    if (supplied.system is not None or supplied.tools is not None) and not set(kinds) & set(NEEDS_SUPPLIED):
        raise TraceError(
            "--system-file and --tools-file supply what Claude Code transcripts, Codex rollouts and agents' "
            "trajectories lack; these traces carry their own"
        )
    out.formats = [k if k != "body" else fmt or "request bodies" for k in kinds]
    if metadata:
        out.notes.insert(0, f"skipped {len(metadata)} Claude Code subagent metadata files (*.meta.json)")
    claude = [(p, name not in given) for p, name, k in files if k == "claude-code"]
    while claude:  # read together; a folder's file that cannot be read is left out and the rest read again
        try:
            read = read_claude_code([p for p, _ in claude], supplied)
            _keep(out, "Claude Code transcripts", read, "claude-code")
            break
        except TraceError as e:
            bad = next((c for c in claude if c[1] and str(e).startswith(str(c[0]))), None)
            if bad is None:
                raise
            out.notes.append(f"skipped {bad[0]}: {e}")
            claude.remove(bad)
    for path, name, kind in files:
        in_folder = name not in given
        if kind == "mooncake":
            read = _skipping(out, path, in_folder, read_hash_trace, path, hash_block)
            out.hash_traces += [(path, read)] if read is not None else []
        elif kind in REQUEST_FILES and kind != "claude-code":
            read = _skipping(out, path, in_folder, read_file, path, kind, supplied)
            _keep(out, str(path), read or Read([]), kind)
        elif kind == "body":
            out.requests += _skipping(out, path, in_folder, load_trace, path, fmt, name) or []
    out.requests = [
        replace(
            r,
            session=r.session if len(r.session) <= MAX_SESSION_CHARS else short_session(r.session),
            unanswered=unanswered_calls(r.messages),
        )
        for r in out.requests
    ]
    out.notes += unanswered_notes(out.requests)
    return out


def _skipping(out: Inputs, path: Path, in_folder: bool, read: Callable[..., T], *args: Any) -> T | None:
    """`read(*args)`; where it refuses a file found in a folder, None and a note naming the file and why."""
    try:
        return read(*args)
    except TraceError as e:
        if not in_folder:
            raise
        why = str(e).removeprefix(str(path)).lstrip(": ")
        out.notes.append(f"skipped {path}: {why}")
        return None


def short_session(name: str) -> str:
    """A session name over MAX_SESSION_CHARS as its first 48 characters and a digest of the whole: still
    one name per session, and bounded wherever it is shown (a 20 MB session id took minutes and GBs to
    draw in the plots' labels)."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[:48]}...sha256:{digest}"


def _keep(out: Inputs, source: str, read: Read, kind: str) -> None:
    out.requests += [replace(r, source_format=kind) for r in read.requests]
    out.notes += [f"{source}: {note}" for note in read.notes]
