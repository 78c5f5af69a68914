"""Scripted replies (`--replies agent|script:FILE`): the agent script calls a read-only tool each client offers
(Claude Code's Bash `ls`, Codex's `exec_command`, a function's required arguments from its schema) and
answers once the result is back; a replies file is read line by line, every wrong line named; on an
in-process server over a tiny random Qwen2 the script's tokens come out through the engine as a tool call the
Anthropic SDK reads, the follow-up after its result gets the final answer from the cache, both reported as
scripted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anthropic
import pytest

import engine
from engine.errors import InvalidArgumentError
from engine.serve.app import build_state
from engine.serve.scripted_replies import FINAL_ANSWER, NO_TOOLS_ANSWER, ReplyScript, parse_replies
from tests.serve.clients import WEATHER
from tests.serve.in_process import serving

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
ASK = [{"role": "user", "content": "List the files."}]


def tools_of(name: str) -> list[dict]:
    body = json.loads((FIXTURES / f"{name}.json").read_text())["body"]
    return [t for t in body["tools"] if "name" in t]


def called(message: dict) -> tuple[str, dict]:
    fn = message["tool_calls"][0]["function"]
    return fn["name"], fn["arguments"]


def test_the_agent_script_calls_a_tool_each_client_knows_then_answers() -> None:
    agent = ReplyScript("agent")
    assert called(agent.reply(ASK, tools_of("claude-code-request")))[0] == "Bash"
    assert called(agent.reply(ASK, tools_of("codex-request"))) == ("exec_command", {"cmd": "ls"})
    glob = {"name": "Glob", "input_schema": {"type": "object"}}
    assert called(agent.reply(ASK, [WEATHER, glob]))[0] == "Glob"  # the known tool before the first
    assert called(agent.reply(ASK, [{"type": "function", "function": WEATHER}])) == (
        "get_weather",
        {"city": "example"},
    )
    after = [*ASK, {"role": "assistant", "content": ""}, {"role": "tool", "content": "a.md"}]
    assert agent.reply(after, [WEATHER])["content"] == FINAL_ANSWER
    assert agent.reply(ASK, None) == {"role": "assistant", "content": NO_TOOLS_ANSWER}


def test_a_replies_file_is_read_by_turn_and_every_wrong_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    path.write_text(json.dumps(call) + "\n\n" + json.dumps("Sunny.") + "\n")
    script = parse_replies(f"script:{path}")
    assert script is not None and script.name == f"script:{path}"
    assert called(script.reply(ASK, None)) == ("get_weather", {"city": "Paris"})
    turn = [*ASK, {"role": "assistant", "content": "x"}]
    assert script.reply(turn, None)["content"] == "Sunny."
    assert called(script.reply([*turn, *turn], None))[0] == "get_weather"  # cycles past the last line
    assert parse_replies("model") is None
    path.write_text('{"token_ids": [5, 0, 7]}\n')  # exact tokens, as a model may sample them
    exact = parse_replies(f"script:{path}")
    assert exact is not None and exact.reply(ASK, None)["token_ids"] == [5, 0, 7]
    for text, wrong in (
        ("{", "line 1 is not JSON"),
        ('"a"\n{"content": 3}', "line 2 must be"),
        ('{"token_ids": [-1]}', "line 1 must be"),
        ("", "no replies"),
    ):
        path.write_text(text)
        with pytest.raises(InvalidArgumentError, match=wrong):
            parse_replies(f"script:{path}")
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        parse_replies(f"script:{tmp_path / 'missing'}")
    with pytest.raises(InvalidArgumentError, match="expected model, agent or script:FILE"):
        parse_replies("scripted")


def test_scripted_replies_go_through_the_engine_as_a_tool_call_and_an_answer(
    tiny_dir: Callable[..., Path],
) -> None:
    model = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)
    with serving(build_state(model, ["tiny"], replies=ReplyScript("agent"))) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=120)
        tool = {"name": "Glob", "description": "Find files", "input_schema": {"type": "object"}}
        ask = {"model": "tiny", "max_tokens": 200, "tools": [tool]}
        first = client.messages.create(messages=[{"role": "user", "content": "List the files."}], **ask)
        assert first.stop_reason == "tool_use"
        use = next(b for b in first.content if b.type == "tool_use")
        assert (use.name, use.input) == ("Glob", {"pattern": "*.md"})
        report = first.model_extra["kvtestbed"]
        assert (
            report["scripted_reply"] == "agent" and report["completion_tokens"] == first.usage.output_tokens
        )
        result = {"type": "tool_result", "tool_use_id": use.id, "content": "README.md"}
        history = [
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {"role": "user", "content": [result]},
        ]
        second = client.messages.create(messages=history, **ask)
        assert second.stop_reason == "end_turn" and second.content[0].text == FINAL_ANSWER
        assert second.usage.cache_read_input_tokens > 0
