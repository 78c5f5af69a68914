"""Sessions: an explicit id, else the earlier request this one extends most (beyond the preamble); and,
through the SmolLM2 server, each change named by the region it lies in."""

from __future__ import annotations

from typing import Any

from engine.serve.miss_reason import PastRequest
from engine.serve.sessions import SessionStore
from tests.serve.clients import GREEDY, MODEL, WEATHER, openai_client
from tests.serve.conftest import Server


def test_explicit_ids_and_matching() -> None:
    store = SessionStore(preamble_tokens=3)
    first = store.resolve(None, "", [1, 2, 3, 4, 5])
    assert first.source == "new" and first.previous is None
    store.remember(PastRequest("r1", first.session, "m", [1, 2, 3, 4, 5, 6]))
    store.remember(PastRequest("r2", "named", "m", [1, 2, 3, 9, 9]))
    extends = store.resolve(None, "", [1, 2, 3, 4, 5, 6, 7])
    assert (extends.session, extends.source, extends.previous.request_id) == (first.session, "matched", "r1")
    assert store.resolve(None, "", [1, 2, 3, 8]).source == "new"  # shares only the preamble
    tie = store.resolve(None, "", [1, 2, 3, 4])  # 4 tokens shared with r1 (and 3 with r2): r1
    assert tie.previous.request_id == "r1"
    named = store.resolve("named", "header", [1, 2, 3, 4, 5, 6, 7])
    assert (named.session, named.source, named.previous.request_id) == ("named", "header", "r2")
    assert store.resolve("fresh", "user", [1]).previous is None


def test_the_latest_of_equal_matches_wins() -> None:
    store = SessionStore(preamble_tokens=0)
    store.remember(PastRequest("a", "s1", "m", [1, 2, 3]))
    store.remember(PastRequest("b", "s2", "m", [1, 2, 3]))
    assert store.resolve(None, "", [1, 2, 3, 4]).session == "s2"
    store.remember(PastRequest("c", "s1", "m", [1, 2, 3]))  # s1 is now the latest
    assert store.resolve(None, "", [1, 2, 3, 4]).session == "s1"


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
    unseen = client.chat.completions.create(
        model=MODEL, messages=history, max_tokens=2, extra_headers={"X-Session-Id": "never-seen"}, **GREEDY
    ).model_extra["kvtestbed"]
    assert unseen["session_source"] == "header" and unseen["miss_reason"] == "previous_message_not_found"
