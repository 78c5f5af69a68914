"""`TraceRequest` -> the request body a serving engine takes: OpenAI Chat Completions, OpenAI Responses or
Anthropic Messages.

Each body parses back (engine/traces/openai_chat.py, responses.py, anthropic_messages.py) to the same
messages and tools, and for Anthropic the same `cache_control` breakpoints, so a request sent to a server
renders to the tokens the trace's request renders to. Tool-call arguments go out as JSON strings (OpenAI) or objects (Anthropic);
a leading system message becomes Anthropic's `system`; consecutive tool results and the user text right
after them share one Anthropic user turn, as the parser reads them. What one API cannot express is refused
by name: a system message after the first message (unless written as a `system` turn, as Claude Code sends
them: `system_turns`), or non-JSON tool-call arguments, for Anthropic.
`as_sent` reads a body back as the server reads it, for what the server renders.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from engine.errors import TraceError
from engine.prompts.messages import Message
from engine.traces.blocks import derived_blocks
from engine.traces.formats import PARSERS
from engine.traces.request import ONE_HOUR, ContentBlock, TraceRequest

OPENAI, ANTHROPIC = "openai", "anthropic"
PARSED_AS = {OPENAI: "openai-chat", ANTHROPIC: "anthropic"}  # the trace format a body of each API is


def with_call_ids(messages: list[Message]) -> list[Message]:
    """The messages with every tool call and tool result paired by an id, as both APIs require: a call
    without one gets `call_<message>_<k>`, a result without one the id of the next unanswered call before it."""
    out: list[Message] = []
    pending: list[str] = []
    for i, m in enumerate(messages):
        if m.get("tool_calls"):
            calls = [c if c.get("id") else c | {"id": f"call_{i}_{k}"} for k, c in enumerate(m["tool_calls"])]
            m, pending = m | {"tool_calls": calls}, [c["id"] for c in calls]
        elif m["role"] == "tool":
            given = m.get("tool_call_id")
            m = m if given else m | {"tool_call_id": pending[0] if pending else ""}
            pending = [p for p in pending if p != m["tool_call_id"]]
        out.append(m)
    return out


def openai_body(req: TraceRequest) -> dict[str, Any]:
    """The request's `messages` and `tools` as a Chat Completions body (no model or sampling fields)."""
    messages = []
    for m in with_call_ids(req.messages):
        out: dict[str, Any] = {"role": m["role"], "content": m["content"]}
        if m.get("tool_calls"):
            out["content"] = m["content"] or None  # a message of calls only has null content
            out["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["function"]["name"], "arguments": _json(c["function"])},
                }
                for c in m["tool_calls"]
            ]
        if m["role"] == "tool":
            out["tool_call_id"] = m.get("tool_call_id", "")
            if "name" in m:
                out["name"] = m["name"]
        messages.append(out)
    return {"messages": messages} | ({"tools": list(req.tools)} if req.tools else {})


def _json(function: dict[str, Any]) -> str:
    arguments = function["arguments"]
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _marker(ttl_s: float) -> dict[str, str]:
    return {"type": "ephemeral"} | ({"ttl": "1h"} if ttl_s >= ONE_HOUR else {})


def _role(block: ContentBlock) -> str | None:
    return json.loads(block.key).get("role")


def normalized_positions(req: TraceRequest, where: str) -> list[int]:
    """For each of the request's content blocks (`req.blocks`, tools -> system -> messages), the index of
    the block of the normalized request (`derived_blocks`: what a body built from the messages holds) it
    became. Blocks the parser joined (several text blocks of one user turn) all map to the joined one."""
    derived = derived_blocks(req)
    if not req.blocks:
        return list(range(len(derived)))
    out, d = [], 0
    for block in req.blocks:
        while d < len(derived):
            here = derived[d]
            if here.key == block.key:
                out.append(d)
                d += 1
                break
            joined = here.section == block.section and _role(here) == _role(block) and block.text in here.text
            if joined and block.text:
                out.append(d)
                break
            d += 1
        else:
            raise TraceError(f"{where}: content block {len(out)} has no place in the request's messages")
    return out


def anthropic_body(req: TraceRequest, where: str = "request", system_turns: bool = False) -> dict[str, Any]:
    """The request as a Messages body (no model, max_tokens or sampling fields), its `cache_control`
    breakpoints on the blocks they marked; `where` names the request in a refusal. `system_turns`: a system
    message after the first is a `system` turn where it stands (else refused)."""
    body: dict[str, Any] = {}
    emitted: list[dict[str, Any]] = []  # every content block of the body, tools -> system -> messages
    if req.tools:
        body["tools"] = [_tool(t) for t in req.tools]
        emitted += body["tools"]
    messages = with_call_ids(req.messages)
    if messages[0]["role"] == "system":
        body["system"] = [{"type": "text", "text": messages[0]["content"]}]
        emitted += body["system"]
    turns: list[dict[str, Any]] = []
    first = 1 if "system" in body else 0
    for i, m in enumerate(messages[first:], start=first):
        blocks = _blocks(m, i, where, system_turns)
        emitted += [b for b in blocks if b.get("text") != "" or b["type"] != "text"]
        role = m["role"] if m["role"] in ("assistant", "system") else "user"
        # a tool result opens or joins a user turn of results; user text joins the results before it
        joins = (
            turns
            and turns[-1]["role"] == "user" == role
            and turns[-1]["content"][-1]["type"] == ("tool_result")
        )
        if joins:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    body["messages"] = turns
    if req.breakpoints:
        positions = normalized_positions(req, where)
        for b in req.breakpoints:
            emitted[positions[b.block]]["cache_control"] = _marker(b.ttl_s)
    if req.auto_cache_ttl_s is not None:
        body["cache_control"] = _marker(req.auto_cache_ttl_s)
    return body


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = dict(tool["function"])
    out = {"name": fn.pop("name")}
    if "description" in fn:
        out["description"] = fn.pop("description")
    out["input_schema"] = fn.pop("parameters", {"type": "object", "properties": {}})
    return out | fn


def _blocks(m: Message, i: int, where: str, system_turns: bool) -> list[dict[str, Any]]:
    """The content blocks of normalized message `i`."""
    role = m["role"]
    if role == "system" and not system_turns:
        raise TraceError(
            f"{where}: message {i} is a system message after the first message; Anthropic's API takes "
            "one system prompt, before the messages: replay this trace with --api openai"
        )
    if role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""), "content": m["content"]}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m["content"] else []
    for c in m.get("tool_calls") or []:
        arguments = c["function"]["arguments"]
        if not isinstance(arguments, dict):
            raise TraceError(
                f"{where}: message {i} calls {c['function']['name']} with arguments that are not a JSON "
                "object; Anthropic's tool_use input must be one: replay this trace with --api openai"
            )
        blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": arguments})
    return blocks or [{"type": "text", "text": ""}]


def responses_body(req: TraceRequest) -> dict[str, Any]:
    """The request as a Responses body (no model or sampling fields): a leading system message as
    `instructions`, the others as `input` items (messages, `function_call` after its message's text,
    `function_call_output`), the function tools, OpenAI's cache key and retention."""
    messages = with_call_ids(req.messages)
    body: dict[str, Any] = {}
    if messages[0]["role"] == "system":
        body["instructions"], messages = messages[0]["content"], messages[1:]
    items: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]}
            )
            continue
        if m["content"] or not m.get("tool_calls"):
            items.append({"type": "message", "role": m["role"], "content": m["content"]})
        for c in m.get("tool_calls") or []:
            fn = c["function"]
            items.append(
                {"type": "function_call", "call_id": c["id"], "name": fn["name"], "arguments": _json(fn)}
            )
    body["input"] = items
    if req.tools:
        body["tools"] = [{"type": "function", **t["function"]} for t in req.tools]
    return body | cache_fields(req)


def cache_fields(req: TraceRequest) -> dict[str, str]:
    """OpenAI's `prompt_cache_key` and `prompt_cache_retention`, where the request set them."""
    fields = {"prompt_cache_key": req.cache_key, "prompt_cache_retention": req.cache_retention}
    return {k: v for k, v in fields.items() if v is not None}


def request_body(req: TraceRequest, api: str, where: str = "request") -> dict[str, Any]:
    """The body of `req` in `api`'s form (OPENAI or ANTHROPIC)."""
    return openai_body(req) if api == OPENAI else anthropic_body(req, where)


def as_sent(req: TraceRequest, body: dict[str, Any], api: str) -> TraceRequest:
    """The request as a server reads `body` (what it renders: an Anthropic tool result, for one, carries no
    tool name), in `req`'s session and time."""
    return replace(PARSERS[PARSED_AS[api]](body), session=req.session, timestamp=req.timestamp)
