"""Anthropic Messages request bodies -> `TraceRequest`.

`system` (a string or text blocks) becomes the system message, and a message with role `system` after the
first (Claude Code sends them) a system message where it stands; `tool_use` blocks become the assistant
message's tool calls and `tool_result` blocks tool messages, so the conversation renders exactly as its
OpenAI form would. `thinking` blocks are dropped (a chat template renders no earlier reasoning). The
content blocks are kept as the request had them, in Anthropic's order (tools -> system -> messages), and
every `cache_control` marker as a `Breakpoint` on its block; a top-level `cache_control` turns on automatic
caching. More than 4 breakpoints are refused, as the API does. A conversation that ends with assistant
text is a prefill (`continue_final`): the reply continues that text. The tools, the system prompt and each
message are parsed on their own (`Parsed`), so a reader whose requests share those objects parses each once
(`ParseMemo`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from engine.prompts.messages import Message, tool_call
from engine.traces.blocks import system_block, text_block, tool_block, tool_result_block, tool_use_block
from engine.traces.openai_chat import PART_JOIN, parts_text
from engine.traces.request import (
    Breakpoint,
    ContentBlock,
    FieldError,
    TraceRequest,
    expect,
    function_tool,
    ttl_of,
)

MAX_BREAKPOINTS = 4
DROPPED = ("thinking", "redacted_thinking")
T = TypeVar("T")


@dataclass(frozen=True)
class Parsed:
    """What one part of a body (its tools, its system prompt, one message) becomes: normalized messages,
    content blocks, and the breakpoints on them (index among its own blocks, TTL)."""

    messages: tuple[Message, ...]
    blocks: tuple[ContentBlock, ...]
    marks: tuple[tuple[int, float], ...]


class _Builder:
    """Normalized messages, the content blocks and the breakpoints on them, built block by block."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.blocks: list[ContentBlock] = []
        self.breakpoints: list[Breakpoint] = []
        self.text: list[str] = []  # text blocks of the user message being gathered

    def add(self, block: ContentBlock, raw: dict[str, Any], at: str) -> None:
        """Append a block; a `cache_control` on it is a breakpoint there."""
        self.blocks.append(block)
        if "cache_control" in raw:
            self.breakpoints.append(
                Breakpoint(len(self.blocks) - 1, ttl_of(raw["cache_control"], f"{at}.cache_control"))
            )

    def parsed(self) -> Parsed:
        marks = tuple((p.block, p.ttl_s) for p in self.breakpoints)
        return Parsed(tuple(self.messages), tuple(self.blocks), marks)

    def extend(self, part: Parsed) -> None:
        """Append a part parsed on its own (its breakpoints moved past the blocks before it)."""
        self.breakpoints += [Breakpoint(len(self.blocks) + j, ttl) for j, ttl in part.marks]
        self.blocks += part.blocks
        self.messages += part.messages

    def flush_user(self) -> None:
        if self.text:
            self.messages.append({"role": "user", "content": PART_JOIN.join(self.text)})
        self.text = []

    def user(self, content: Any, where: str) -> None:
        for j, block in enumerate(_blocks(content, where)):
            at, kind = f"{where}[{j}]", block["type"]
            if kind == "text":
                text = expect(block.get("text"), str, f"{at}.text")
                self.text.append(text)
                self.add(text_block("user", text), block, at)
            elif kind == "tool_result":
                self.flush_user()
                call_id = str(block.get("tool_use_id", ""))
                result = parts_text(block.get("content"), f"{at}.content")
                self.messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
                self.add(tool_result_block(call_id, result), block, at)
            else:
                raise FieldError(
                    f"{at}.type", f"{kind!r} blocks are not supported in user messages (text, tool_result)"
                )
        self.flush_user()

    def system(self, content: Any, where: str) -> None:
        """A system message in the middle of the conversation (Claude Code sends them)."""
        blocks = _blocks(content, where)
        for j, block in enumerate(blocks):
            if block["type"] != "text":
                raise FieldError(
                    f"{where}[{j}].type", f"{block['type']!r} blocks are not supported in system messages"
                )
            self.add(
                text_block("system", expect(block.get("text"), str, f"{where}[{j}].text")),
                block,
                f"{where}[{j}]",
            )
        self.messages.append({"role": "system", "content": PART_JOIN.join(b["text"] for b in blocks)})

    def assistant(self, content: Any, where: str) -> None:
        text, calls = [], []
        for j, block in enumerate(_blocks(content, where)):
            at, kind = f"{where}[{j}]", block["type"]
            if kind == "text":
                text.append(expect(block.get("text"), str, f"{at}.text"))
                self.add(text_block("assistant", text[-1]), block, at)
            elif kind == "tool_use":
                calls.append(
                    tool_call(
                        str(block.get("id", "")),
                        expect(block.get("name"), str, f"{at}.name"),
                        expect(block.get("input", {}), dict, f"{at}.input"),
                    )
                )
                self.add(tool_use_block(calls[-1]), block, at)
            elif kind not in DROPPED:
                raise FieldError(
                    f"{at}.type",
                    f"{kind!r} blocks are not supported in assistant messages (text, tool_use, thinking)",
                )
        self.messages.append(
            {"role": "assistant", "content": PART_JOIN.join(text)} | ({"tool_calls": calls} if calls else {})
        )


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = expect(content, list, where)
    for j, block in enumerate(blocks):
        expect(expect(block, dict, f"{where}[{j}]").get("type"), str, f"{where}[{j}].type")
    return blocks


def _tools(raw: Any) -> tuple[list[dict[str, Any]], Parsed]:
    b = _Builder()
    tools = []
    for j, t in enumerate(expect(raw or [], list, "tools")):
        at = f"tools[{j}]"
        if "input_schema" not in expect(t, dict, at):
            raise FieldError(
                f"{at}.input_schema", f"missing: server tools ({t.get('type')!r}) are not supported"
            )
        extra = {
            k: v
            for k, v in t.items()
            if k not in ("name", "description", "input_schema", "cache_control", "type")
        }
        tools.append(function_tool(t.get("name"), t.get("description"), t["input_schema"], extra, at))
        b.add(tool_block(tools[-1]), t, at)
    return tools, b.parsed()


def _system(raw: Any) -> Parsed:
    b = _Builder()
    blocks = _blocks(raw, "system")
    for j, x in enumerate(blocks):
        b.add(system_block(parts_text([x], f"system[{j}]")), x, f"system[{j}]")
    b.messages.append({"role": "system", "content": parts_text(blocks, "system")})
    return b.parsed()


def parse_message(message: Any, i: int) -> Parsed:
    """`messages[i]` of a body on its own: a request's messages are parsed one by one."""
    b = _Builder()
    role = expect(message, dict, f"messages[{i}]").get("role")
    if role == "user":
        b.user(message.get("content"), f"messages[{i}].content")
    elif role == "assistant":
        b.assistant(message.get("content"), f"messages[{i}].content")
    elif role == "system":
        b.system(message.get("content"), f"messages[{i}].content")
    else:
        raise FieldError(f"messages[{i}].role", f"expected user, assistant or system, got {role!r}")
    return b.parsed()


class ParseMemo:
    """What a part of a body (its tools, its system prompt, a message) parsed to, by the identity of the
    object parsed: a reader that hands the same objects to many requests (Claude Code's chains share their
    history) parses each once, and its requests share the normalized messages and content blocks. The
    objects are held, so an identity is never reused; they must not change once parsed."""

    def __init__(self) -> None:
        self.held: dict[int, tuple[Any, Any]] = {}

    def get(self, part: Any, parse: Callable[[], T]) -> T:
        held = self.held.get(id(part))
        if held is None or held[0] is not part:
            held = self.held[id(part)] = (part, parse())
        return held[1]


def _now(part: Any, parse: Callable[[], T]) -> T:
    return parse()


def parse_anthropic(body: Any, memo: ParseMemo | None = None) -> TraceRequest:
    expect(body, dict, "request")
    once = memo.get if memo is not None else _now
    b = _Builder()
    tools, parsed = once(body.get("tools"), partial(_tools, body.get("tools")))
    b.extend(parsed)
    if body.get("system") is not None:
        b.extend(once(body["system"], partial(_system, body["system"])))
    raw = expect(body.get("messages"), list, "messages")
    if not raw:
        raise FieldError("messages", "empty: a request needs at least one message")
    for i, m in enumerate(raw):
        b.extend(once(m, partial(parse_message, m, i)))
    auto = ttl_of(body["cache_control"], "cache_control") if body.get("cache_control") is not None else None
    if len(b.breakpoints) + (auto is not None) > MAX_BREAKPOINTS:
        raise FieldError(
            "cache_control",
            f"{len(b.breakpoints) + (auto is not None)} breakpoints; "
            f"Anthropic allows at most {MAX_BREAKPOINTS}",
        )
    if not b.messages:  # every message an empty block list
        raise FieldError("messages", "no message has content: a request needs at least one content block")
    model = body.get("model")
    last = b.messages[-1]
    return TraceRequest(
        b.messages,
        tools or None,
        breakpoints=tuple(b.breakpoints),
        auto_cache_ttl_s=auto,
        model=model if isinstance(model, str) else None,
        blocks=tuple(b.blocks),
        continue_final=last["role"] == "assistant" and bool(last["content"]) and not last.get("tool_calls"),
    )
