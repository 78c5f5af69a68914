"""Bodies `json` reads but the server could not hold: nesting past MAX_DEPTH, integers past Python's digit
limit, NaN / Infinity and literals past a double's range. The issue's inputs (a tool schema nested ~900
deep, a 5,000-digit integer, NaN in tools, `after=%C2%B2`, `after=` 5,000 nines) against the real SmolLM2
server, each a 400 naming where it is, never a 500; a tool schema at the limit is answered and recorded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.serve.errors import APIError
from engine.serve.json_body import MAX_DEPTH, MAX_DIGITS, parse
from engine.traces import fields
from tests.serve.clients import MODEL
from tests.serve.conftest import Server, http

HI = [{"role": "user", "content": "hi"}]


def nested_schema(levels: int) -> dict[str, Any]:
    """An object schema `levels` objects deep (each object and its `properties` a level: 2 per step)."""
    schema: dict[str, Any] = {"type": "string"}
    for i in range(levels):
        schema = {"type": "object", "properties": {f"p{i}": schema}}
    return schema


def with_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """A chat body whose one tool takes `schema`: body, tools, tool, function, parameters are levels 1-5."""
    tool = {"type": "function", "function": {"name": "deep", "parameters": schema}}
    return {"model": MODEL, "messages": HI, "max_tokens": 1, "temperature": 0, "tools": [tool]}


def depth(value: Any) -> int:
    if isinstance(value, dict | list):
        items = value.values() if isinstance(value, dict) else value
        return 1 + max((depth(v) for v in items), default=0)
    return 0


def refused(raw: str | bytes) -> APIError:
    with pytest.raises(APIError) as caught:
        parse(raw.encode() if isinstance(raw, str) else raw)
    assert caught.value.status == 400 and caught.value.code == "invalid_json"
    return caught.value


def lists(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_nesting_up_to_the_limit_parses_and_one_more_level_is_refused_with_its_path() -> None:
    at_limit = {"model": MODEL, "messages": HI, "metadata": lists(MAX_DEPTH - 1)}  # the body is level 1
    assert depth(at_limit) == MAX_DEPTH and parse(json.dumps(at_limit).encode()) == at_limit
    tool = with_tool(nested_schema((MAX_DEPTH - 5) // 2))
    assert depth(tool) >= MAX_DEPTH - 1 and parse(json.dumps(tool).encode()) == tool
    assert fields.loads(json.dumps({"body": at_limit})) == {"body": at_limit}  # a record line replay reads
    e = refused(json.dumps(at_limit | {"metadata": lists(MAX_DEPTH)}))
    assert e.param == "metadata" and f"deeper than the {MAX_DEPTH} levels" in e.message
    assert e.message.startswith("request body at metadata[0][0]") and "more)" in e.message
    for levels in (450, 100_000):  # the issue's ~900 (the parser reads it) and far past what it reads
        e = refused('{"tools": ' + "[" * levels + "]" * levels + "}")
        assert f"deeper than the {MAX_DEPTH} levels" in e.message


@pytest.mark.parametrize(
    ("raw", "param", "words"),  # param: the error's, and its message's start
    [
        ('{"seed": ' + "9" * 5000 + "}", "seed", "5,000 digits"),
        ('{"seed": -' + "9" * (MAX_DIGITS + 1) + "}", "seed", f"{MAX_DIGITS + 1:,} digits"),
        (
            '{"tools": [{"function": {"parameters": {"maximum": ' + "1" * 4301 + "}}}]}",
            "tools[0].function.parameters.maximum",
            "4,301",
        ),
        ('{"temperature": NaN}', "temperature", "NaN is not a JSON number"),
        (
            '{"tools": [{"function": {"parameters": {"default": Infinity}}}]}',
            "tools[0].function.parameters.default",
            "Infinity",
        ),
        ('{"messages": [{"role": "user", "content": "x"}], "top_p": -Infinity}', "top_p", "-Infinity"),
        ('{"metadata": {"n": 1e400}}', "metadata.n", "too large"),
        ('{"metadata": {"n": -1.5e999}}', "metadata.n", "too large"),
        (
            '{"messages": [{"role": "user", "content": "a \\ud800 b"}]}',
            "messages[0].content",
            "lone surrogate",
        ),
    ],
)
def test_numbers_json_cannot_hold_are_refused_with_their_field(raw: str, param: str, words: str) -> None:
    e = refused(raw)
    assert words in e.message and e.param == param and e.message.startswith(f"{param}: ")


def test_numbers_within_bounds_are_read_as_numbers() -> None:
    body = parse(('{"a": ' + "7" * MAX_DIGITS + ', "b": -0.5e308, "c": 1e-400, "d": [1, 2.5]}').encode())
    assert body["a"] == int("7" * MAX_DIGITS) and body["b"] == -0.5e308 and body["c"] == 0.0
    assert body["d"] == [1, 2.5]


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text


def test_a_tool_schema_at_the_limit_is_answered(qwen_server: Server) -> None:
    """Qwen's template renders tools with `tojson`: the whole schema reaches the prompt."""
    body = with_tool(nested_schema((MAX_DEPTH - 5) // 2)) | {"model": "tiny-qwen"}
    reply = http("POST", f"{qwen_server.url}/v1/chat/completions", body, {"x-api-key": qwen_server.key})
    assert reply.status == 200, reply.text
    assert reply.json()["usage"]["prompt_tokens"] > 4 * MAX_DEPTH  # every level rendered


def test_the_issues_bodies_against_the_server(smollm2_server: Server) -> None:
    url = smollm2_server.url
    at_limit = {"model": MODEL, "messages": HI, "max_tokens": 1, "metadata": lists(MAX_DEPTH - 1)}
    reply = http("POST", f"{url}/v1/chat/completions", at_limit)
    assert reply.status == 200, reply.text
    recorded = [
        fields.loads(line) for line in smollm2_server.record.read_text().splitlines()
    ]  # as replay reads
    assert [r["body"] for r in recorded if r["kvtestbed"]["request_id"] == reply.json()["id"]] == [at_limit]
    anthropic = {"model": MODEL, "max_tokens": 1, "messages": HI}
    tools = [{"name": "deep", "input_schema": nested_schema(450)}]
    cases = [
        ("/v1/chat/completions", with_tool(nested_schema(450)), "tools"),  # JSON ~900 deep
        ("/v1/messages", anthropic | {"tools": tools}, "tools"),
        ("/v1/chat/completions", '{"model": "x", "seed": ' + "9" * 5000 + "}", "seed"),
        ("/v1/messages", '{"model": "x", "max_tokens": ' + "1" * 4301 + "}", "max_tokens"),
        ("/v1/chat/completions", '{"model": "x", "tools": [{"function": {"parameters": NaN}}]}', None),
        ("/v1/messages", '{"model": "x", "temperature": Infinity}', "temperature"),
        ("/v1/messages", '{"messages": [{"role": "user", "content": "\\udfff"}]}', "messages[0].content"),
    ]
    for path, body, param in cases:
        raw = body if isinstance(body, str) else json.dumps(body)
        reply = http("POST", url + path, raw.encode())
        assert reply.status == 400, (path, reply.text[:300])
        no_traceback(reply.text)
        error = reply.json()["error"]
        if path == "/v1/chat/completions":
            assert error["code"] == "invalid_json" and error["param"] == (
                param or "tools[0].function.parameters"
            )
        else:
            assert error["type"] == "invalid_request_error" and error["message"].startswith(param or "tools")
    for after in ("%C2%B2", "9" * 5000, "-1", "1.5", "%EF%BC%91"):  # ², 5,000 nines, fullwidth 1
        reply = http("GET", f"{url}/v1/kvtestbed/requests?after={after}")
        assert reply.status == 400 and reply.json()["error"]["param"] == "after", after
        no_traceback(reply.text)
    assert http("GET", f"{url}/v1/kvtestbed/requests?after=" + "9" * 18).json()["requests"] == []
