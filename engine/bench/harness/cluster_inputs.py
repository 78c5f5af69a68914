"""What `bench cluster` simulates, from the traces it was given: hash-id traces as their blocks, every other
format rendered and tokenized as `replay --analyze` renders it (the model's chat template and tokenizer, no
weights), each request with the reply the next request of its session carries."""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import replace
from pathlib import Path

from engine.bench.harness.trace_analysis import open_tokenizer
from engine.cluster.workload import TokenPrompt, Workload, hash_workload, timestamp_first, token_workload
from engine.errors import TraceError
from engine.traces.analysis import replies
from engine.traces.inputs import Inputs
from engine.traces.mooncake import HashTrace
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest
from engine.traces.sessions import request_times


def hash_input(traces: list[tuple[Path, HashTrace]], names: list[str]) -> Workload:
    if len(traces) > 1:
        raise TraceError(
            "bench cluster simulates one hash-id trace at a time (their ids are not comparable across traces)"
        )
    return hash_workload(names[0], traces[0][1])


def clock_line(when: float) -> str:
    """The line a timestamp-first layout puts at the top of the system prompt: the request's own time."""
    if when >= 10**8:  # epoch seconds
        return f"Current time: {dt.datetime.fromtimestamp(when, dt.timezone.utc).isoformat(timespec='seconds')}\n"
    return f"Current time: T+{when:.3f} s\n"


def with_clock(req: TraceRequest, when: float) -> TraceRequest:
    """The request with its time at the top of its system prompt (a system message added if it has none)."""
    msgs = list(req.messages)
    if msgs and msgs[0]["role"] == "system":
        msgs[0] = {**msgs[0], "content": clock_line(when) + str(msgs[0].get("content") or "")}
    else:
        msgs.insert(0, {"role": "system", "content": clock_line(when).rstrip()})
    return replace(req, messages=msgs)


def text_input(
    args: argparse.Namespace, requests: list[TraceRequest], name: str, layout: str = "as-sent"
) -> tuple[Workload, str]:
    """The requests (interleaved by time) as token prompts at --block-size; (workload, model id). A request
    whose prompt plus one token (or plus its reply) exceeds the model's context, which a replay refuses,
    and a request the trace holds no content for, are left out and counted. `timestamp-first`: each
    request's time at the top of its system prompt (`with_clock`)."""
    source, tokenizer = open_tokenizer(args)
    renderer = TraceRenderer(tokenizer, source.eos_ids)
    context = source.config.max_position_embeddings
    following, times = replies(requests), request_times(requests)
    prompts, refused = [], 0
    for req, reply, when in zip(requests, following, times, strict=True):
        if not req.messages:
            refused += 1
            continue
        if layout == "timestamp-first":
            req = with_clock(req, when)
        prompt = renderer.prompt(req)
        reply_ids = renderer.reply(req, prompt, reply) if reply is not None else []
        if len(prompt.ids) + max(1, len(reply_ids)) > context:
            refused += 1
            continue
        recorded = req.recorded.output_tokens if req.recorded is not None else None
        output = len(reply_ids) or recorded or 1
        prompts.append(TokenPrompt(when, req.session, prompt.ids, reply_ids, prompt.text, output))
    if not prompts:
        raise TraceError(
            f"none of the {len(requests)} requests can be simulated (no content, or over context)"
        )
    out = token_workload(name, prompts, args.block_size, refused)
    out.layout = layout
    return out, source.model_id


def workloads_of(args: argparse.Namespace, inputs: Inputs) -> tuple[list[Workload], str | None]:
    """A workload per --layouts, and the model whose tokenizer counted them (None for hash ids)."""
    names = [str(t) for t in args.traces]
    if inputs.hash_traces:
        if inputs.requests:
            raise TraceError("give hash-id traces alone: their blocks and a tokenizer's do not mix")
        sent = hash_input(inputs.hash_traces, names)
        return [sent if layout == "as-sent" else timestamp_first(sent) for layout in args.layouts], None
    if not inputs.requests:
        raise TraceError(
            "these traces hold no requests: " + ("; ".join(inputs.notes) or "nothing to simulate")
        )
    name = names[0] if len(names) == 1 else f"{len(names)}-traces"
    made = [text_input(args, inputs.requests, name, layout) for layout in args.layouts]
    return [w for w, _ in made], made[0][1]
