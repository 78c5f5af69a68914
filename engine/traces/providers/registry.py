"""The cache rules by name, as `--rules` takes them: the local engine's, then the hosted providers'."""

from __future__ import annotations

from collections.abc import Callable

from engine.errors import TraceError
from engine.traces.providers.anthropic import AnthropicRule
from engine.traces.providers.base import CacheRule
from engine.traces.providers.deepseek import DeepSeekRule
from engine.traces.providers.deepseek_2024 import DeepSeek2024Rule
from engine.traces.providers.gemini import GeminiRule
from engine.traces.providers.openai import OpenAIRule

LOCAL = "local"  # built apart: it needs the engine's block manager
HOSTED: dict[str, Callable[[], CacheRule]] = {
    "openai": OpenAIRule,
    "anthropic": AnthropicRule,
    "deepseek": DeepSeekRule,
    "deepseek-2024": DeepSeek2024Rule,
    "gemini": GeminiRule,
}
ALL = ",".join([LOCAL, *HOSTED])


def rule_names(text: str) -> list[str]:
    """`local,openai,...` as a list of known rule names, `local` first (always there: it is the engine's)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n != LOCAL and n not in HOSTED]
    if unknown:
        raise TraceError(f"unknown cache rule {unknown[0]!r}; choose from {ALL}")
    return [LOCAL, *dict.fromkeys(n for n in names if n != LOCAL)]
