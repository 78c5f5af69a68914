"""Tool calls in the model's output, in the Hermes format Qwen2 / Qwen2.5 / Qwen3's chat templates teach
(`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`), which is also how engine/prompts/chat.py writes
earlier calls into the prompt for templates without a tool section.

All or nothing: when every `<tool_call>` block holds a JSON object with a string `name` and object
`arguments`, the output is those calls plus the text outside them; otherwise (a block that is not JSON, an
unclosed block) the whole output stays text. Nothing is ever dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
BLOCK = re.compile(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Parsed:
    content: str | None  # with calls: the text outside them, trailing whitespace cut (None: none);
    # without: the whole output
    calls: list[ToolCall]


def _call(inner: str) -> ToolCall | None:
    try:
        data = json.loads(inner)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(data["name"], arguments)


def parse_tool_calls(text: str) -> Parsed:
    """The calls in `text` and the text around them; no calls (and `text` as it is) unless all parse."""
    if OPEN not in text:
        return Parsed(text, [])
    calls, outside, cursor = [], [], 0
    for match in BLOCK.finditer(text):
        call = _call(match.group(1).strip())
        if call is None:
            return Parsed(text, [])
        calls.append(call)
        outside.append(text[cursor : match.start()])
        cursor = match.end()
    rest = text[cursor:]
    if OPEN in rest:  # an unclosed (e.g. cut off by max_tokens) or nested block
        return Parsed(text, [])
    content = "".join([*outside, rest]).rstrip()
    return Parsed(content if content.strip() else None, calls)


def content_before_calls(text: str) -> str:
    """What a stream may show before any call: the text before the first `<tool_call>`, without trailing
    whitespace (a parsed output's content starts with exactly this)."""
    return text.split(OPEN, 1)[0].rstrip()
