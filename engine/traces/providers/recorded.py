"""What a provider's reported usage says about its own cache, for telling where a recorded miss came from:
what a request left cached for the next one, the retention its entries had, and the minimum length,
from the same dated tables the rules use.

- held: Anthropic-style usage reports writes: what a request left is what it read plus what it wrote;
  otherwise the prompt as the provider stores it (OpenAI: its 128-token increments from 1,024; DeepSeek:
  the prompt and the output, its two prefix units; others: the prompt).
- retention: Anthropic 1 hour when the request wrote 1-hour entries, else 5 minutes; OpenAI 24 hours with
  `prompt_cache_retention: "24h"`, else 5 minutes (the documented lower bound); others none documented.
"""

from __future__ import annotations

from engine.traces.providers import deepseek, openai
from engine.traces.providers.anthropic import minimum_tokens
from engine.traces.request import FIVE_MINUTES, ONE_HOUR, TraceRequest
from engine.traces.usage import RecordedUsage

UNITS = {"openai": openai.INCREMENT, "deepseek": deepseek.UNIT}  # reads come in whole units


def held(usage: RecordedUsage) -> int:
    if usage.cache_write_tokens is not None:
        return (usage.cache_read_tokens or 0) + usage.cache_write_tokens
    prompt = usage.prompt_tokens or 0
    if usage.provider == "openai":
        return openai.held(prompt)
    if usage.provider == "deepseek":
        return prompt + (usage.output_tokens or 0)
    return prompt


def retention_s(request: TraceRequest) -> float | None:
    usage = request.recorded
    if usage is None:
        return None
    if usage.provider == "anthropic":
        return ONE_HOUR if (usage.cache_write_1h_tokens or 0) > 0 else FIVE_MINUTES
    if usage.provider == "openai":
        return openai.RETENTION_S[request.cache_retention or "in_memory"]
    return None


def minimum(usage: RecordedUsage) -> int:
    if usage.provider == "anthropic":
        return minimum_tokens(usage.model)
    return openai.MIN_TOKENS if usage.provider == "openai" else 0
