"""Synthetic traces for measuring at scale: a long agent session (a system prompt of about N tokens, a
repository listing, then per request one more tool call and its result, 20 s apart), and agent traffic
in hash ids (`synthetic_hash_trace`, also the shipped `example:mooncake`)."""

from __future__ import annotations

import itertools
import random

from transformers import PreTrainedTokenizerBase

from engine.prompts.messages import Message, tool_call
from engine.traces.mooncake import HashRequest, HashTrace
from engine.traces.request import TraceRequest

SAMPLE_LINES = 64


def _line(i: int) -> str:
    path = f"src/pkg_{i % 37}/mod_{i}.py"
    return f"{path}: def handler_{i}(request, limit={i % 97}): return route(request, {i * 7})"


def listing(tokenizer: PreTrainedTokenizerBase, tokens: int) -> str:
    """Listing lines, about `tokens` tokens of them (counted on a sample)."""
    sample = "\n".join(_line(i) for i in range(SAMPLE_LINES))
    per_line = len(tokenizer(sample, add_special_tokens=False).input_ids) / SAMPLE_LINES
    return "\n".join(_line(i) for i in range(max(1, round(tokens / per_line))))


def synthetic_session(
    tokenizer: PreTrainedTokenizerBase, requests: int, prompt_tokens: int, session: str = "synthetic"
) -> list[TraceRequest]:
    """`requests` requests of a session whose first prompt is about `prompt_tokens` tokens long."""
    messages: list[Message] = [
        {
            "role": "system",
            "content": "You are a coding agent. The repository:\n" + listing(tokenizer, prompt_tokens),
        },
        {"role": "user", "content": "A request to /health returns 500. Find the handler and fix it."},
    ]
    out = []
    for t in range(requests):
        out.append(TraceRequest(list(messages), None, 20.0 * t, session))
        call = tool_call(f"call_{t}", "read_file", {"path": f"src/pkg_{t % 37}/mod_{t}.py"})
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{t}", "content": f"def handler_{t}(request): ..."}
        )
    return out


def synthetic_hash_trace(sessions: int, seed: int = 0, block: int = 512) -> HashTrace:
    """A seeded agent-traffic trace in hash ids (no text): `sessions` sessions of 1-16 requests each,
    arriving about every 20 s, every session opening with one of 4 shared system prompts (4-16 blocks);
    each request is the previous prompt plus its output (20-400 tokens) plus new tool output or user text
    (50-800 tokens), sent 2-60 s after the previous one, one gap in ten an idle pause of 5-20 minutes.
    Hash ids follow the prompt blocks: a block that was full keeps its id, the rest get new ones."""
    rng = random.Random(seed)
    ids = itertools.count()
    prefixes = [[next(ids) for _ in range(rng.randint(4, 16))] for _ in range(4)]
    out: list[HashRequest] = []
    start = 0.0
    for _ in range(sessions):
        start += rng.expovariate(1 / 20.0)
        prefix = rng.choice(prefixes)
        blocks, tokens, when = list(prefix), len(prefix) * block, start
        for _ in range(rng.randint(1, 16)):
            tokens += rng.randint(50, 800)
            full = len(blocks) if tokens >= len(blocks) * block else len(blocks) - 1
            blocks = blocks[:full] + [next(ids) for _ in range(-(-tokens // block) - full)]
            output = rng.randint(20, 400)
            out.append(HashRequest(round(when, 3), tokens, output, tuple(blocks)))
            tokens += output
            gap = rng.uniform(300, 1200) if rng.random() < 0.1 else rng.uniform(2, 60)
            when += gap
    return HashTrace(block, sorted(out, key=lambda r: r.time_s))
