"""OpenAI Responses API request bodies -> `TraceRequest`.

`instructions` become the system message; `input` is a string (one user message) or a list of items:
`message` items (also the bare `{"role", "content"}` form), tool calls (`function_call`, and the
`custom_tool_call` and `local_shell_call` items Codex records; attached to the assistant message just
before it, as Chat Completions would carry it, else a message of its own) and their outputs (tool
messages). `reasoning` items are dropped (a chat template renders no earlier reasoning), and so are
`web_search_call` items (a server-side search: no text of the conversation). `prompt_cache_key` and
`prompt_cache_retention` are kept as Chat Completions keeps them. Function tools are the tools; tools the
provider runs or groups itself (`web_search`, `file_search`, `namespace`, `mcp`, ..., as Codex sends them)
are not offered to a local model: they are left out of the prompt (`hosted_tools` lists them).
`previous_response_id` is refused: the server-side state it names is not in the trace.
"""

from __future__ import annotations

from typing import Any

from engine.prompts.messages import Message, tool_call
from engine.traces.fields import tool_arguments
from engine.traces.openai_chat import CHAT_ROLES, cache_hints, parts_text
from engine.traces.request import FieldError, TraceRequest, expect, function_tool

DROPPED = ("reasoning", "web_search_call")
CALLS = {
    "function_call": "arguments",
    "custom_tool_call": "input",
    "local_shell_call": "action",
}  # -> arguments
OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def rendered_items(items: list[Any]) -> list[Any]:
    """`items` without those no prompt renders (`DROPPED`)."""
    return [i for i in items if not (isinstance(i, dict) and i.get("type") in DROPPED)]


def _items(body: dict[str, Any]) -> list[Message]:
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else expect(raw, list, "input")
    out: list[Message] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        kind = expect(item, dict, where).get("type", "message")
        if kind == "message":
            role = CHAT_ROLES.get(item.get("role"))
            if role is None or role == "tool":
                raise FieldError(
                    f"{where}.role",
                    f"expected system, developer, user or assistant, got {item.get('role')!r}",
                )
            out.append({"role": role, "content": parts_text(item.get("content"), f"{where}.content")})
        elif kind in CALLS:
            name = (
                "local_shell"
                if kind == "local_shell_call"
                else expect(item.get("name"), str, f"{where}.name")
            )
            arguments = tool_arguments(item.get(CALLS[kind], {}), f"{where}.{CALLS[kind]}")
            call = tool_call(str(item.get("call_id", f"call_{i}")), name, arguments)
            if out and out[-1]["role"] == "assistant":
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind in OUTPUTS:
            output = item.get("output")
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id", "")),
                    "content": parts_text(output, f"{where}.output"),
                }
            )
        elif kind not in DROPPED:
            raise FieldError(
                f"{where}.type",
                f"{kind!r} items are not supported ({', '.join(['message', *CALLS, *OUTPUTS, *DROPPED])})",
            )
    return out


def hosted_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools of a body that are not function tools, which no local model is offered:
    `{"index", "type"}` and the `name` where one is given."""
    out = []
    for j, t in enumerate(expect(body.get("tools") or [], list, "tools")):
        kind = expect(t, dict, f"tools[{j}]").get("type")
        if kind != "function":
            name = {"name": t["name"]} if isinstance(t.get("name"), str) else {}
            out.append({"index": j, "type": kind} | name)
    return out


def parse_responses(body: Any) -> TraceRequest:
    expect(body, dict, "request")
    if body.get("previous_response_id"):
        raise FieldError(
            "previous_response_id",
            "refers to server-side state the trace does not hold; log the full `input` instead",
        )
    messages = _items(body)
    if body.get("instructions") is not None:
        messages.insert(0, {"role": "system", "content": expect(body["instructions"], str, "instructions")})
    if not messages:
        raise FieldError("input", "empty: a request needs at least one item")
    tools = []
    hosted = {t["index"] for t in hosted_tools(body)}
    for j, t in enumerate(body.get("tools") or []):
        if j in hosted:
            continue
        extra = {k: v for k, v in t.items() if k not in ("type", "name", "description", "parameters")}
        tools.append(
            function_tool(t.get("name"), t.get("description"), t.get("parameters"), extra, f"tools[{j}]")
        )
    model = body.get("model")
    return TraceRequest(
        messages, tools or None, model=model if isinstance(model, str) else None, **cache_hints(body)
    )
