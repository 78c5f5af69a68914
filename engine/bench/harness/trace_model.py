"""The model a trace analysis renders with, where none was asked for: the default one if the trace's
longest request fits its context, else the smallest `synthetic:` Qwen2.5-0.5B preset that holds it (Qwen's
tokenizer and chat template, offline; --analyze loads no weights). Agents' sessions run past the bundled
SmolLM2's 8,192 tokens within a few requests."""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest

LONG_CONTEXT = (("synthetic:qwen2.5-0.5b", 32_768), ("synthetic:qwen2.5-0.5b-128k", 131_072))


def _size(req: TraceRequest) -> int:
    """Characters of a request's messages and tool calls: which request is likely the longest."""
    return sum(len(m["content"]) + len(str(m.get("tool_calls", ""))) for m in req.messages)


def longest_prompt(
    tokenizer: PreTrainedTokenizerBase, eos_ids: Sequence[int], requests: Sequence[TraceRequest]
) -> int:
    """Tokens of the request with the most text (rendered with the model's template), 0 without content."""
    with_text = [r for r in requests if r.messages]
    if not with_text:
        return 0
    return len(TraceRenderer(tokenizer, eos_ids).prompt(max(with_text, key=_size)).ids)


def fitting_model(tokens: int) -> str:
    """The smallest long-context preset that holds `tokens` (the largest where none does)."""
    return next((name for name, context in LONG_CONTEXT if tokens <= context), LONG_CONTEXT[-1][0])


def hint(tokens: int) -> str:
    """What the over-context notice suggests for a request of `tokens`."""
    name = fitting_model(tokens)
    return f"--model {name} holds {tokens:,} tokens (Qwen2.5's tokenizer and template, offline, no weights)"
