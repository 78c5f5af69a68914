"""Hash-id traces without text -> `HashRequest`s: what serving benchmarks replay when the prompts cannot be
published. Two layouts:

- Mooncake's (SGLang's and other serving benchmarks replay it): one JSON object per line,
  `{"timestamp" (ms), "input_length", "output_length", "hash_ids": [...]}`, one hash id per block of the
  prompt (512 tokens unless told otherwise: `--hash-block-size`); equal ids are equal prefixes up to
  that block;
- one JSON document `{"block_size", "requests": [{"t" (s), "in", "out", "hash_ids"}]}`, as some public
  agent-traffic traces are published (its own block size).

A request's `hash_ids` must cover its prompt: ceil(input_length / block size) ids (the last one of a
partial block; at least one: a request without input tokens is refused), and its prompt and output fill at
most `MAX_REQUEST_BLOCKS` blocks (the replay holds them all while it serves the request); anything else is
refused naming the line and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import MAX_TOKENS, FieldError, expect, token_count
from engine.traces.records import json_document, json_lines, read_text, seconds

DEFAULT_BLOCK = 512
MAX_REQUEST_BLOCKS = (
    2**20
)  # blocks one request holds while it is served (prompt and output): a bound on memory


@dataclass(frozen=True)
class HashRequest:
    time_s: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


@dataclass(frozen=True)
class HashTrace:
    block_size: int
    requests: list[HashRequest]


def _request(row: Any, keys: tuple[str, str, str], time_unit: float, block: int) -> HashRequest:
    row = expect(row, dict, "request")
    t, n_in, n_out = keys
    when = row.get(t)
    if isinstance(when, bool) or not isinstance(when, (int, float)):
        raise FieldError(t, f"expected a number, got {when!r:.40}")
    ids = expect(row.get("hash_ids"), list, "hash_ids")
    if not all(isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**63 for h in ids):
        raise FieldError("hash_ids", "expected non-negative integer ids")
    n, out = token_count(row.get(n_in), n_in), token_count(row.get(n_out), n_out)
    if n == 0:  # no prompt: nothing to cache, no first token to time
        raise FieldError(n_in, "a request has at least 1 input token, got 0")
    if len(ids) != -(-n // block):
        fits = -(-n // len(ids)) if ids else 0  # the block size these ids would fit, if any
        hint = f"; these ids fit {fits}" if fits and -(-n // fits) == len(ids) else ""
        raise FieldError(
            "hash_ids",
            f"{len(ids)} ids for {n:,} input tokens at {block} per block (expected {-(-n // block)}): "
            f"give the trace's block size with --hash-block-size{hint}",
        )
    if -(-(n + out) // block) > MAX_REQUEST_BLOCKS:
        raise FieldError(
            n_out if out > n else n_in,
            f"{n:,} input and {out:,} output tokens fill {-(-(n + out) // block):,} blocks of {block}; "
            f"a request holds at most {MAX_REQUEST_BLOCKS:,} here",
        )
    return HashRequest(seconds(when, t, time_unit), n, out, tuple(ids))


def read_hash_trace(path: Path, block_size: int | None = None) -> HashTrace:
    """The requests of a hash-id trace; `block_size` overrides the layout's own (512 for Mooncake's)."""
    text = read_text(path)
    if text.lstrip().startswith("{") and '"requests"' in text[:4096]:
        doc = expect(json_document(path, text), dict, "document")
        block = block_size or doc.get("block_size")
        if isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= MAX_TOKENS:
            raise TraceError(f"{path}: block_size: expected a positive integer, got {block!r:.40}")
        rows = [(f"requests[{i}]", r) for i, r in enumerate(expect(doc.get("requests"), list, "requests"))]
        keys, unit = ("t", "in", "out"), 1.0
    else:
        block = block_size or DEFAULT_BLOCK
        rows = [(f"line {n}", r) for n, r in json_lines(path, text)]
        keys, unit = ("timestamp", "input_length", "output_length"), 1e-3
    out = []
    for where, row in rows:
        try:
            out.append(_request(row, keys, unit, block))
        except FieldError as e:
            raise TraceError(f"{path}: {where}: {e}") from None
    if not out:
        raise TraceError(f"{path}: the trace holds no requests")
    return HashTrace(block, out)


def coarser(trace: HashTrace, block_size: int) -> HashTrace:
    """The trace at a block size that is a multiple of its own: a new block's id is the id of the last old
    block it covers (equal ids were equal prefixes up to that block, so they still are)."""
    k = block_size // trace.block_size
    if block_size % trace.block_size:
        raise TraceError(
            f"--block-size {block_size}: a hash-id trace of {trace.block_size}-token blocks can only be "
            f"exported at a multiple of {trace.block_size} (its blocks cannot be split)"
        )
    out = []
    for r in trace.requests:
        n = -(-r.input_length // block_size)
        ids = tuple(r.hash_ids[min((j + 1) * k, len(r.hash_ids)) - 1] for j in range(n))
        out.append(HashRequest(r.time_s, r.input_length, r.output_length, ids))
    return HashTrace(block_size, out)


def mooncake_lines(trace: HashTrace) -> list[str]:
    """The trace in Mooncake's layout, one JSON object per line: timestamps in milliseconds from the first
    request (AIPerf's `--fixed-schedule` and SGLang's bench replay them at those times)."""
    start = min((r.time_s for r in trace.requests), default=0.0)
    return [
        json.dumps(
            {
                "timestamp": round((r.time_s - start) * 1000),
                "input_length": r.input_length,
                "output_length": r.output_length,
                "hash_ids": list(r.hash_ids),
            }
        )
        for r in trace.requests
    ]
