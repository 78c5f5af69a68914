"""`ChatRequest` (engine/serve/chat_request.py): whether it continues an earlier request as far as the
server can tell (what makes a request with no previous one
`previous_message_not_found` rather than `first_request`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from engine.serve.client_session import ClientSession
from tests.serve.responses import request

USER, SAID = {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}
CALLED = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "42"}
NAMED = ClientSession("session:s1", "s1", "header")


@pytest.mark.parametrize(
    ("messages", "client", "notes", "final", "continues"),
    [
        ([USER], None, {}, False, False),  # a first prompt
        ([USER, SAID, USER], None, {}, False, False),  # example turns, named by nothing (aider)
        ([USER, SAID, USER], NAMED, {}, False, True),  # a session the client names
        ([USER, SAID, USER], None, {"previous_response_id": {"id": "r", "items": 2}}, False, True),
        ([USER, CALLED, RESULT], None, {}, False, True),  # a model's call, its result
        ([USER, CALLED], None, {}, False, True),  # a model's call
        ([USER, SAID], NAMED, {}, True, False),  # a prefill the answer continues
        ([USER, SAID, USER, SAID], NAMED, {}, True, True),  # a prefill after a turn of a named session
    ],
)
def test_a_request_continues_where_its_client_names_it_or_a_tool_turn_shows_it(
    messages: list[dict[str, Any]],
    client: ClientSession | None,
    notes: dict[str, Any],
    final: bool,
    continues: bool,
) -> None:
    req = replace(request(), messages=messages, notes=notes, continue_final=final)
    if client is not None:
        req = replace(req, client=client)
    assert req.continues is continues
