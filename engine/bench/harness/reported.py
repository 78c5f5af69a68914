"""What a serving engine says about one request's tokens: prompt, completion and cached tokens, read from
whichever field it returns. Absent is "not reported" (None), never 0.

Cached tokens, the first field present wins (what every client of the API reads comes first):
- `usage.prompt_tokens_details.cached_tokens` (OpenAI; vLLM with `--enable-prompt-tokens-details`, SGLang with
  `--enable-cache-report`, llama.cpp's server, this project's server);
- `usage.prompt_cache_hit_tokens` (DeepSeek);
- `timings.cache_n` (llama.cpp's server, its own field);
- `usage.cache_read_input_tokens` (Anthropic Messages; `cache_creation_input_tokens` is kept beside it);
- `kvtestbed.cached_tokens` (this project's extension object).
Prompt tokens count the whole prompt, cached tokens included: OpenAI's `prompt_tokens`; Anthropic's
`input_tokens + cache_read_input_tokens + cache_creation_input_tokens` (its `input_tokens` excludes both);
llama.cpp's `prompt_n + cache_n` when there is no usage.

Counts that cannot all be true (a negative one, more cached tokens than prompt tokens) are kept as the server
sent them, with `problem` saying why they are impossible: the report flags the request and leaves its counts
out of every total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OPENAI_CACHED = "usage.prompt_tokens_details.cached_tokens"
DEEPSEEK_CACHED = "usage.prompt_cache_hit_tokens"
LLAMA_CPP_CACHED = "timings.cache_n"
ANTHROPIC_CACHED = "usage.cache_read_input_tokens"
KVTESTBED_CACHED = "kvtestbed.cached_tokens"


@dataclass(frozen=True)
class Reported:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # None: the server did not report it
    cache_written_tokens: int | None = None  # Anthropic's cache_creation_input_tokens
    cached_source: str = ""  # the field cached_tokens was read from
    problem: str = ""  # why these counts cannot all be true ("" when they can)


def _int(value: Any) -> int | None:
    """A count as servers send it (an int; a bool or anything else is no count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first(*found: tuple[int | None, str]) -> tuple[int | None, str]:
    return next(((v, src) for v, src in found if v is not None), (None, ""))


def _problem(raw: dict[str, int | None], prompt: int | None, cached: int | None, source: str) -> str:
    """Why the counts the server sent (`raw`: field -> value) cannot all be true, or ""."""
    negative = [f"{name} {v}" for name, v in raw.items() if v is not None and v < 0]
    if negative:
        return f"negative count: {', '.join(negative)}"
    if prompt is not None and cached is not None and cached > prompt:
        return f"{source} {cached} > {prompt} prompt tokens"
    return ""


def from_openai(
    usage: dict[str, Any] | None, timings: dict[str, Any] | None, extension: dict[str, Any] | None
) -> Reported:
    """A Chat Completions answer: its (last) `usage`, llama.cpp's `timings`, the `kvtestbed` object."""
    usage, timings, extension = usage or {}, timings or {}, extension or {}
    details = usage.get("prompt_tokens_details") or {}
    cached, source = _first(
        (_int(details.get("cached_tokens")), OPENAI_CACHED),
        (_int(usage.get("prompt_cache_hit_tokens")), DEEPSEEK_CACHED),
        (_int(timings.get("cache_n")), LLAMA_CPP_CACHED),
        (_int(extension.get("cached_tokens")), KVTESTBED_CACHED),
    )
    prompt = _int(usage.get("prompt_tokens"))
    if prompt is None and _int(timings.get("prompt_n")) is not None:
        prompt = timings["prompt_n"] + (_int(timings.get("cache_n")) or 0)
    completion = _int(usage.get("completion_tokens"))
    if completion is None:
        completion = _int(timings.get("predicted_n"))
    raw = {
        "usage.prompt_tokens": _int(usage.get("prompt_tokens")),
        "usage.completion_tokens": _int(usage.get("completion_tokens")),
        "timings.prompt_n": _int(timings.get("prompt_n")),
        "timings.predicted_n": _int(timings.get("predicted_n")),
        source: cached,
    }
    return Reported(prompt, completion, cached, None, source, _problem(raw, prompt, cached, source))


def from_anthropic(usage: dict[str, Any] | None, extension: dict[str, Any] | None) -> Reported:
    """A Messages answer: its usage (message_start's, updated by message_delta's), the `kvtestbed` object."""
    usage, extension = usage or {}, extension or {}
    read, written = _int(usage.get("cache_read_input_tokens")), _int(usage.get("cache_creation_input_tokens"))
    cached, source = _first(
        (read, ANTHROPIC_CACHED), (_int(extension.get("cached_tokens")), KVTESTBED_CACHED)
    )
    uncached, output = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
    prompt = None if uncached is None else uncached + (read or 0) + (written or 0)
    raw = {
        "usage.input_tokens": uncached,
        "usage.output_tokens": output,
        "usage.cache_creation_input_tokens": written,
        source: cached,
    }
    return Reported(prompt, output, cached, written, source, _problem(raw, prompt, cached, source))
