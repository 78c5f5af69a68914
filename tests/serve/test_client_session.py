"""Identity and session from what real clients send: the captured requests of tests/fixtures/agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.serve.client_session import ANONYMOUS, client_session

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
CLAUDE_SESSION = CODEX_SESSION = "00000000-0000-4000-8000-000000000001"


def captured(name: str) -> tuple[dict[str, str], dict[str, Any]]:
    data = json.loads((AGENTS / name).read_text())
    return data["headers"], data["body"]


def test_claude_code_session_from_its_header_and_its_metadata_json() -> None:
    headers, body = captured("claude-code-request.json")
    got = client_session(headers, user_id=body["metadata"]["user_id"])
    assert (got.session, got.source) == (CLAUDE_SESSION, "x-claude-code-session-id")
    assert got.identity.startswith("key:") and "redacted" not in got.identity  # a digest of the key
    del headers["x-claude-code-session-id"]
    inner = client_session(headers, user_id=body["metadata"]["user_id"])
    assert (inner.session, inner.source) == (CLAUDE_SESSION, "metadata.user_id.session_id")
    title_headers, title = captured("claude-code-no-tools.json")  # the title request: the same session
    assert client_session(title_headers, user_id=title["metadata"]["user_id"]).session == CLAUDE_SESSION


def test_codex_session_from_its_headers_and_prompt_cache_key() -> None:
    headers, body = captured("codex-request.json")
    got = client_session(headers, prompt_cache_key=body["prompt_cache_key"])
    assert (got.session, got.source) == (CODEX_SESSION, "session_id")
    for name in ("session-id", "thread-id", "x-client-request-id"):
        headers.pop(name)
    assert client_session(headers).source == "x-codex-turn-metadata"
    del headers["x-codex-turn-metadata"]
    key = client_session(headers, prompt_cache_key=body["prompt_cache_key"])
    assert (key.session, key.source) == (CODEX_SESSION, "prompt_cache_key")
    assert client_session({"session_id": "s"}).source == "session_id"  # the underscore spelling


def test_sdk_clients_are_one_identity_per_key_and_name_no_session() -> None:
    for name in (
        "agents-chat-request.json",
        "langchain-openai-request.json",
        "langchain-anthropic-request.json",
    ):
        headers, _ = captured(name)
        assert headers["authorization"] == "<redacted>"  # no scheme, so no key: the capture's was a bearer
        assert client_session(headers).identity == "anonymous"
        got = client_session(headers | {"authorization": "Bearer sk-captured"})
        assert got.session is None and got.identity.startswith("key:")
    bearer = client_session({"authorization": "Bearer k1"}).identity
    assert (
        bearer == client_session({"x-api-key": "k1"}).identity != client_session({"x-api-key": "k2"}).identity
    )
    assert client_session({"authorization": "bearer  k1 "}).identity == bearer  # the scheme in any case
    for no_key in ("Bearer ", "Bearer", "Basic k1", "k1"):
        assert client_session({"authorization": no_key}).identity == "anonymous"


def test_order_and_identity_without_a_key() -> None:
    both = client_session({"x-session-id": "mine", "x-claude-code-session-id": "cc"}, user="u")
    assert (both.session, both.source, both.identity) == ("mine", "header", "session:mine")
    assert client_session({}, user="alice@example.com").identity == "session:alice@example.com"
    assert client_session({}, user_id="raw id") == client_session({}, user_id="raw id")
    assert client_session({}, user_id="raw id").source == "metadata.user_id"
    assert client_session({}, user_id='{"device_id": "d"}').source == "metadata.user_id"  # no session inside
    assert client_session({}, user_id="{" * 100_000).source == "metadata.user_id"  # not read as JSON
    nobody = client_session({})
    assert (nobody.identity, nobody.session, nobody.source) == (ANONYMOUS, None, "")


def test_a_huge_session_name_is_kept_short_and_still_one_name() -> None:
    huge = "u" * 20_000_000
    got = client_session({}, user=huge)
    assert got.session is not None and len(got.session) < 100 and got.session.startswith("u" * 48)
    assert got.session == client_session({}, user=huge).session != client_session({}, user=huge + "v").session
    assert got.identity == "session:" + got.session
    assert client_session({"x-session-id": "alice"}).session == "alice"
