"""Replies rendered back as the model sampled them (engine/serve/kept_replies.py): the store finds a reply by
its first call's id or its text, for its own client only, tells a call the client changed, and forgets the
oldest past its bytes; through in-process servers on loopback driven by the official SDKs, with scripted
replies forced through the engine, a tool call the model wrote in its own whitespace comes back with no
token missed (SmolLM2's generic format over Chat Completions, a tiny Qwen's Hermes template over Anthropic
Messages), a reply holding a character the tokenizer normalizes comes back whole with `--splice-sampled on`
and labelled `reply_retokenized` with it off, a call over the Responses API by `previous_response_id` too;
a call the server no longer keeps is labelled `tool_call_rerendered`, one the client changed
`messages_changed`; and `bench replay --analyze` of the record gives the cached tokens the server
reported."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from transformers.convert_slow_tokenizer import bytes_to_unicode

import engine
from engine.prompts.sampled import CALLS, TEXT, TOKENS, SampledReply
from engine.runtime.engine import Engine
from engine.serve.app import build_state
from engine.serve.kept_replies import KeptReplies
from engine.serve.recorder import Recorder
from engine.serve.scripted_replies import parse_replies
from tests.serve.clients import WEATHER
from tests.serve.in_process import InProcess, serving
from tests.serve.test_recorder import analyzed

CALL_TEXT = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
ASK = "What is the weather in Paris?"


def call_message(call_id: str, city: str = "Paris", content: str = "") -> dict[str, Any]:
    fn = {"name": "get_weather", "arguments": {"city": city}}
    return {"role": "assistant", "content": content, "tool_calls": [{"id": call_id, "function": fn}]}


def test_the_store_finds_a_reply_by_its_call_or_its_text_for_its_own_client_only() -> None:
    kept = KeptReplies()
    call = SampledReply("r1", "\n" + CALL_TEXT, (1, 2, 3), {"call_a0": "\n" + CALL_TEXT})
    kept.keep("alice", call, "", [("call_a0", "get_weather", '{"city": "Paris"}')])
    text = SampledReply("r2", "Sunny.", (4, 5), {})
    kept.keep("alice", text, "Sunny.", [])
    history = [{"role": "user", "content": ASK}, call_message("call_a0"), {"role": "tool", "content": "sun"}]
    uses, edited = kept.uses("alice", [*history, {"role": "assistant", "content": "Sunny."}], tokens=True)
    assert [(u.message, u.reply.request_id, u.how) for u in uses] == [(1, "r1", TOKENS), (3, "r2", TOKENS)]
    assert uses[0].body(history[1]) == "\n" + CALL_TEXT and not edited
    assert kept.uses("bob", history, tokens=True) == ((), frozenset())  # another client's replies
    as_text, _ = kept.uses("alice", history, tokens=False)
    assert [u.how for u in as_text] == [TEXT]
    assert kept.uses("alice", [{"role": "assistant", "content": "Sunny."}], tokens=False)[0] == ()
    said = call_message("call_a0", content="Let me look.")
    (use,), _ = kept.uses("alice", [said], tokens=True)
    assert use.how == CALLS and use.body(said) == "Let me look.\n" + CALL_TEXT  # its text, the raw call
    assert kept.uses("alice", [call_message("call_a0", city="Rome")], tokens=True) == ((), {"r1"})


def test_the_store_forgets_the_oldest_past_its_bytes() -> None:
    kept = KeptReplies(max_bytes=250)  # 102 bytes a reply: text and content 35 each, 8 ids
    for n in range(4):
        kept.keep("a", SampledReply(f"r{n}", f"reply {n}" * 5, tuple(range(8)), {}), f"reply {n}" * 5, [])
    assert list(kept.items) == ["r2", "r3"] and kept.bytes == 204
    assert kept.uses("a", [{"role": "assistant", "content": "reply 0" * 5}], tokens=True)[0] == ()
    assert len(kept.uses("a", [{"role": "assistant", "content": "reply 3" * 5}], tokens=True)[0]) == 1


@contextmanager
def scripted(model: Engine, tmp_path: Path, lines: list[Any], **options: Any) -> Iterator[InProcess]:
    script = tmp_path / f"replies-{len(list(tmp_path.iterdir()))}.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # Each server starts on an empty cache: the engine is the module's, and an earlier test's requests may
    # have left blocks of the same conversation (the Chat and Responses round trips render the same tokens),
    # which would serve a second request more than its first request left (`whole_reuse`).
    model.reset_cache()
    state = build_state(model, ["m"], replies=parse_replies(f"script:{script}"), **options)
    with serving(state) as server:
        yield server


def whole_reuse(first: dict[str, Any], second: dict[str, Any]) -> None:
    """The second request reused all of the first's prompt and reply (whole blocks), nothing changed."""
    done = first["prompt_tokens"] + first["completion_tokens"] - 1  # the last sampled token is never fed
    assert second["divergence"] is None and second["miss_reason"] is None, second["divergence"]
    assert second["cached_tokens"] == second["expected_cached_tokens"] == done // 16 * 16


@pytest.fixture(scope="module")
def smollm2() -> Engine:
    return engine.load("smollm2-135m", device="cpu", cache_tokens=4096)


@pytest.fixture(scope="module")
def qwen(tiny_dir: Callable[..., Path]) -> Engine:
    return engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)


def generic_round_trip(server: InProcess) -> list[dict[str, Any]]:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=120)
    ask = {"model": "m", "tools": [{"type": "function", "function": WEATHER}], "max_tokens": 64}
    messages: list[Any] = [{"role": "user", "content": ASK}]
    first = client.chat.completions.create(messages=messages, **ask)
    (call,) = first.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    messages += [first.choices[0].message.model_dump(exclude_none=True)]
    messages += [{"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C."}]
    second = client.chat.completions.create(messages=messages, **ask)
    return [first.model_extra["kvtestbed"], second.model_extra["kvtestbed"]]


def test_a_generic_format_call_comes_back_with_no_token_missed(smollm2: Engine, tmp_path: Path) -> None:
    """SmolLM2's template has no tool section: the server teaches `<tool_call>\\n{...}\\n</tool_call>` and would
    re-render the call so; the model wrote it without the newlines."""
    record = tmp_path / "record.jsonl"
    recorder = Recorder(record)
    with scripted(smollm2, tmp_path, [CALL_TEXT, "Sunny."], recorder=recorder) as server:
        first, second = generic_round_trip(server)
    recorder.close()
    whole_reuse(first, second)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert lines[0]["sampled"]["text"] == CALL_TEXT and lines[0]["sampled"]["calls"][0]["raw"] == CALL_TEXT
    assert lines[1]["as_sampled"] == [{"message": 1, "reply": first["request_id"], "as": "tokens"}]
    run = analyzed(record, "openai-chat", tmp_path / "replay")
    output, _ = run.communicate(timeout=300)
    assert run.returncode == 0, output
    with (tmp_path / "replay" / "requests.csv").open() as f:
        replayed = [int(r["cached_tokens"]) for r in csv.DictReader(f)]
    assert replayed == [first["cached_tokens"], second["cached_tokens"]]


def test_a_call_over_the_responses_api_comes_back_by_previous_response_id(
    smollm2: Engine, tmp_path: Path
) -> None:
    """The kept conversation of `previous_response_id` carries the function_call item, by its call_id."""
    with scripted(smollm2, tmp_path, [CALL_TEXT, "Sunny."]) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=120)
        ask = {"model": "m", "tools": [WEATHER | {"type": "function"}], "max_output_tokens": 64}
        first = client.responses.create(input=ASK, **ask)
        (call,) = [item for item in first.output if item.type == "function_call"]
        result = {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C."}
        second = client.responses.create(input=[result], previous_response_id=first.id, **ask)
    whole_reuse(first.model_extra["kvtestbed"], second.model_extra["kvtestbed"])


def test_a_call_forgotten_or_changed_names_the_cause(smollm2: Engine, tmp_path: Path) -> None:
    """A reply no longer kept (pushed out past the bound by a later one) is rendered by the template:
    `tool_call_rerendered`; a call sent back with other arguments is the client's edit: `messages_changed`."""
    with scripted(smollm2, tmp_path, [CALL_TEXT, "Sunny."]) as server:
        server.state.preparer.kept.max_bytes = 0  # only the newest reply is kept
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=120)
        ask = {"model": "m", "tools": [{"type": "function", "function": WEATHER}], "max_tokens": 64}
        reasons = []
        for other, city in ((True, "Paris"), (False, "Rome")):
            messages: list[Any] = [{"role": "user", "content": f"{ASK} ({city})"}]
            first = client.chat.completions.create(messages=messages, **ask)
            if other:  # another reply, kept after it, pushes it out
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi."}])
            message = first.choices[0].message.model_dump(exclude_none=True)
            message["tool_calls"][0]["function"]["arguments"] = json.dumps({"city": city})
            call_id = message["tool_calls"][0]["id"]
            messages += [message, {"role": "tool", "tool_call_id": call_id, "content": "Sunny."}]
            second = client.chat.completions.create(messages=messages, **ask).model_extra["kvtestbed"]
            reasons.append((second["miss_reason"], second["previous_request_id"] == first.id))
    assert reasons == [("tool_call_rerendered", True), ("messages_changed", True)]


def test_a_hermes_call_comes_back_with_no_token_missed(qwen: Engine, tmp_path: Path) -> None:
    """Qwen's template writes a call as `<tool_call>\\n{...}\\n</tool_call>`; the model wrote it without the
    newlines. Over Anthropic Messages, the tool_use block carried back by its id."""
    with scripted(qwen, tmp_path, [CALL_TEXT, "Sunny."], splice_sampled=False) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=120)
        tool = {"name": "get_weather", "description": "weather", "input_schema": WEATHER["parameters"]}
        ask = {"model": "m", "max_tokens": 64, "tools": [tool]}
        history: list[Any] = [{"role": "user", "content": ASK}]
        first = client.messages.create(messages=history, **ask)
        use = next(b for b in first.content if b.type == "tool_use")
        assert (use.name, use.input) == ("get_weather", {"city": "Paris"})
        history += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]}
        ]
        history += [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sun"}]}
        ]
        second = client.messages.create(messages=history, **ask)
    whole_reuse(first.model_extra["kvtestbed"], second.model_extra["kvtestbed"])


def byte_tokens(model: Engine, text: str) -> list[int]:
    """The ids of `text`'s UTF-8 bytes, one token each, as a byte-level BPE model may sample them."""
    alphabet = bytes_to_unicode()
    return [model.tokenizer.convert_tokens_to_ids(alphabet[b]) for b in text.encode()]


def test_a_reply_the_tokenizer_normalizes_is_spliced_back_or_named(qwen: Engine, tmp_path: Path) -> None:
    """The model sampled U+F9C7 (a compatibility ideograph, as its three UTF-8 bytes); sent back, the
    tokenizer's NFC makes it U+5289: spliced, the prompt holds the sampled tokens; tokenized again, the miss
    is the server's rendering, `reply_retokenized`."""
    tok = qwen.tokenizer
    assert (
        tok("\uf9c7", add_special_tokens=False).input_ids == tok("\u5289", add_special_tokens=False).input_ids
    )
    ids = tok("Name:", add_special_tokens=False).input_ids + byte_tokens(qwen, " \uf9c7")
    ids += tok(" is a name.", add_special_tokens=False).input_ids
    reports = {}
    for splice in (True, False):
        with scripted(qwen, tmp_path, [{"token_ids": ids}, "Yes."], splice_sampled=splice) as server:
            client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=120)
            messages: list[Any] = [{"role": "user", "content": "A name?"}]
            first = client.chat.completions.create(model="m", messages=messages, max_tokens=64)
            assert first.choices[0].message.content == "Name: \uf9c7 is a name."
            messages += [{"role": "assistant", "content": first.choices[0].message.content}]
            messages += [{"role": "user", "content": "Sure?"}]
            second = client.chat.completions.create(model="m", messages=messages, max_tokens=64)
            reports[splice] = (first.model_extra["kvtestbed"], second.model_extra["kvtestbed"])
    whole_reuse(*reports[True])
    assert reports[False][1]["miss_reason"] == "reply_retokenized"
    assert reports[False][1]["divergence"]["retokenized"]["sampled"].count("\ufffd") == 3  # its 3 bytes
