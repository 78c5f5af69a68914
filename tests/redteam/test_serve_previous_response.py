"""`previous_response_id`: a stored response belongs to the client identity that made it (API key digest,
else named session, else anonymous): anyone else gets the 404 an unknown id gets, and nothing of the
conversation; `input` of any JSON type beside it, an empty id."""

from __future__ import annotations

import pytest

from tests.redteam.conftest import MODEL, serve
from tests.redteam.hostile import clear, post

SECRET = "the vault code is 4417"


def _first(url: str, headers: dict[str, str]) -> str:
    body = {"model": MODEL, "input": f"Remember: {SECRET}.", "max_output_tokens": 2}
    answer = post(url, "/v1/responses", body, headers)
    assert answer.status == 200, answer.body[:300]
    return answer.json()["id"]


def _follow(url: str, previous: str, headers: dict[str, str]):  # type: ignore[no-untyped-def]
    body = {"model": MODEL, "input": "What is the code?", "previous_response_id": previous}
    return post(url, "/v1/responses", body | {"max_output_tokens": 2}, headers)


ALICE = {"Authorization": "Bearer alice"}
OTHERS = {
    "another key": {"Authorization": "Bearer mallory"},
    "the key as x-api-key of another": {"x-api-key": "mallory"},
    "anonymous": {},
    "a named session": {"X-Session-Id": "alice"},
}


@pytest.mark.parametrize("isolate", [False, True], ids=["shared-cache", "isolate-cache"])
def test_another_identity_cannot_continue_a_response(tiny_engine, isolate: bool) -> None:  # type: ignore[no-untyped-def]
    with serve(tiny_engine, isolate_cache=isolate, default_max_tokens=2) as server:
        previous = _first(server.url, ALICE)
        unknown = _follow(server.url, "resp_" + "0" * 24, ALICE)
        clear(unknown, 404, "previous_response_id")
        for who, headers in OTHERS.items():
            answer = _follow(server.url, previous, headers)
            assert answer.status == 404, who
            assert answer.error == unknown.error | {"message": answer.error["message"]}, who
            assert SECRET not in answer.body.decode() and previous in answer.error["message"]
        assert _follow(server.url, previous, ALICE).status == 200
        # the session-named client's own responses are its own: the session id is its credential
        mine = _first(server.url, {"X-Session-Id": "s-1"})
        assert _follow(server.url, mine, {"X-Session-Id": "s-1"}).status == 200
        assert _follow(server.url, mine, {"X-Session-Id": "s-2"}).status == 404
        anon = _first(server.url, {})
        assert _follow(server.url, anon, {}).status == 200
        assert _follow(server.url, anon, ALICE).status == 404


@pytest.mark.parametrize("value", [5, True, False, 0, 2.5, None, {"role": "user"}])
def test_input_of_another_type_with_previous_response_id(open_server, value) -> None:  # type: ignore[no-untyped-def]
    previous = _first(open_server.url, {})
    body = {"model": MODEL, "input": value, "previous_response_id": previous, "max_output_tokens": 2}
    clear(post(open_server.url, "/v1/responses", body), 400, "input")


def test_an_empty_previous_response_id_is_refused(open_server) -> None:  # type: ignore[no-untyped-def]
    body = {"model": MODEL, "input": "hi", "previous_response_id": "", "max_output_tokens": 2}
    clear(post(open_server.url, "/v1/responses", body), 400, "previous_response_id")
