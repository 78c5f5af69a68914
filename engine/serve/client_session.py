"""Who sent a request (its client identity) and the session it names, from what clients send.

Identity, the first that applies (never reported to anyone; sessions are matched only within one):
- the API key presented (`x-api-key`, or `Authorization: Bearer KEY`), as a digest, whether or not the
  server checks keys: every holder of one key is one client;
- with no key, the session named below: the session id is then the credential (whoever names it is its
  client);
- with neither, `anonymous`: requests the server cannot tell apart, matched among themselves only.

Session, the first that names one (`source` says which):
`header` (the `X-Session-Id` header: the testbed's own, set deliberately), `x-claude-code-session-id`
(Claude Code), `session_id` (Codex's `session_id` / `session-id` header), `x-codex-turn-metadata` (its
JSON's `session_id`), `prompt_cache_key` (OpenAI's body field: Codex sends its session id there),
`metadata.user_id.session_id` (Claude Code puts JSON with `device_id` and `session_id` in Anthropic's
`metadata.user_id`), then `user` (OpenAI) or `metadata.user_id` taken whole. None: the server finds the
session (engine/serve/sessions.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.traces.inputs import MAX_SESSION_CHARS, short_session

SESSION_HEADER = "x-session-id"
ANONYMOUS = "anonymous"
HEADERS = (  # header -> source, in order
    (SESSION_HEADER, "header"),
    ("x-claude-code-session-id", "x-claude-code-session-id"),
    ("session_id", "session_id"),
    ("session-id", "session_id"),
)
JSON_LIMIT = 1 << 16  # a JSON header or field longer than this is not read for a session id


@dataclass(frozen=True)
class ClientSession:
    identity: str  # "key:<digest>" | "session:<id>" | "anonymous"
    session: str | None  # the session the client named; None: found by the server
    source: str  # which header or field named it ("" when none did)


def presented_key(headers: Mapping[str, str]) -> str:
    """The API key a request presents ("" when none): `x-api-key`, else `Authorization: Bearer KEY` (the
    scheme in any case, as HTTP's schemes are; another scheme, or `Bearer` with nothing after it, is none)."""
    if headers.get("x-api-key"):
        return headers["x-api-key"]
    scheme, _, key = headers.get("authorization", "").strip().partition(" ")
    return key.strip() if scheme.lower() == "bearer" else ""


def header_text(value: str | None) -> str | None:
    """A header's value as the client wrote it: HTTP carries bytes, which the server reads as Latin-1; a
    client that sent UTF-8 (`sesión-☃`) gets its text back. None when absent or empty."""
    if not value:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:  # not UTF-8 (or not bytes at all): the Latin-1 reading stands
        return value


def _json_session(value: Any) -> str | None:
    """`session_id` of a JSON object given as a string (Claude Code's `metadata.user_id`, Codex's
    `x-codex-turn-metadata`); None when it holds none."""
    if not isinstance(value, str) or not value.startswith("{") or len(value) > JSON_LIMIT:
        return None
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return _text(data.get("session_id") if isinstance(data, dict) else None)


def _text(value: Any) -> str | None:
    """A non-empty string of Unicode text (a JSON `\\ud800` escape gives a lone surrogate, which no
    report or record can hold: not a session name), else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def client_session(
    headers: Mapping[str, str],
    *,
    prompt_cache_key: Any = None,
    user_id: Any = None,
    user: Any = None,
) -> ClientSession:
    """The request's identity and named session, from its headers and body fields: `prompt_cache_key`
    (OpenAI Chat and Responses), `user_id` (Anthropic's `metadata.user_id`), `user` (OpenAI's)."""
    named: list[tuple[str | None, str]] = [(header_text(headers.get(h)), source) for h, source in HEADERS]
    named += [
        (_json_session(header_text(headers.get("x-codex-turn-metadata"))), "x-codex-turn-metadata"),
        (_text(prompt_cache_key), "prompt_cache_key"),
        (_json_session(user_id), "metadata.user_id.session_id"),
        (_text(user), "user"),
        (_text(user_id), "metadata.user_id"),
    ]
    session, source = next(((s, src) for s, src in named if s is not None), (None, ""))
    if session is not None and len(session) > MAX_SESSION_CHARS:  # bounded wherever it is kept or shown,
        session = short_session(session)  # as bench replay shortens it reading the recording back
    key = presented_key(headers)
    if key:
        identity = "key:" + hashlib.sha256(key.encode()).hexdigest()[:24]
    elif session is not None:
        identity = "session:" + session
    else:
        identity = ANONYMOUS
    return ClientSession(identity, session, source)
