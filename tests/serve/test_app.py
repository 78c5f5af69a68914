"""The server's routes end to end, against a real `python -m engine.serve` process (SmolLM2, CPU, float32,
greedy) through the official SDKs and plain HTTP: raw streams and where the extension object rides, errors
in each API's shape naming the field (no traceback), the models route, concurrent clients."""

from __future__ import annotations

import json
import threading
from typing import Any

import anthropic
import openai
import pytest

from tests.serve.clients import GREEDY, MODEL, anthropic_client, openai_client
from tests.serve.conftest import Server, http


def sse_events(reply_text: str) -> list[tuple[str | None, str]]:
    """(event name, data) of each server-sent event."""
    out = []
    for block in reply_text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines.get("event"), lines["data"]))
    return out


def test_raw_streams_carry_the_extension_on_their_last_data(smollm2_server: Server) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hi."}],
        "max_tokens": 3,
        "stream": True,
    }
    reply = http("POST", f"{smollm2_server.url}/v1/chat/completions", body | GREEDY)
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    data = [d for _, d in sse_events(reply.text)]
    assert data[-1] == "[DONE]"
    last = json.loads(data[-2])  # no include_usage: the finish chunk is the last, and carries it
    assert last["choices"][0]["finish_reason"] == "length" and "usage" not in last
    assert last["kvtestbed"]["completion_tokens"] == 3
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hi."}],
        "max_tokens": 3,
        "stream": True,
    }
    events = sse_events(http("POST", f"{smollm2_server.url}/v1/messages", body | GREEDY).text)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    delta = json.loads(events[-2][1])
    assert delta["delta"]["stop_reason"] == "max_tokens" and delta["usage"]["output_tokens"] == 3
    assert delta["kvtestbed"]["prompt_tokens"] == json.loads(events[0][1])["message"]["usage"][
        "input_tokens"
    ] + (delta["kvtestbed"]["cached_tokens"] + delta["kvtestbed"]["cache_written_tokens"])


def no_traceback(reply: Any) -> None:
    assert "Traceback" not in reply.text and 'File "' not in reply.text


@pytest.mark.parametrize(
    ("body", "status", "param", "words"),
    [
        (b'{"model": "smollm2-135m", "messages": [', 400, None, "not valid JSON"),
        (b"[1, 2]", 400, None, "JSON object"),
        ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "model", "gpt-4o"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"},
            400,
            "temperature",
            "number",
        ),
        ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "n": 2}, 400, "n", "one choice"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "frobnicate": 1},
            400,
            "frobnicate",
            "unrecognized",
        ),
        (
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
            },
            400,
            "messages[0].content[0].type",
            "image_url",
        ),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9000},
            400,
            "messages",
            "8192",
        ),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "hello " * 9000}]},
            400,
            "messages",
            "never truncated",
        ),
    ],
)
def test_openai_errors_name_the_field(
    smollm2_server: Server, body: Any, status: int, param: str | None, words: str
) -> None:
    reply = http("POST", f"{smollm2_server.url}/v1/chat/completions", body)
    error = reply.json()["error"]
    assert reply.status == status and error["param"] == param and words in error["message"], error
    assert set(error) == {"message", "type", "param", "code"}
    no_traceback(reply)


@pytest.mark.parametrize(
    ("body", "status", "kind", "words"),
    [
        (b"{not json", 400, "invalid_request_error", "not valid JSON"),
        (
            {"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
            404,
            "not_found_error",
            "claude-x",
        ),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
            400,
            "invalid_request_error",
            "max_tokens",
        ),
        (
            {"model": MODEL, "max_tokens": 5, "top_k": 5, "messages": [{"role": "user", "content": "hi"}]},
            400,
            "invalid_request_error",
            "top_k",
        ),
        (
            {"model": MODEL, "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]},
            400,
            "invalid_request_error",
            "messages[0].role",
        ),
        (
            {
                "model": MODEL,
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "lighthouse " * 8200}],
            },
            400,
            "invalid_request_error",
            "prompt is too long: ",
        ),
    ],
)
def test_anthropic_errors_name_the_field(
    smollm2_server: Server, body: Any, status: int, kind: str, words: str
) -> None:
    reply = http("POST", f"{smollm2_server.url}/v1/messages", body)
    data = reply.json()
    assert reply.status == status and data["type"] == "error" and data["error"]["type"] == kind, data
    assert words in data["error"]["message"], data
    no_traceback(reply)


def test_sdk_errors_and_routes(smollm2_server: Server) -> None:
    with pytest.raises(openai.NotFoundError):
        openai_client(smollm2_server).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(anthropic.BadRequestError):
        anthropic_client(smollm2_server).messages.create(
            model=MODEL,
            max_tokens=5,
            messages=[{"role": "user", "content": [{"type": "image", "source": {}}]}],
        )
    assert [m.id for m in openai_client(smollm2_server).models.list()] == [MODEL]
    missing = http("GET", f"{smollm2_server.url}/v1/nothing")
    assert missing.status == 404 and "error" in missing.json()
    assert "kvtestbed_prefix_cache_hits_total" in smollm2_server.metrics()


def test_two_concurrent_clients(smollm2_server: Server) -> None:
    """Two conversations at once, batched by the engine's scheduler: each keeps its own session and reuses its
    own first turn."""
    barrier, results, failures = threading.Barrier(2), {}, []

    def converse(name: str) -> None:
        try:
            client = openai_client(smollm2_server)
            messages = [
                {"role": "system", "content": f"{name} support line. Answer in a few words."},
                {"role": "user", "content": "What colour is the sky?"},
            ]
            barrier.wait(timeout=30)
            first = client.chat.completions.create(
                model=MODEL, messages=messages, max_tokens=6, user=name, **GREEDY
            )
            messages += [
                {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "Why?"},
            ]
            second = client.chat.completions.create(
                model=MODEL, messages=messages, max_tokens=6, user=name, **GREEDY
            )
            results[name] = (first.model_extra["kvtestbed"], second.model_extra["kvtestbed"])
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    threads = [threading.Thread(target=converse, args=(name,)) for name in ("Gamma", "Delta")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not failures and set(results) == {"Gamma", "Delta"}
    for name, (first, second) in results.items():
        assert first["session_id"] == second["session_id"] == name
        assert second["previous_request_id"] == first["request_id"] and second["cached_tokens"] > 0
