"""Read a trace file (a JSON list of requests, one JSON request, or JSONL with one request per line as
proxies log them; UTF-8, a byte-order mark allowed) into `TraceRequest`s, in any of the formats of
`engine.traces.formats`, auto-detected unless forced.

A request may be wrapped in a log envelope (`engine.traces.envelope`): its time, its session (else the
trace's path as given: two files of one name in two folders are two sessions), the format of its body (a
file may then mix APIs, as the server's `--record` files do; bodies of no declared format are detected, and
must agree), the usage the response reported, the replies the server rendered back as its model sampled
them (`engine.traces.as_sampled`). A Responses request the server recorded by reference to the response it
continued is rebuilt whole from the file's other lines (`engine.traces.response_chain`). Anything malformed,
a lone surrogate included, is refused naming the file, the request (1-based) and the field. Files that
harnesses, proxies and tracers write (Claude Code, Codex, claude-trace, HAR, OpenTelemetry) are detected as
a whole and read by their own readers (`engine.traces.file_readers`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.as_sampled import SampledReplies
from engine.traces.envelope import cache_salt, recorded_usage, reply_cut, served_steps, unwrap
from engine.traces.fields import JSONLimitError, loads, refuse_lone_surrogates
from engine.traces.file_readers import read_file
from engine.traces.formats import FILE_FORMATS, FORMATS, PARSERS, detect, detect_file
from engine.traces.records import read_text
from engine.traces.request import FieldError, TraceRequest
from engine.traces.response_chain import ChainRebuilder


def read_entries(path: Path, text: str | None = None) -> list[Any]:
    """The entries of a trace file (`text`: what it holds, when already read): a JSON list, JSONL (one per
    line), or one JSON request over any lines."""
    text = read_text(path) if text is None else text
    if text.lstrip().startswith("["):
        try:
            entries = loads(text, strings=False)  # strings are checked per request, naming it
        except json.JSONDecodeError as e:
            raise TraceError(f"trace file {path} is not valid JSON: {e}") from None
        except (FieldError, JSONLimitError) as e:
            raise TraceError(f"{path}: {e}") from None
    else:
        entries = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append(loads(line, strings=False))
            except json.JSONDecodeError as e:
                if entries:
                    raise TraceError(f"{path}: line {n} is not valid JSON: {e}") from None
                entries = [_one_request(path, text, f"line {n}: {e}")]
                break
            except (FieldError, JSONLimitError) as e:
                raise TraceError(f"{path}: line {n}: {e}") from None
    if not entries:
        raise TraceError(f"{path}: expected a non-empty JSON list of requests (or one JSON request per line)")
    return entries


def _one_request(path: Path, text: str, as_lines: str) -> Any:
    """The whole text as one JSON request (pretty-printed over several lines); `as_lines` is why it did
    not read as one request per line."""
    try:
        return loads(text, strings=False)
    except json.JSONDecodeError as e:
        raise TraceError(
            f"{path} is not valid JSON, neither as one request ({e}) nor as one request per line ({as_lines})"
        ) from None
    except (FieldError, JSONLimitError) as e:
        raise TraceError(f"{path}: {e}") from None


def load_trace(path: Path, fmt: str | None = None, name: str | None = None) -> list[TraceRequest]:
    """Every request of the file, in order, in the file's one format (`fmt` forces it); a request without
    a session id is in the session `name` (default: the path as given)."""
    if fmt is not None and fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r}; choose from {', '.join(FORMATS)}")
    text = read_text(path)
    kind = fmt if fmt in FILE_FORMATS else detect_file(text) if fmt is None else None
    if kind == "mooncake":
        raise TraceError(f"{path} is a hash-id trace (no text): it is analyzed with --analyze, as hash ids")
    if kind is not None:
        return [replace(r, source_format=kind) for r in read_file(path, kind).requests]
    requests, found, first = [], fmt, 0  # `first`: the undeclared request that decided the format
    served = True  # every line engine.serve's own --record line
    entries = read_entries(path, text)
    replies = SampledReplies(entries)  # the server's replies as sampled, which its later prompts render
    chains = ChainRebuilder(entries)  # Responses continuations the server recorded by reference
    for i, entry in enumerate(entries):
        try:
            refuse_lone_surrogates(entry)
            envelope = unwrap(chains.whole(entry))
            kind = fmt or envelope.format
            if kind is None:  # detected, and every undeclared body read in the first format detected
                kind = detect(envelope.body)
                if found is None:
                    found, first = kind, i
                elif kind is not None and kind != found:
                    raise TraceError(
                        f"{path}: request {i + 1} looks like {kind} but request {first + 1} looks like "
                        f"{found}; pass --format to read them all as one"
                    )
                kind = found or "openai-chat"
            req = replies.apply(entry, PARSERS[kind](envelope.body))
            recorded = recorded_usage(envelope, kind, req.model)
            steps = served_steps(envelope)
            served = served and envelope.server is not None and envelope.time is not None
        except FieldError as e:
            raise TraceError(f"{path}: request {i + 1}: {e}") from None
        requests.append(
            replace(
                req,
                timestamp=envelope.time,
                session=envelope.session or name or str(path),
                recorded=recorded,
                reply_cut=reply_cut(envelope),
                cache_salt=cache_salt(envelope, req.model),
                source_format=kind,
                steps=steps,
            )
        )
    if served:  # engine.serve writes a line as its request finishes: concurrent requests of one session
        requests.sort(key=lambda r: r.timestamp)  # finish out of the order they were sent, replayed in it
    return requests
