"""What the record keeps of a body: the fields that change nothing bounded (a digest past the bound), the
rest as sent; and, against the real SmolLM2 server, the issue's 20 MB `metadata` costing the record a few
hundred bytes instead of 20 MB, on both APIs, extra `cache_control` keys likewise."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from engine.serve.recorded_body import FIELD_BYTES, MARKER_BYTES, NO_EFFECT, as_sent, recorded_body
from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.response_chain import DIGEST, compact
from tests.serve.clients import MODEL
from tests.serve.conftest import Server, http


def sha(value: Any) -> str:
    return (
        "sha256:"
        + hashlib.sha256(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
    )


@pytest.mark.parametrize("name", NO_EFFECT)
def test_a_field_that_changes_nothing_is_kept_up_to_its_bound_then_digested(name: str) -> None:
    small = {"k": "v" * (FIELD_BYTES - 20)}
    assert len(compact(small)) <= FIELD_BYTES
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 100_000}], name: small}
    assert recorded_body(body) is not body and recorded_body(body) == body  # a copy, equal
    big = {"k": "é" * FIELD_BYTES}
    out = recorded_body(body | {name: big})
    assert out[name] == {DIGEST: sha(big), "bytes": len(compact(big))} and out["messages"] is body["messages"]
    assert out[name]["bytes"] == 2 * FIELD_BYTES + 8  # UTF-8 bytes of the compact JSON
    assert recorded_body(body | {name: "s" * (2 * FIELD_BYTES)})[name][DIGEST] == sha("s" * (2 * FIELD_BYTES))


def test_cache_control_keeps_type_and_ttl_and_digests_a_large_rest() -> None:
    small = {"type": "ephemeral", "ttl": "1h", "scope": "global"}
    junk = "j" * MARKER_BYTES
    big = {"type": "ephemeral", "ttl": "1h", "note": junk}
    body = {
        "system": [{"type": "text", "text": "S", "cache_control": small}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": big}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "again"}]},
        ],
        "tools": [
            {
                "name": "t",
                "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral", "x": junk},
            }
        ],
        "cache_control": {"type": "ephemeral", "x": junk},
    }
    out = recorded_body(body)
    assert out["system"] is body["system"] and out["messages"][1:] == body["messages"][1:]
    marker = out["messages"][0]["content"][0]["cache_control"]
    assert marker == {"type": "ephemeral", "ttl": "1h", DIGEST: sha({"note": junk}), "bytes": len(junk) + 11}
    assert out["tools"][0]["cache_control"] == {
        "type": "ephemeral",
        DIGEST: sha({"x": junk}),
        "bytes": len(junk) + 8,
    }
    assert out["cache_control"]["type"] == "ephemeral" and DIGEST in out["cache_control"]
    assert body["messages"][0]["content"][0]["cache_control"] is big  # the body itself is never changed
    recorded, sent = parse_anthropic(out), parse_anthropic(body)  # the replay reads the same request
    assert recorded.messages == sent.messages and recorded.breakpoints == sent.breakpoints
    assert recorded.auto_cache_ttl_s == sent.auto_cache_ttl_s and recorded.tools == sent.tools


def record_of(server: Server, request_id: str) -> tuple[dict[str, Any], int]:
    for line in server.record.read_text().splitlines():
        entry = json.loads(line)
        if entry["kvtestbed"]["request_id"] == request_id:
            return entry, len(line)
    raise AssertionError(f"{request_id} not recorded")


def test_the_issues_20_mb_metadata_against_the_server(smollm2_server: Server) -> None:
    huge = {"blob": "m" * (20 << 20)}
    messages = [{"role": "user", "content": "Metadata check."}]
    openai = {
        "model": MODEL,
        "max_tokens": 1,
        "messages": messages,
        "metadata": huge,
        "safety_identifier": "s" * (1 << 20),
    }
    reply = http("POST", f"{smollm2_server.url}/v1/chat/completions", openai)
    assert reply.status == 200, reply.text
    entry, size = record_of(smollm2_server, reply.json()["id"])
    assert size < 4096 and entry["body"]["metadata"] == {DIGEST: sha(huge), "bytes": len(compact(huge))}
    assert entry["body"]["messages"] == messages
    marker = {"type": "ephemeral", "junk": "c" * (5 << 20)}
    anthropic = {
        "model": MODEL,
        "max_tokens": 1,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Marker check.", "cache_control": marker}]}
        ],
        "metadata": {"user_id": "marker-check"},
    }
    reply = http("POST", f"{smollm2_server.url}/v1/messages", anthropic)
    assert reply.status == 200, reply.text
    entry, size = record_of(smollm2_server, reply.json()["id"])
    assert size < 4096 and entry["body"]["metadata"] == anthropic["metadata"]
    assert entry["body"]["messages"][0]["content"][0]["cache_control"] == {
        "type": "ephemeral",
        DIGEST: sha({"junk": marker["junk"]}),
        "bytes": len(compact({"junk": marker["junk"]})),
    }


def test_a_continuation_is_recorded_as_sent_with_a_reference() -> None:
    """The body the server merged (the kept conversation, then the new input) back as the client sent it, and
    the reference: the response, the items put first and their digest, as the store holds them."""
    history = [{"type": "message", "role": "user", "content": "hi"}, {"type": "message", "role": "assistant"}]
    new = [
        {"type": "reasoning", "encrypted_content": "x" * 100},
        {"type": "message", "role": "user", "content": "?"},
    ]
    sent, continues = as_sent({"model": "m", "input": history + new}, {"id": "resp_1", "items": 2})
    assert sent == {"model": "m", "input": new, "previous_response_id": "resp_1"}
    assert continues == {"id": "resp_1", "items": 2, DIGEST: sha(history), "bytes": len(compact(history))}
    body = {"model": "m", "input": "hello"}
    assert as_sent(body, None) == (body, None)  # nothing continued: as it is
