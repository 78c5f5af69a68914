"""Multi-turn chat with tools through the three APIs, streamed and not (the official SDKs against the SmolLM2
server, greedy), and the recorded trace: `bench replay --analyze` of it gives the cached tokens the server
reported, request by request. The record file itself: a torn last line repaired on start, and a full disk
(/dev/full, and an OSError injected mid-line) stopping the recording with one warning while every request is
still answered, the page's feed and /metrics saying so; in process and against real server processes."""

from __future__ import annotations

import csv
import json
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.serve.recorder import Recorder
from tests.serve.clients import BLOCK, GREEDY, MODEL, WEATHER, anthropic_client, openai_client
from tests.serve.conftest import ROOT, SMOLLM2_CACHE_TOKENS, Server, http, start, stop, wait_ready

SESSIONS = ("alpha", "zulu", "romeo")


def check_openai_usage(usage: Any, ext: dict[str, Any]) -> None:
    cached = usage.prompt_tokens_details.cached_tokens
    assert usage.prompt_tokens == ext["prompt_tokens"] and cached == ext["cached_tokens"]
    assert cached % BLOCK == 0 and cached < usage.prompt_tokens  # whole blocks, never the last token


def check_anthropic_usage(usage: Any, ext: dict[str, Any]) -> None:
    assert usage.cache_read_input_tokens == ext["cached_tokens"]
    assert usage.cache_creation_input_tokens == ext["cache_written_tokens"]
    total = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    assert total == ext["prompt_tokens"]  # input_tokens excludes both cache fields


def openai_conversation(server: Server) -> list[int]:
    """Turn 1 with tools, whole; turn 2 streamed, its history holding a tool call and its result."""
    client = openai_client(server)
    tools = [{"type": "function", "function": WEATHER}]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Alpha desk assistant. Answer in one short sentence."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    first = client.chat.completions.create(
        model=MODEL, messages=messages, tools=tools, max_tokens=48, user="alpha", **GREEDY
    )
    ext = first.model_extra["kvtestbed"]
    assert first.choices[0].finish_reason == "stop"  # EOS: the replay caches the reply as decoded
    assert ext["session_id"] == "alpha" and ext["miss_reason"] == "first_request"
    assert first.usage.prompt_tokens_details.cached_tokens == 0  # 0, not absent, on a miss
    check_openai_usage(first.usage, ext)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": [{"type": "text", "text": "And the weather there?"}]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C and sunny"},
    ]
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=messages,
            tools=tools,
            max_tokens=24,
            stream=True,
            stream_options={"include_usage": True},
            user="alpha",
            **GREEDY,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    last = chunks[-1]
    assert text and not last.choices and last.usage is not None
    ext = last.model_extra["kvtestbed"]
    check_openai_usage(last.usage, ext)
    assert ext["previous_request_id"] == first.id and ext["miss_reason"] is None and ext["divergence"] is None
    assert last.usage.prompt_tokens_details.cached_tokens > 0
    assert ext["cached_tokens"] == ext["expected_cached_tokens"]
    return [0, ext["cached_tokens"]]


def anthropic_conversation(server: Server) -> list[int]:
    client = anthropic_client(server)
    tools = [
        {"name": "get_weather", "description": WEATHER["description"], "input_schema": WEATHER["parameters"]}
    ]
    system = [
        {"type": "text", "text": "Zulu help line. Reply briefly.", "cache_control": {"type": "ephemeral"}}
    ]
    options = {
        "model": MODEL,
        "system": system,
        "tools": tools,
        "metadata": {"user_id": "zulu"},
        "extra_body": GREEDY,
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Name one primary colour."}]
    first = client.messages.create(messages=messages, max_tokens=48, **options)
    ext = first.model_extra["kvtestbed"]
    assert first.stop_reason == "end_turn" and ext["session_source"] == "metadata.user_id"
    check_anthropic_usage(first.usage, ext)
    assert first.usage.cache_read_input_tokens == 0 and first.usage.cache_creation_input_tokens > 0
    messages += [
        {"role": "assistant", "content": first.content[0].text},
        {"role": "user", "content": "Check the weather in Oslo."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3 C, snow"}],
        },
    ]
    with client.messages.stream(messages=messages, max_tokens=24, **options) as stream:
        events = [e for e in stream if e.type != "text"]
        final = stream.get_final_message()
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert {"content_block_start", "content_block_delta", "content_block_stop"} <= set(kinds)
    ext = events[-2].model_extra["kvtestbed"]  # on the message_delta event, which carries the final usage
    check_anthropic_usage(final.usage, ext)
    assert final.usage.cache_read_input_tokens > 0 and ext["miss_reason"] is None
    return [0, ext["cached_tokens"]]


def responses_conversation(server: Server) -> list[int]:
    """Turn 1 with tools, whole; turn 2 streamed, continuing it by previous_response_id with a tool call and
    its result (the recording holds the new input and a reference to the first response)."""
    client = openai_client(server)
    options = {
        "model": MODEL,
        "tools": [WEATHER | {"type": "function"}],
        "user": "romeo",
        "max_output_tokens": 48,
        **GREEDY,
    }
    first = client.responses.create(
        instructions="Romeo desk. Answer in one short sentence.", input="Name a fruit.", **options
    )
    ext = first.model_extra["kvtestbed"]
    assert first.status == "completed" and ext["session_id"] == "romeo"  # EOS: cached as decoded
    assert first.usage.input_tokens_details.cached_tokens == 0 == ext["cached_tokens"]
    call = {
        "type": "function_call",
        "call_id": "call_9",
        "name": "get_weather",
        "arguments": '{"city": "Rome"}',
    }
    result = {"type": "function_call_output", "call_id": "call_9", "output": "25 C, clear"}
    with client.responses.stream(
        instructions="Romeo desk. Answer in one short sentence.",
        input=[{"role": "user", "content": "And in Rome?"}, call, result],
        previous_response_id=first.id,
        **options | {"max_output_tokens": 24},
    ) as stream:
        last = list(stream)[-1]  # response.completed, or response.incomplete if cut at 24 tokens
    final = last.response
    ext = final.model_extra["kvtestbed"]
    assert ext["previous_request_id"] == first.id and ext["miss_reason"] is None
    assert final.usage.input_tokens_details.cached_tokens == ext["cached_tokens"] > 0
    assert ext["cached_tokens"] == ext["expected_cached_tokens"]
    return [0, ext["cached_tokens"]]


def analyzed(record: Path, fmt: str, out: Path) -> subprocess.Popen:
    part = out.with_suffix(".jsonl")
    lines = [line for line in record.read_text().splitlines() if json.loads(line)["format"] == fmt]
    part.write_text("\n".join(lines) + "\n")
    cmd = [sys.executable, "-m", "engine.bench", "replay", str(part), "--analyze", "--model", MODEL]
    cmd += ["--cache-tokens", str(SMOLLM2_CACHE_TOKENS), "--block-size", str(BLOCK), "--rules", "local"]
    return subprocess.Popen(
        cmd + ["--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_multi_turn_with_tools_and_the_replay_of_its_recording(
    smollm2_server: Server, tmp_path: Path
) -> None:
    """The whole recording is replayed (other tests' requests included: their prompts share no block with
    these two conversations); these conversations' requests are compared. Another test's reply cut by
    max_tokens would replay one token longer than the server cached it (a trace does not say where a reply
    was cut), so those are not held to equality here."""
    served = {
        "openai-chat": openai_conversation(smollm2_server),
        "anthropic": anthropic_conversation(smollm2_server),
        "openai-responses": responses_conversation(smollm2_server),
    }
    runs = {fmt: analyzed(smollm2_server.record, fmt, tmp_path / fmt) for fmt in served}
    for fmt, run in runs.items():
        output, _ = run.communicate(timeout=300)
        assert run.returncode == 0, output
        with (tmp_path / fmt / "requests.csv").open() as f:
            replayed = [(r["conversation"], int(r["cached_tokens"])) for r in csv.DictReader(f)]
        entries = [json.loads(line) for line in smollm2_server.record.read_text().splitlines()]
        recorded = [(e["session_id"], e["kvtestbed"]["cached_tokens"]) for e in entries if e["format"] == fmt]
        assert len(replayed) == len(recorded)
        ours = [pair for pair in zip(replayed, recorded, strict=True) if pair[1][0] in SESSIONS]
        assert [r for r, _ in ours] == [s for _, s in ours], fmt
        assert [cached for _, (_, cached) in ours] == served[fmt]


def request(number: int, body: dict[str, Any] | None = None) -> Any:
    """What Recorder.write reads of a ChatRequest."""
    return SimpleNamespace(
        submitted=1.0 + number,
        api="openai-chat",
        body=body or {"n": number},
        request_id=f"r{number}",
        sampled=None,
        as_sampled=(),
        notes={},
        output=None,
    )


def write(recorder: Recorder, number: int, body: dict[str, Any] | None = None) -> None:
    recorder.write(
        request(number, body), SimpleNamespace(steps=None), {"prompt_tokens": 1}, {"session_id": "s"}
    )


def lines_of(path: Path) -> list[Any]:
    data = path.read_bytes()
    assert not data or data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


@pytest.mark.parametrize(
    ("before", "kept"),
    [
        (b'{"a": 1}\n{"a": 2}\n{"body": {"text": "cut off her', b'{"a": 1}\n{"a": 2}\n'),  # the kill
        (b'{"a": 1}\n{"body": "\xc3', b'{"a": 1}\n'),  # mid-way through a UTF-8 character
        (b'{"body": "no newline at all', b""),
        (b'{"a": 1}\n' + b"x" * (3 << 20), b'{"a": 1}\n'),  # a torn line longer than a read chunk
    ],
    ids=["kill", "utf-8", "one-line", "long"],
)
def test_a_torn_last_line_is_cut_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, before: bytes, kept: bytes
) -> None:
    path = tmp_path / "record.jsonl"
    path.write_bytes(before)
    with caplog.at_level(logging.WARNING, "kvtestbed.serve"):
        recorder = Recorder(path)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and str(path) in warnings[0]
    assert f"{len(before) - len(kept)} bytes after the last complete line" in warnings[0]
    assert path.read_bytes() == kept
    write(recorder, 3)
    recorder.close()
    assert lines_of(path)[-1]["body"] == {"n": 3} and len(lines_of(path)) == kept.count(b"\n") + 1


def test_a_whole_file_is_left_as_it_is(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "record.jsonl"
    path.write_bytes(b'{"a": 1}\n')
    with caplog.at_level(logging.WARNING, "kvtestbed.serve"):
        Recorder(path).close()
        Recorder(tmp_path / "new.jsonl").close()
    assert not caplog.records and path.read_bytes() == b'{"a": 1}\n'
    assert (tmp_path / "new.jsonl").read_bytes() == b""


class FailingFile:
    """A file whose writes fail from the `fail_at`-th on, after taking part of the line (a disk filling up)."""

    def __init__(self, real: Any, fail_at: int) -> None:
        self.real, self.writes, self.fail_at = real, 0, fail_at

    def write(self, data: Any) -> int:
        self.writes += 1
        if self.writes == self.fail_at:
            return self.real.write(data[: len(data) // 2])
        if self.writes > self.fail_at:
            raise OSError(28, "No space left on device")
        return self.real.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_failed_write_stops_recording_once_and_leaves_no_torn_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "record.jsonl"
    recorder = Recorder(path)
    write(recorder, 1)
    recorder.file = FailingFile(recorder.file, fail_at=1)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, "kvtestbed.serve"):
        for n in range(2, 6):
            write(recorder, n)  # never raises: the request it records is answered regardless
    assert recorder.file.writes == 2  # type: ignore[attr-defined]  # half of line 2, its failed rest; no more
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "recording stopped" in warnings[0] and "No space left" in warnings[0]
    assert recorder.status() == {"path": str(path), "lines": 1, "stopped": recorder.stopped}
    assert str(path) in recorder.stopped and [line["body"] for line in lines_of(path)] == [{"n": 1}]


def test_the_record_is_strict_json(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "record.jsonl"
    recorder = Recorder(path)
    with caplog.at_level(logging.ERROR, "kvtestbed.serve"):
        write(recorder, 1, {"temperature": float("nan")})  # json_body.py refuses it first; never written
    write(recorder, 2)
    assert "not recorded" in caplog.text and "NaN" not in path.read_text()
    assert [line["body"] for line in lines_of(path)] == [{"n": 2}]


def test_a_full_disk_and_a_torn_record_against_real_servers(
    tmp_path: Path, tiny_dir: Callable[..., Path]
) -> None:
    """Two server processes: one recording to /dev/full (every write fails: ENOSPC), one to a file whose
    last line a kill tore. Both answer every request on both APIs, streamed or not."""
    model = str(tiny_dir("qwen2", tokenizer=True))
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b'{"a": 1}\n{"body": {"messages": [{"role": "user", "content": "half')
    servers = {
        name: start(["--model", model, "--device", "cpu", "--record", str(record)], tmp_path / f"{name}.log")
        for name, record in (("full", Path("/dev/full")), ("torn", torn))
    }
    messages = [{"role": "user", "content": "Hello there."}]
    try:
        for server in servers.values():
            wait_ready(server)
            for path, stream in (
                ("/v1/chat/completions", False),
                ("/v1/messages", True),
                ("/v1/messages", False),
            ):
                body = {"model": model, "max_tokens": 2, "messages": messages, "stream": stream}
                reply = http("POST", server.url + path, body)
                assert reply.status == 200 and "error" not in reply.text, reply.text
        full = servers["full"]
        assert (
            full.metric("kvtestbed_recording ") == 0 and servers["torn"].metric("kvtestbed_recording ") == 1
        )
        feed = http("GET", f"{full.url}/v1/kvtestbed/requests").json()
        assert len(feed["requests"]) == 3 and feed["recording"]["lines"] == 0
        assert "No space left on device" in feed["recording"]["stopped"]
        torn_feed = http("GET", f"{servers['torn'].url}/v1/kvtestbed/requests").json()
        assert torn_feed["recording"] == {"path": str(torn), "lines": 3, "stopped": None}
    finally:
        for server in servers.values():
            stop(server)
    log = full.log.read_text()
    assert log.count("recording stopped") == 1 and "Traceback" not in log
    log = servers["torn"].log.read_text()
    assert log.count("last line was torn") == 1 and f"{torn}" in log
    assert [line.get("a") for line in lines_of(torn)] == [1, None, None, None]


def test_a_record_line_carries_the_extension_object_the_response_carried(smollm2_server: Server) -> None:
    """A whole (not streamed) response's `kvtestbed` object, with what parsing noted (`not_applied`) and the
    tool calls' report, is the one its --record line holds."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [{"type": "function", "function": WEATHER}],
        "reasoning_effort": "low",
        "max_tokens": 8,
        "temperature": 0,
    }
    report = http("POST", f"{smollm2_server.url}/v1/chat/completions", body).json()["kvtestbed"]
    assert "not_applied" in report and "tool_calls" in report
    assert smollm2_server.record is not None
    lines = [json.loads(line) for line in smollm2_server.record.read_text().splitlines()]
    (line,) = [x for x in lines if x["kvtestbed"].get("request_id") == report["request_id"]]
    assert line["kvtestbed"] == report
