"""A loopback capture server for real agents' requests: it logs every request (method, path, query, headers with
secrets redacted, body) as one JSON line and answers with a minimal well-formed response in the API's own
shape, so the client goes on and sends its next request.

    python scripts/capture_server.py --log capture.jsonl [--port 8765] [--no-tool-call]

Answers: Anthropic Messages (`POST /v1/messages`, streamed or not), OpenAI Responses (`POST /v1/responses`),
OpenAI Chat Completions (`POST /v1/chat/completions`), `POST /v1/messages/count_tokens`, `GET /v1/models` and
`HEAD /`; anything else is logged and answered 404. When a request offers tools and its conversation holds no
tool result yet, the answer is one call of one of its tools (a harmless one where the client's tool set is
known: Claude Code's `Glob`, Codex's shell tools), so the capture also holds the turn that carries the tool's
result; otherwise the answer is the text "Done.". Token counts in the answers are rough (bytes / 4): nothing
here runs a model. scripts/capture_agents.py runs the clients against it and writes the fixtures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

SECRET_HEADERS = {"authorization", "x-api-key", "cookie", "proxy-authorization", "openai-organization"}
TEXT = "Done."
# Harmless arguments for the tools of the clients we capture; any other tool gets its required fields filled.
KNOWN_TOOLS: dict[str, dict[str, Any]] = {
    "Read": {"file_path": "README.md"},  # Claude Code (relative: the file tool says so in its result)
    "exec_command": {"cmd": "echo hello"},  # Codex
    "shell_command": {"command": "echo hello"},
    "shell": {"command": ["echo", "hello"]},
    "get_weather": {"city": "Paris"},  # scripts/agent_clients.py
}
FILLERS = {"string": "example", "integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}


def redact(headers: dict[str, str]) -> dict[str, str]:
    return {k: "<redacted>" if k.lower() in SECRET_HEADERS else v for k, v in headers.items()}


def tool_names(api: str, body: dict[str, Any]) -> list[str]:
    """Names of the function tools a request offers (hosted/server tools cannot be called by a model)."""
    names = []
    for tool in body.get("tools") or []:
        if api == "anthropic" and "input_schema" in tool:
            names.append(tool["name"])
        elif api == "responses" and tool.get("type") == "function":
            names.append(tool["name"])
        elif api == "chat" and tool.get("type") == "function":
            names.append(tool["function"]["name"])
    return names


def has_tool_result(api: str, body: dict[str, Any]) -> bool:
    if api == "anthropic":
        return any(
            isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"])
            for m in body.get("messages") or []
        )
    if api == "responses":
        items = body.get("input")
        return isinstance(items, list) and any(
            i.get("type") in ("function_call_output", "custom_tool_call_output") for i in items
        )
    return any(m.get("role") == "tool" for m in body.get("messages") or [])


def schema_of(api: str, body: dict[str, Any], name: str) -> dict[str, Any]:
    for tool in body.get("tools") or []:
        if api == "anthropic" and tool.get("name") == name:
            return tool.get("input_schema") or {}
        if api == "responses" and tool.get("name") == name:
            return tool.get("parameters") or {}
        if api == "chat" and tool.get("function", {}).get("name") == name:
            return tool["function"].get("parameters") or {}
    return {}


def choose_call(api: str, body: dict[str, Any], enabled: bool) -> tuple[str, dict[str, Any]] | None:
    """The tool call to answer with, or None for a text answer."""
    names = tool_names(api, body)
    if not enabled or not names or has_tool_result(api, body):
        return None
    for name, arguments in KNOWN_TOOLS.items():
        if name in names:
            return name, arguments
    schema = schema_of(api, body, names[0])
    props = schema.get("properties") or {}
    return names[0], {
        k: FILLERS.get(props.get(k, {}).get("type"), "example") for k in schema.get("required", [])
    }


def rough_tokens(body: dict[str, Any]) -> int:
    return max(1, len(json.dumps(body)) // 4)


def sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    payload = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    """Ids count up from 1 per process, so the turns that carry them back are the same in every capture."""
    return f"{prefix}{next(_ids):024x}"


# Anthropic Messages


def anthropic_message(body: dict[str, Any], call: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    content = (
        [{"type": "tool_use", "id": new_id("toolu_"), "name": call[0], "input": call[1]}]
        if call
        else [{"type": "text", "text": TEXT}]
    )
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": rough_tokens(body),
            "output_tokens": 3,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_events(message: dict[str, Any]) -> Iterator[str]:
    start = message | {"content": [], "stop_reason": None, "usage": message["usage"] | {"output_tokens": 1}}
    yield sse({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(message["content"]):
        empty = {"type": "text", "text": ""} if block["type"] == "text" else block | {"input": {}}
        yield sse(
            {"type": "content_block_start", "index": index, "content_block": empty}, "content_block_start"
        )
        delta = (
            {"type": "text_delta", "text": block["text"]}
            if block["type"] == "text"
            else {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        )
        yield sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
        yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield sse({"type": "message_delta", "delta": delta, "usage": message["usage"]}, "message_delta")
    yield sse({"type": "message_stop"}, "message_stop")


# OpenAI Responses


def responses_output(call: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    if call:
        return {
            "id": new_id("fc_"),
            "type": "function_call",
            "status": "completed",
            "call_id": new_id("call_"),
            "name": call[0],
            "arguments": json.dumps(call[1]),
        }
    text = {"type": "output_text", "text": TEXT, "annotations": []}
    return {
        "id": new_id("msg_"),
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [text],
    }


def response_object(body: dict[str, Any], status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    usage = {
        "input_tokens": rough_tokens(body),
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": rough_tokens(body) + 3,
    }
    return {
        "id": new_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model", ""),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage if status == "completed" else None,
        "metadata": {},
    }


def responses_events(body: dict[str, Any], item: dict[str, Any]) -> Iterator[str]:
    seq = iter(range(1_000_000))
    base = response_object(body, "in_progress", [])

    def event(kind: str, **fields: Any) -> str:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    yield event("response.created", response=base)
    yield event("response.in_progress", response=base)
    ids = {"item_id": item["id"], "output_index": 0}
    if item["type"] == "function_call":
        yield event(
            "response.output_item.added",
            output_index=0,
            item=item | {"status": "in_progress", "arguments": ""},
        )
        yield event("response.function_call_arguments.delta", **ids, delta=item["arguments"])
        yield event(
            "response.function_call_arguments.done", **ids, name=item["name"], arguments=item["arguments"]
        )
    else:
        yield event(
            "response.output_item.added", output_index=0, item=item | {"status": "in_progress", "content": []}
        )
        part = {"type": "output_text", "text": "", "annotations": []}
        yield event("response.content_part.added", **ids, content_index=0, part=part)
        yield event("response.output_text.delta", **ids, content_index=0, delta=TEXT)
        yield event("response.output_text.done", **ids, content_index=0, text=TEXT)
        yield event("response.content_part.done", **ids, content_index=0, part=part | {"text": TEXT})
    yield event("response.output_item.done", output_index=0, item=item)
    done = response_object(body, "completed", [item]) | {"id": base["id"], "created_at": base["created_at"]}
    yield event("response.completed", response=done)


# OpenAI Chat Completions


def chat_message(call: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    if not call:
        return {"role": "assistant", "content": TEXT}
    function = {"name": call[0], "arguments": json.dumps(call[1])}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": new_id("call_"), "type": "function", "function": function}],
    }


def chat_usage(body: dict[str, Any]) -> dict[str, Any]:
    prompt = rough_tokens(body)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": 3,
        "total_tokens": prompt + 3,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def chat_events(body: dict[str, Any], message: dict[str, Any]) -> Iterator[str]:
    head = {"id": new_id("chatcmpl-"), "object": "chat.completion.chunk", "created": int(time.time())}
    head["model"] = body.get("model", "")
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    yield sse(
        head
        | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    )
    delta = (
        {"tool_calls": [{"index": 0} | call for call in message["tool_calls"]]}
        if message.get("tool_calls")
        else {"content": message["content"]}
    )
    yield sse(head | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    yield sse(head | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        yield sse(head | {"choices": [], "usage": chat_usage(body)})
    yield sse("[DONE]")


# The app


def api_of(path: str) -> str | None:
    path = path.rstrip("/")
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    return None


def answer(method: str, path: str, body: Any, tool_call: bool) -> tuple[Response, str]:
    """The response to one request, and a word for the log saying what it was."""
    api = api_of(path) if method == "POST" and isinstance(body, dict) else None
    if api is not None:
        call = choose_call(api, body, tool_call)
        kind = f"tool_call:{call[0]}" if call else "text"
        stream = bool(body.get("stream"))
        sse_type = "text/event-stream"
        if api == "anthropic":
            message = anthropic_message(body, call)
            if stream:
                return StreamingResponse(anthropic_events(message), media_type=sse_type), kind
            return JSONResponse(message), kind
        if api == "responses":
            item = responses_output(call)
            if stream:
                return StreamingResponse(responses_events(body, item), media_type=sse_type), kind
            return JSONResponse(response_object(body, "completed", [item])), kind
        message = chat_message(call)
        if stream:
            return StreamingResponse(chat_events(body, message), media_type=sse_type), kind
        finish = "tool_calls" if call else "stop"
        choice = {"index": 0, "message": message, "finish_reason": finish}
        completion = {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time())}
        return JSONResponse(
            completion | {"model": body.get("model", ""), "choices": [choice], "usage": chat_usage(body)}
        ), kind
    if method == "POST" and path.rstrip("/").endswith("/messages/count_tokens") and isinstance(body, dict):
        return JSONResponse({"input_tokens": rough_tokens(body)}), "count_tokens"
    if method == "GET" and path.rstrip("/").endswith("/models"):
        models = [{"id": "capture-model", "object": "model", "created": 0, "owned_by": "capture"}]
        return JSONResponse({"object": "list", "data": models}), "models"
    if method == "HEAD" and path == "/":
        return Response(status_code=200), "head"
    return JSONResponse(
        {"error": {"message": f"not captured: {method} {path}", "type": "not_found"}}, 404
    ), "404"


def make_app(log: Path, tool_call: bool = True) -> FastAPI:
    """The capture app: every request is appended to `log` as one JSON line."""
    app = FastAPI()
    lock = threading.Lock()
    seq = iter(range(1_000_000))

    @app.api_route("/{path:path}", methods=["GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"])
    async def capture(request: Request, path: str) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = {"raw": raw.decode("utf-8", "replace")}
        response, kind = answer(request.method, request.url.path, body, tool_call)
        record = {
            "seq": next(seq),
            "time": time.time(),
            "method": request.method,
            "path": request.url.path,
            "query": request.url.query,
            "headers": redact(dict(request.headers)),
            "body": body,
            "body_bytes": len(raw),
            "answered": {"status": response.status_code, "kind": kind},
        }
        with lock, log.open("a") as f:
            f.write(json.dumps(record) + "\n")
        return response

    return app


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, required=True, help="JSONL file to append each request to")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--no-tool-call", action="store_true", help="always answer with text")
    args = parser.parse_args(argv)
    uvicorn.run(
        make_app(args.log, not args.no_tool_call), host="127.0.0.1", port=args.port, log_level="warning"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
