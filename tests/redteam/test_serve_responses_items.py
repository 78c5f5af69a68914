"""Responses `input` items that Chat Completions refuses in the messages they stand for, and tools that do
not say what they are: each a 400 naming the item (they were taken silently: a null content rendered as
nothing, a call without a call_id got a made-up one, a tool without `type` was taken for a hosted tool and
not offered)."""

from __future__ import annotations

import pytest

from tests.redteam.conftest import MODEL
from tests.redteam.hostile import clear, post

USER = {"type": "message", "role": "user", "content": "go"}
CALL = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "done"}
WITHOUT = object()


def _with(item: dict, key: str, value: object) -> dict:
    return {k: v for k, v in item.items() if k != key} | ({} if value is WITHOUT else {key: value})


CASES = {
    "message content null": ([USER | {"content": None}], "input[0].content"),
    "message without content": ([_with(USER, "content", WITHOUT)], "input[0].content"),
    "function_call without call_id": ([USER, _with(CALL, "call_id", WITHOUT), OUTPUT], "input[1].call_id"),
    "function_call with an object call_id": (
        [USER, CALL | {"call_id": {"a": 1}}, OUTPUT],
        "input[1].call_id",
    ),
    "function_call with an empty call_id": ([USER, CALL | {"call_id": ""}, OUTPUT], "input[1].call_id"),
    "function_call arguments 5": ([USER, CALL | {"arguments": 5}, OUTPUT], "input[1].arguments"),
    "function_call arguments an object": (
        [USER, CALL | {"arguments": {"a": 1}}, OUTPUT],
        "input[1].arguments",
    ),
    "function_call_output without call_id": (
        [USER, CALL, _with(OUTPUT, "call_id", WITHOUT)],
        "input[2].call_id",
    ),
    "function_call_output output null": ([USER, CALL, OUTPUT | {"output": None}], "input[2].output"),
    "function_call_output without output": (
        [USER, CALL, _with(OUTPUT, "output", WITHOUT)],
        "input[2].output",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_item_chat_refuses_is_refused(open_server, case: str) -> None:  # type: ignore[no-untyped-def]
    items, param = CASES[case]
    answer = post(open_server.url, "/v1/responses", {"model": MODEL, "input": items, "max_output_tokens": 2})
    clear(answer, 400, param)


def test_a_whole_exchange_is_answered(open_server) -> None:  # type: ignore[no-untyped-def]
    body = {"model": MODEL, "input": [USER, CALL, OUTPUT], "max_output_tokens": 2}
    assert post(open_server.url, "/v1/responses", body).status == 200


@pytest.mark.parametrize("tool", [{"name": "f", "parameters": {}}, {"type": None, "name": "f"}, {"type": 5}])
def test_a_tool_without_a_type_is_refused(open_server, tool: dict) -> None:  # type: ignore[no-untyped-def]
    body = {"model": MODEL, "input": "hi", "tools": [tool], "max_output_tokens": 2}
    clear(post(open_server.url, "/v1/responses", body), 400, "tools[0].type")
