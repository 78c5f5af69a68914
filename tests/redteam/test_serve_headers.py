"""Headers a client controls: the API key's scheme and an empty key, session headers in UTF-8, and JSON
session headers holding what no report or record can carry (a lone surrogate poisoned every later request
of the client with a 500)."""

from __future__ import annotations

import pytest

from tests.redteam.conftest import KEY, MODEL
from tests.redteam.hostile import clear, post, utf8_header

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_in_any_case(keyed_server, scheme: str) -> None:  # type: ignore[no-untyped-def]
    assert (
        post(keyed_server.url, "/v1/chat/completions", CHAT, {"Authorization": f"{scheme} {KEY}"}).status
        == 200
    )


@pytest.mark.parametrize(
    "value", ["Bearer ", "Bearer", "bearer  ", "Basic " + KEY, KEY, "Bearer  x" + KEY, "Token " + KEY]
)
def test_no_key_or_another_scheme_is_a_401(keyed_server, value: str) -> None:  # type: ignore[no-untyped-def]
    clear(post(keyed_server.url, "/v1/chat/completions", CHAT, {"Authorization": value}), 401, "API key")


def test_an_empty_bearer_is_anonymous_without_a_key(open_server) -> None:  # type: ignore[no-untyped-def]
    for value in ("Bearer ", "Bearer", "bearer"):
        assert post(open_server.url, "/v1/chat/completions", CHAT, {"Authorization": value}).status == 200


METADATA = [
    '{"session_id": "\\ud800"}',
    '{"session_id": "\\udfff tail"}',
    '{"session_id": 5}',
    '{"session_id": null}',
    '{"session_id": ["a"]}',
    '{"session_id": "\\u0000x"}',
    "{" + "[" * 50_000,
    '{"session_id": "a"' + " " * 70_000 + "}",
    "{not json",
    "[]",
    utf8_header('{"session_id": "turn-☃"}'),
    "\xff\xfe{",
]


@pytest.mark.parametrize("value", METADATA, ids=range(len(METADATA)))
def test_malformed_codex_turn_metadata(open_server, value: str) -> None:  # type: ignore[no-untyped-def]
    headers = {"x-codex-turn-metadata": value, "Authorization": "Bearer codex-metadata"}
    responses = {"model": MODEL, "input": "hi", "max_output_tokens": 2}
    for path, body in (("/v1/chat/completions", CHAT), ("/v1/responses", responses)):
        assert post(open_server.url, path, body, headers).status == 200
    # the same client's next plain request is still answered (nothing poisoned its sessions)
    assert (
        post(open_server.url, "/v1/chat/completions", CHAT, {"Authorization": "Bearer codex-metadata"}).status
        == 200
    )


def test_a_utf8_session_header_is_read_as_utf8(open_server) -> None:  # type: ignore[no-untyped-def]
    headers = {"X-Session-Id": utf8_header("sesión-☃")}
    answer = post(open_server.url, "/v1/chat/completions", CHAT, headers)
    assert answer.status == 200
    assert answer.json()["kvtestbed"]["session_id"] == "sesión-☃"
    turn = {"x-codex-turn-metadata": utf8_header('{"session_id": "turno-☃"}')}
    assert (
        post(open_server.url, "/v1/chat/completions", CHAT, turn).json()["kvtestbed"]["session_id"]
        == "turno-☃"
    )
    latin = {"X-Session-Id": "caf\xe9"}  # a Latin-1 byte that is not UTF-8 stays as read
    assert (
        post(open_server.url, "/v1/chat/completions", CHAT, latin).json()["kvtestbed"]["session_id"] == "café"
    )
