"""`TraceRequest`: one request an agent sent, normalized to the OpenAI chat form the engine renders.

Every input format parses to this: `messages` have string `content` ("" where a message is only tool
calls), tool-call `arguments` as JSON objects where they parse, tools in the OpenAI function form. What the
hosted rules need beyond the prompt rides along: the time the request was sent, its session and the
Anthropic `cache_control` breakpoints, each kept at the normalized message it closes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.errors import TraceError
from engine.prompts.messages import Message

TOOLS = -1  # a breakpoint's `message` when it closes the tool definitions
FIVE_MINUTES, ONE_HOUR = 300.0, 3600.0
TTLS = {"5m": FIVE_MINUTES, "1h": ONE_HOUR}


@dataclass(frozen=True)
class Breakpoint:
    """An Anthropic `cache_control` marker: the prefix through the end of normalized message `message`
    (or of the tools, TOOLS) is written to / read from the cache, kept for `ttl_s` seconds."""

    message: int
    ttl_s: float = FIVE_MINUTES


@dataclass(frozen=True)
class TraceRequest:
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    timestamp: float | None = None  # seconds (epoch or relative); None: not in the trace
    session: str = ""
    breakpoints: tuple[Breakpoint, ...] = ()
    auto_cache_ttl_s: float | None = None  # Anthropic top-level `cache_control`: automatic caching
    model: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class FieldError(TraceError):
    """Malformed input at `field` (a path like `messages[2].content[0].type`) of one request."""

    def __init__(self, field_path: str, problem: str) -> None:
        super().__init__(f"{field_path}: {problem}")
        self.field_path, self.problem = field_path, problem


def expect(value: Any, kind: type | tuple[type, ...], field_path: str) -> Any:
    """`value` if it is of `kind`, else a FieldError naming the field and what it should have been."""
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise FieldError(
            field_path,
            f"expected {names.replace('str', 'a string').replace('list', 'a list')}"
            f", got {type(value).__name__} {str(value)[:40]!r}",
        )
    return value


def ttl_of(cache_control: Any, field_path: str) -> float:
    """Seconds a `cache_control` marker keeps its entry: 5 min, or 1 h with `"ttl": "1h"`."""
    expect(cache_control, dict, field_path)
    if cache_control.get("type", "ephemeral") != "ephemeral":
        raise FieldError(f"{field_path}.type", f"unknown cache_control type {cache_control.get('type')!r}")
    ttl = cache_control.get("ttl", "5m")
    if ttl not in TTLS:
        raise FieldError(f"{field_path}.ttl", f"expected one of {', '.join(TTLS)}, got {ttl!r}")
    return TTLS[ttl]


def function_tool(
    name: Any, description: Any, parameters: Any, extra: dict[str, Any], field_path: str
) -> dict:
    """A tool definition in the engine's (OpenAI function) form, keys in one order for every format, so
    the same tools render to the same tokens whichever format they came in."""
    fn: dict[str, Any] = {"name": expect(name, str, f"{field_path}.name")}
    if description is not None:
        fn["description"] = expect(description, str, f"{field_path}.description")
    if parameters is not None:
        fn["parameters"] = expect(parameters, dict, f"{field_path}.parameters")
    return {"type": "function", "function": fn | extra}
