"""`RecordedUsage`: the token counts a provider reported for one request, read from the usage objects of
each API's response and normalized to one meaning. A count the source does not report is None ("not
reported"), never 0.

Normalized: `prompt_tokens` is every input token (cached or not: OpenAI's `prompt_tokens` /
`input_tokens`, Anthropic's `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`,
OpenTelemetry's `gen_ai.usage.input_tokens`); `cache_read_tokens` what was served from the cache;
`cache_write_tokens` what was billed as a cache write (Anthropic), split into 5-minute and 1-hour entries
where the source gives the split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.traces.fields import FieldError, token_count

PROVIDERS = ("openai", "anthropic", "deepseek", "gcp.gemini", "kvtestbed")  # an envelope's `provider`


@dataclass(frozen=True)
class RecordedUsage:
    provider: str  # "anthropic", "openai", ... (the API that reported it)
    model: str | None = None
    prompt_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_5m_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    output_tokens: int | None = None
    # the reporter's own miss reason and the tokens it cost, where it gives one (this project's server; a
    # reason of None: it missed nothing it could have read)
    miss: tuple[str | None, int] | None = None

    @property
    def cached_share(self) -> float | None:
        if self.prompt_tokens is None or self.cache_read_tokens is None or self.prompt_tokens == 0:
            return None
        return self.cache_read_tokens / self.prompt_tokens


def count(source: dict[str, Any], key: str, where: str) -> int | None:
    """A token count (`engine.traces.fields.token_count`), None when absent; anything else is refused naming
    the field."""
    value = source.get(key)
    return None if value is None else token_count(value, f"{where}.{key}")


def _add(*parts: int | None) -> int | None:
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def anthropic_usage(usage: Any, model: str | None, where: str = "usage") -> RecordedUsage:
    """Anthropic's `usage` (Messages responses, Claude Code transcripts): `input_tokens` excludes the
    cache reads and writes."""
    if not isinstance(usage, dict):
        raise FieldError(where, f"expected an object, got {type(usage).__name__}")
    fresh = count(usage, "input_tokens", where)
    read = count(usage, "cache_read_input_tokens", where)
    write = count(usage, "cache_creation_input_tokens", where)
    split = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}
    at = f"{where}.cache_creation"
    return RecordedUsage(
        "anthropic",
        model,
        prompt_tokens=_add(fresh, read or 0, write or 0) if fresh is not None else None,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cache_write_5m_tokens=count(split, "ephemeral_5m_input_tokens", at),
        cache_write_1h_tokens=count(split, "ephemeral_1h_input_tokens", at),
        output_tokens=count(usage, "output_tokens", where),
    )


def openai_usage(
    usage: Any, model: str | None, where: str = "usage", provider: str = "openai"
) -> RecordedUsage:
    """OpenAI's `usage`, Chat Completions (`prompt_tokens`, `prompt_tokens_details.cached_tokens`) or
    Responses (`input_tokens`, `input_tokens_details.cached_tokens`), and DeepSeek's
    `prompt_cache_hit_tokens`: the prompt count includes the reads."""
    if not isinstance(usage, dict):
        raise FieldError(where, f"expected an object, got {type(usage).__name__}")
    chat = "prompt_tokens" in usage
    prompt_key, details_key = (
        ("prompt_tokens", "prompt_tokens_details") if chat else ("input_tokens", "input_tokens_details")
    )
    details = usage.get(details_key) if isinstance(usage.get(details_key), dict) else {}
    read = count(details, "cached_tokens", f"{where}.{details_key}")
    if "prompt_cache_hit_tokens" in usage:  # DeepSeek's spelling of the same count
        read = count(usage, "prompt_cache_hit_tokens", where)
    return RecordedUsage(
        provider,
        model,
        prompt_tokens=count(usage, prompt_key, where),
        cache_read_tokens=read,
        output_tokens=count(usage, "completion_tokens" if chat else "output_tokens", where),
    )


def provider_of(usage: Any, model: str | None, api: str) -> str:
    """The provider that reported a usage object, where nothing names it: DeepSeek by its own fields
    (`prompt_cache_hit_tokens`) or a `deepseek` model name (bare or behind a router's `vendor/` prefix),
    Anthropic by its cache fields or its API, else OpenAI (`api`: the format the body was read as)."""
    fields = usage if isinstance(usage, dict) else {}
    name = (model or "").lower().rsplit("/", 1)[-1]
    if "prompt_cache_hit_tokens" in fields or name.startswith("deepseek"):
        return "deepseek"
    if api == "anthropic" or "cache_read_input_tokens" in fields:
        return "anthropic"
    return "openai"
