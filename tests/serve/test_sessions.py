"""Sessions: an explicit id, else the earlier request this one extends most (beyond the preamble); and,
through the SmolLM2 server, each change named by the region it lies in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.serve.miss_reason import PastRequest, token_array
from engine.serve.sessions import SessionStore
from tests.serve.clients import GREEDY, MODEL, WEATHER, openai_client
from tests.serve.conftest import Server, http

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
A, B = "key:a", "key:b"  # two client identities


def past(rid: str, session: str, ids: list[int], identity: str = A, prompt: int | None = None) -> PastRequest:
    return PastRequest(rid, identity, session, "m", len(ids) if prompt is None else prompt, token_array(ids))


def test_explicit_ids_and_matching() -> None:
    store = SessionStore(preamble_tokens=3)
    first = store.resolve(A, None, "", [1, 2, 3, 4, 5])
    assert first.source == "new" and first.previous is None
    store.remember(past("r1", first.session, [1, 2, 3, 4, 5, 6]))
    store.remember(past("r2", "named", [1, 2, 3, 9, 9]))
    extends = store.resolve(A, None, "", [1, 2, 3, 4, 5, 6, 7])
    assert (extends.session, extends.source, extends.previous.request_id) == (first.session, "matched", "r1")
    assert store.resolve(A, None, "", [1, 2, 3, 8]).source == "new"  # shares only the preamble
    tie = store.resolve(A, None, "", [1, 2, 3, 4])  # 4 tokens shared with r1 (and 3 with r2): r1
    assert tie.previous.request_id == "r1"
    own = store.resolve(A, "named", "header", [1, 2, 3, 9, 9, 7])
    assert (own.session, own.source, own.previous.request_id) == ("named", "header", "r2")
    # a named session is compared with the closest earlier prompt of its client, its own or another's
    closer = store.resolve(A, "named", "header", [1, 2, 3, 4, 5, 6, 7])
    assert (closer.session, closer.previous.request_id, closer.previous.session) == (
        "named",
        "r1",
        first.session,
    )
    assert store.resolve(A, "named", "header", [7]).previous.request_id == "r2"  # its own always counts
    assert store.resolve(A, "fresh", "user", [1, 2, 3]).previous is None  # nothing beyond the preamble


def test_a_responses_continuation_is_compared_with_the_response_it_continues() -> None:
    """previous_response_id names the request compared with, even when the prompt shares nothing beyond the
    preamble with it (its instructions dropped): its session, source `previous_response_id`; another
    client's response, or one no longer held, falls back to matching."""
    store = SessionStore(preamble_tokens=3)
    store.remember(past("resp_1", "s1", [1, 2, 3, 4, 5, 6]))
    store.remember(past("resp_2", "s2", [1, 2, 3, 7, 8, 9], identity=B))
    went = store.resolve(A, None, "", [1, 2, 3, 9, 5, 6, 10], continues="resp_1")  # system text changed
    assert (went.session, went.source, went.previous.request_id) == ("s1", "previous_response_id", "resp_1")
    named = store.resolve(A, "mine", "header", [1, 2, 3, 9], continues="resp_1")
    assert (named.session, named.source, named.previous.request_id) == ("mine", "header", "resp_1")
    assert store.resolve(A, None, "", [1, 2, 3, 7, 8, 9], continues="resp_2").source == "new"  # B's
    assert store.resolve(A, None, "", [1, 2, 3, 4, 5, 6, 7], continues="resp_gone").source == "matched"


def test_the_latest_of_equal_matches_wins() -> None:
    store = SessionStore(preamble_tokens=0)
    store.remember(past("a", "s1", [1, 2, 3]))
    store.remember(past("b", "s2", [1, 2, 3]))
    assert store.resolve(A, None, "", [1, 2, 3, 4]).session == "s2"
    store.remember(past("c", "s1", [1, 2, 3]))  # s1 is now the latest
    assert store.resolve(A, None, "", [1, 2, 3, 4]).session == "s1"
    assert store.resolve(A, "s2", "header", [1, 2, 3, 4]).previous.request_id == "b"  # its own, on a tie


def test_nothing_crosses_client_identities() -> None:
    """Another client's request is never matched, compared with, nor its session joined, even one that
    the prompt extends exactly or a session of the same name."""
    store = SessionStore(preamble_tokens=1)
    store.remember(past("alice-1", "alice@example.com", [1, 2, 3, 4, 5, 6], identity=B))
    probe = store.resolve(A, None, "", [1, 2, 3, 4, 5, 6, 7])
    assert (probe.source, probe.previous) == ("new", None) and probe.session.startswith("auto-")
    assert store.resolve(A, "alice@example.com", "user", [1, 2, 3, 4, 5, 6, 7]).previous is None
    store.remember(past("probe", probe.session, [1, 2, 3, 4, 5, 6, 7]))
    hers = store.resolve(B, "alice@example.com", "user", [1, 2, 3, 4, 5, 6, 7, 8])
    assert hers.previous.request_id == "alice-1"  # her next turn is compared with her own request
    assert store.resolve(B, None, "", [1, 2, 3, 4, 5, 6, 7, 8]).previous.request_id == "alice-1"


def test_retention_is_bounded_in_count_tokens_and_time() -> None:
    now = [0.0]
    store = SessionStore(0, max_requests=3, max_tokens=10, max_age_s=100.0, clock=lambda: now[0])
    for i in range(4):
        store.remember(past(f"r{i}", f"s{i}", [i + 1, 9]))
    assert [h.past.request_id for h in store.held] == ["r1", "r2", "r3"]  # count
    store.remember(past("long", "s9", [5] * 7))
    assert [h.past.request_id for h in store.held] == ["r3", "long"] and store.tokens == 9  # tokens
    now[0] = 50.0
    store.remember(past("later", "s8", [6, 9]))
    now[0] = 120.0  # the first two are over 100 s old
    assert store.resolve(A, None, "", [5, 5, 5, 5, 5, 5, 1]).previous is None
    assert [h.past.request_id for h in store.held] == ["later"]


POLICIES = (
    "Beta travel desk. You book trains and hotels for the team, check every date twice, never invent a "
    "price, and say when you are unsure. Current time: "
)


def test_sessions_are_matched_and_misses_explained(smollm2_server: Server) -> None:
    """Without a session id a request joins the one it extends most; each change is named by region."""
    client = openai_client(smollm2_server)

    def ask(system: str, user: str, tools: list | None = None) -> dict[str, Any]:
        extra = {"tools": [{"type": "function", "function": WEATHER}]} if tools else {}
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        reply = client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=2, **GREEDY, **extra
        )
        return reply.model_extra["kvtestbed"]

    first = ask(POLICIES + "09:00", "Book Paris.")
    assert first["session_source"] == "new" and first["miss_reason"] == "first_request"
    second = ask(POLICIES + "09:05", "Book Paris.")
    assert second["session_source"] == "matched" and second["session_id"] == first["session_id"]
    assert second["previous_request_id"] == first["request_id"] and second["miss_reason"] == "system_changed"
    assert second["divergence"]["region"] == "system" and "09:0⟂" in second["divergence"]["text"]
    assert second["cached_tokens"] == second["expected_cached_tokens"] <= second["divergence"]["token"]
    hint = second["hint"]  # the doctor's classifier: the clock, and what moving it would have served
    assert (hint["cause"], hint["before"], hint["after"]) == ("clock", "09:00", "09:05")
    assert second["cached_tokens"] <= hint["would_serve_tokens"] < second["prompt_tokens"]
    third = ask(POLICIES + "09:05", "Book Paris.", tools=True)  # this template appends tools to the system
    assert third["miss_reason"] == "tools_changed" and third["divergence"]["region"] == "tools"
    fourth = ask(POLICIES + "09:05", "Book Rome.", tools=True)
    assert fourth["miss_reason"] == "messages_changed" and fourth["divergence"]["region"] == "latest user"
    assert fourth["cached_tokens"] > third["cached_tokens"] > 0
    history = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Bye"},
    ]
    # A client of its own (the key names it, keyed server or not): no earlier request of its can match.
    own = client.with_options(api_key="key-of-a-client-never-seen")
    unseen = own.chat.completions.create(
        model=MODEL, messages=history, max_tokens=2, extra_headers={"X-Session-Id": "never-seen"}, **GREEDY
    ).model_extra["kvtestbed"]
    assert unseen["session_source"] == "header" and unseen["miss_reason"] == "previous_message_not_found"
    # Named by nothing: example turns (aider's first prompt) open a session; a tool result shows a model's turn.
    examples = [{"role": "system", "content": "Edit code."}, *history[:2], *history]
    called = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    answered = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [called]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny."},
    ]
    for key, messages, source, reason in (
        ("key-of-aider", examples, "new", "first_request"),
        ("key-of-an-agent", answered, "new", "previous_message_not_found"),
    ):
        reply = client.with_options(api_key=key).chat.completions.create(
            model=MODEL, messages=messages, max_tokens=2, **GREEDY
        )
        report = reply.model_extra["kvtestbed"]
        assert (report["session_source"], report["miss_reason"]) == (source, reason), key


def test_sessions_never_cross_clients(smollm2_server: Server) -> None:
    """Alice (no key, her session in `user`), then a probe with her exact conversation but no key and no
    session, and one with another key: neither is matched to her session nor shown her ids or text; her
    next turn is compared with her own request, not with the probes."""
    url = f"{smollm2_server.url}/v1/chat/completions"
    alice = [
        {"role": "system", "content": POLICIES + "alice 07:12"},
        {"role": "user", "content": "Book Oslo."},
    ]

    def ask(messages: list, headers: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
        body = {"model": MODEL, "messages": messages, "max_tokens": 2, **GREEDY, **fields}
        reply = http("POST", url, body, headers)
        assert reply.status == 200, reply.text
        return reply.json()["kvtestbed"]

    hers = ask(alice, user="alice@example.com")
    assert (hers["session_id"], hers["miss_reason"]) == ("alice@example.com", "first_request")
    for headers in ({}, {"Authorization": "Bearer mallory"}):
        probe = ask(alice, headers)
        his = probe["request_id"]
        assert probe["session_id"] != "alice@example.com" and probe["session_source"] == "new"
        assert probe["previous_request_id"] is probe["previous_session_id"] is probe["divergence"] is None
        assert probe["miss_reason"] == "first_request"
        assert probe["cached_tokens"] > 0  # the prefix cache itself is shared: docs/serve.md says so
    named = ask(alice, {"Authorization": "Bearer mallory"}, user="alice@example.com")  # her name, not her key
    assert named["session_id"] == "alice@example.com" and named["previous_request_id"] == his  # his own
    again = ask(
        alice + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks."}],
        user="alice@example.com",
    )
    assert again["previous_request_id"] == hers["request_id"]


def test_a_second_agent_run_is_compared_with_the_first(smollm2_server: Server) -> None:
    """Claude Code's own title request (tests/fixtures/agents), run twice with one key: the second run's
    session is new (its own x-claude-code-session-id) yet its first request is compared with the first run's
    and says where it broke (the billing header's version hash in the system prompt) instead of
    first_request; the same request under another key is a first request."""
    captured = json.loads((AGENTS / "claude-code-no-tools.json").read_text())
    headers = {k: v for k, v in captured["headers"].items() if k not in ("accept-encoding", "connection")}
    body = captured["body"] | {"model": MODEL, "max_tokens": 2, "stream": False, "temperature": 0}

    def run(session: str, version: str, key: str = "claude-key") -> dict[str, Any]:
        system = [dict(captured["body"]["system"][0])] + captured["body"]["system"][1:]
        system[0]["text"] = system[0]["text"].replace(
            "cc_version=2.1.197.484", f"cc_version=2.1.197.{version}"
        )
        user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": session})
        sent = body | {"system": system, "metadata": {"user_id": user_id}}
        reply = http(
            "POST",
            f"{smollm2_server.url}/v1/messages",
            sent,
            headers | {"x-claude-code-session-id": session, "x-api-key": key},
        )
        assert reply.status == 200, reply.text
        return reply.json()["kvtestbed"]

    first = run("run-1", "484")
    assert (first["session_id"], first["session_source"]) == ("run-1", "x-claude-code-session-id")
    assert first["miss_reason"] == "first_request"
    second = run("run-2", "8dc")
    assert (second["session_id"], second["previous_request_id"]) == ("run-2", first["request_id"])
    assert second["previous_session_id"] == "run-1" and second["miss_reason"] == "system_changed"
    assert (
        second["divergence"]["region"] == "system" and "cc_version=2.1.197.⟂" in second["divergence"]["text"]
    )
    assert second["expected_cached_tokens"] == second["cached_tokens"] < second["divergence"]["token"] + 16
    other = run("run-3", "8dc", key="someone-else")
    assert other["previous_request_id"] is None and other["miss_reason"] == "first_request"
