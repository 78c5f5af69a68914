"""Agents' trajectories: mini-swe-agent `.traj.json` (one request per assistant message, each with its raw
response's usage and provider) and SWE-agent `.traj` (each step's query as sent); a folder run that skips a
file it cannot read and goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.kv.block_manager import BlockManager
from engine.loading.sources import resolve
from engine.runtime.loader import with_tokenizer
from engine.traces.agreement import agreement, provider_rule
from engine.traces.analysis import Analyzer
from engine.traces.inputs import load_inputs
from engine.traces.providers.deepseek import DeepSeekRule
from engine.traces.providers.local import LocalRule
from engine.traces.rendering import TraceRenderer
from engine.traces.supplied import Supplied

REAL = Path(__file__).resolve().parents[3] / "shared" / "traces" / "mini_swe_agent_astropy.traj.json"
BASH = {"name": "bash", "description": "Run a command", "schema": {"type": "object", "properties": {}}}


def call(i: str, command: str) -> dict:
    return {
        "id": i,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }


def assistant(text: str, calls: list[dict], created: int, prompt: int, hit: int) -> dict:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": hit},
    }
    usage |= {"prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": prompt - hit}
    response = {"id": f"r{created}", "created": created, "model": "deepseek-v4-flash", "usage": usage}
    return {"role": "assistant", "content": text, "tool_calls": calls, "extra": {"response": response}}


def mini_swe_agent(path: Path) -> Path:
    messages = [
        {"role": "system", "content": "You solve tasks with a shell."},
        {"role": "user", "content": "Fix the failing test."},
        assistant("Looking.", [call("c1", "ls"), call("c2", "cat a.py")], 1000, 900, 832),
        {"role": "tool", "tool_call_id": "c1", "content": "a.py", "extra": {"returncode": 0}},
        {"role": "tool", "tool_call_id": "c2", "content": "x = 1", "extra": {"returncode": 0}},
        assistant("Done.", [call("c3", "echo COMPLETE")], 1010, 1000, 960),
        {"role": "tool", "tool_call_id": "c3", "content": "COMPLETE"},
        {"role": "exit", "content": "diff --git a/a.py b/a.py", "extra": {"exit_status": "Submitted"}},
    ]
    doc = {"info": {"config": {"model": {"model_name": "deepseek/deepseek-chat"}}}, "messages": messages}
    path.write_text(
        json.dumps(doc | {"trajectory_format": "mini-swe-agent-1.1", "instance_id": "demo-1"}, indent=2)
    )
    return path


def test_mini_swe_agent_one_request_per_assistant_message_with_deepseek_usage(tmp_path: Path) -> None:
    inputs = load_inputs([mini_swe_agent(tmp_path / "demo.traj.json")], supplied=Supplied(tools=(BASH,)))
    first, second = inputs.requests
    assert inputs.formats == ["mini-swe-agent"]
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert second.recorded.provider == "deepseek" and second.recorded.cache_read_tokens == 960
    assert (second.timestamp, second.session, second.model) == (1010.0, "demo-1", "deepseek-v4-flash")
    assert second.tools[0]["function"]["name"] == "bash" and second.missing == ()
    assert any("final `exit` message" in n for n in inputs.notes)


def test_swe_agent_steps_are_their_queries_rewritten_observations_included(tmp_path: Path) -> None:
    system, task = {"role": "system", "content": "You are SWE-agent."}, {"role": "user", "content": "Fix it."}
    reply = {"role": "assistant", "content": "Look.", "tool_calls": [call("t1", "ls")], "agent": "main"}
    seen = {"role": "tool", "content": [{"type": "text", "text": "a.py b.py"}], "tool_call_ids": ["t1"]}
    step2 = [system, task, reply, seen]
    elided = [system, task, reply, seen | {"content": "Old environment output: (2 lines omitted)"}]
    reply2 = {"role": "assistant", "content": "Again.", "tool_calls": [call("t2", "ls b")]}
    step3 = [*elided, reply2, {"role": "tool", "content": "b.py", "tool_call_ids": ["t2"]}]
    steps = [{"query": q, "response": "", "action": "ls"} for q in ([system, task], step2, step3)]
    path = tmp_path / "demo.traj"
    path.write_text(json.dumps({"trajectory": steps, "info": {"model_stats": {"api_calls": 3}}}))
    inputs = load_inputs([tmp_path])
    got = inputs.requests
    assert inputs.formats == ["swe-agent"] and len(got) == 3
    assert got[1].messages[3] == {"role": "tool", "content": "a.py b.py", "tool_call_id": "t1"}
    assert got[2].messages[3]["content"].startswith("Old environment output")  # as the model got it
    assert all(r.recorded is None and r.missing == ("tools",) for r in got)


def test_a_folder_skips_a_file_it_cannot_read_and_goes_on(tmp_path: Path) -> None:
    mini_swe_agent(tmp_path / "good.traj.json")
    (tmp_path / "broken.json").write_text('{"messages": [')
    inputs = load_inputs([tmp_path])
    assert len(inputs.requests) == 2
    assert [n for n in inputs.notes if "broken" in n] == [
        f"skipped {tmp_path / 'broken.json'}: is not valid JSON, neither as one request (Expecting value: "
        "line 1 column 15 (char 14)) nor as one request per line (line 1: Expecting value: line 1 column 15 "
        "(char 14))"
    ]
    with pytest.raises(TraceError, match="broken.json"):  # named on its own, it is refused
        load_inputs([tmp_path / "broken.json"])


@pytest.mark.skipif(not REAL.exists(), reason="the shared real traces are not next to this checkout")
def test_the_real_mini_swe_agent_trajectory_reads_as_64_deepseek_calls() -> None:
    inputs = load_inputs([REAL])
    assert len(inputs.requests) == 64 and inputs.notes[-1].endswith("no model call)")
    assert all(r.recorded.provider == "deepseek" for r in inputs.requests)
    assert all(r.recorded.cache_read_tokens % 64 == 0 for r in inputs.requests)
    assert inputs.requests[-1].recorded.prompt_tokens == 35424 and len(inputs.requests[-1].messages) == 128
    source, tokenizer = with_tokenizer(resolve("synthetic:qwen2.5-0.5b-128k", 0))
    local = LocalRule(BlockManager(8192, 16, b"real"), context=source.config.max_position_embeddings)
    records = Analyzer(TraceRenderer(tokenizer, source.eos_ids), local, [DeepSeekRule()]).run(inputs.requests)
    assert {provider_rule(r) for r in records} == {"deepseek"}
    assert all(r.served["deepseek"].cached_tokens % 64 == 0 for r in records)  # its real units
    (row,) = [a for a in agreement(records, ["deepseek"])]
    assert row["agree"] > 0.9 and row["median_share_gap"] < 1.0  # 62 of 64, 0.21 points when written
