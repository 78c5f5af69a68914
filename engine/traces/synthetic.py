"""A synthetic long agent session for measuring the analysis at scale: a system prompt of about N tokens
(a repository listing), then per request one more tool call and its result, 20 s apart."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from engine.prompts.messages import Message, tool_call
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
