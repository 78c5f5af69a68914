"""`python -m engine.bench export`: the run (its description and flags: engine/bench/flags/export.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.bench.args import read_traces
from engine.bench.harness.cluster_inputs import text_input
from engine.errors import InvalidArgumentError, TraceError
from engine.traces.mooncake import HashRequest, HashTrace, coarser, mooncake_lines

TEXT_BLOCK = 16  # the engine's default block size


def text_trace(args: argparse.Namespace, requests: list, name: str) -> tuple[HashTrace, int]:
    """Requests with text at --block-size: (the hash-id trace, requests left out)."""
    workload, _ = text_input(args, requests, name)
    fresh = max((n for r in workload.requests for n in r.nodes), default=-1) + 1  # ids of no full block
    out = []
    for r in workload.requests:
        ids = list(r.nodes[: r.prompt_blocks])
        if r.prompt_tokens % workload.block_size:
            ids.append(fresh)
            fresh += 1
        out.append(HashRequest(r.time_s, r.prompt_tokens, r.output_tokens, tuple(ids)))
    return HashTrace(workload.block_size, out), workload.refused


def main(args: argparse.Namespace) -> int:
    out: Path = args.out
    if out.is_dir() or (out.exists() and not args.overwrite):
        raise InvalidArgumentError(
            f"--out {out}: " + ("a folder" if out.is_dir() else "exists (pass --overwrite to replace it)")
        )
    inputs = read_traces(args)
    left_out = 0
    if inputs.hash_traces:
        if inputs.requests or len(inputs.hash_traces) > 1:
            raise TraceError("export one hash-id trace at a time, alone (their ids are not comparable)")
        source = inputs.hash_traces[0][1]
        trace = coarser(source, args.block_size or source.block_size)
    else:
        requests = inputs.requests
        if not requests:
            raise TraceError(
                "these traces hold no requests: " + ("; ".join(inputs.notes) or "nothing to export")
            )
        args.block_size = args.block_size or TEXT_BLOCK
        names = [str(t) for t in args.traces]
        trace, left_out = text_trace(args, requests, names[0] if len(names) == 1 else f"{len(names)}-traces")
    try:
        out.write_text("".join(line + "\n" for line in mooncake_lines(trace)))
    except OSError as e:
        raise InvalidArgumentError(f"--out {out}: cannot write ({e.strerror})") from None
    skipped = f", {left_out} left out (no content, or over the model's context)" if left_out else ""
    print(
        f"[{len(trace.requests)} requests at {trace.block_size} tokens per hash id{skipped}; the format does "
        f"not record it: replay with --hash-block-size {trace.block_size}]",
        file=sys.stderr,
    )
    print(f"written: {out}")
    return 0
