"""`TraceRequest`: one request an agent sent, normalized to the OpenAI chat form the engine renders.

Every input format parses to this: `messages` have string `content` ("" where a message is only tool
calls), tool-call `arguments` as JSON objects where they parse, tools in the OpenAI function form. What the
cache rules and the miss reasons need beyond the prompt rides along: the time the request was sent, its
session, the link to the request it continues, the content blocks in Anthropic's order with their
`cache_control` breakpoints, OpenAI's cache key and retention, and the usage the provider reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.prompts.messages import Message
from engine.traces.fields import FieldError, expect
from engine.traces.usage import RecordedUsage

if (
    TYPE_CHECKING
):  # annotations only: the server's --help path imports this module, and sampled loads transformers
    from engine.prompts.sampled import SampledReply, SampledUse

FIVE_MINUTES, ONE_HOUR = 300.0, 3600.0
TTLS = {"5m": FIVE_MINUTES, "1h": ONE_HOUR}


@dataclass(frozen=True)
class Breakpoint:
    """An Anthropic `cache_control` marker: the prefix through content block `block` (an index into the
    request's `blocks`, tools -> system -> messages) is written to / read from the cache for `ttl_s`."""

    block: int
    ttl_s: float = FIVE_MINUTES


@dataclass(frozen=True)
class ContentBlock:
    """One content block as a provider hashes it: `key` is its canonical serialization (what identity
    means), `text` what the local tokenizer counts."""

    section: str  # "tools", "system" or "messages"
    key: str
    text: str


@dataclass(frozen=True)
class ServedSteps:
    """When this project's server ran a request, from its own record (`steps`): its run (`server`: when it
    began recording), the engine step whose lookup served the prompt (`admitted`), and after which steps the
    request's published blocks held how many of its tokens, prompt then reply (`published`: (step, tokens))."""

    server: float
    admitted: int
    published: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class TraceRequest:
    messages: list[Message]  # [] only for a usage-only request (a span exported without content)
    tools: list[dict[str, Any]] | None = None
    timestamp: float | None = None  # seconds (epoch or relative); None: not in the trace
    session: str = ""
    breakpoints: tuple[Breakpoint, ...] = ()
    auto_cache_ttl_s: float | None = None  # Anthropic top-level `cache_control`: automatic caching
    model: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    blocks: tuple[ContentBlock, ...] = ()  # () : derived from the messages (engine.traces.blocks)
    request_id: str | None = None  # the response's id where the trace has one (Claude Code message.id)
    parent_id: str | None = None  # the request_id of the request this one continues, where recorded
    parent_missing: bool = False  # it continues a message the trace does not hold
    missing: tuple[str, ...] = ()  # parts of the prompt the trace does not hold: "system", "tools"
    cache_key: str | None = None  # OpenAI `prompt_cache_key`
    cache_retention: str | None = None  # OpenAI `prompt_cache_retention`: "in_memory" or "24h"
    recorded: RecordedUsage | None = None  # what the provider reported for this request
    continue_final: bool = False  # the last message is assistant text the reply continues (a prefill)
    reply_cut: bool = False  # its reply was cut at the token limit (recorded): no end-of-turn token generated
    cache_salt: str = ""  # the cache namespace a server kept it in (engine.serve: the served model name)
    unanswered: tuple[str, ...] = ()  # ids of tool calls its history holds without their results
    source_format: str = ""  # the trace format it was read from (engine.traces.formats.FORMATS)
    # engine.serve: the messages it rendered from replies as their model sampled them (`messages` holds them
    # as rendered), and the reply its own response gave out (engine/prompts/sampled.py)
    as_sampled: tuple[SampledUse, ...] = ()
    sampled: SampledReply | None = None
    steps: ServedSteps | None = None  # when the server that recorded it admitted it and published its blocks


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
