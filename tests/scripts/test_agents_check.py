"""scripts/agents_check.py and agent_runs.py without npm or a server: reading the server's access log and
--record file, finding the repeated request, the verdict per client, and each client's documented settings."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from agent_runs import Run, command  # noqa: E402
from agents_check import Outcome, Repeat, cached_and_prompt, find_repeat, http_statuses, report  # noqa: E402

ACCESS_LOG = """\
INFO engine.serve: something else
INFO:     127.0.0.1:50312 - "HEAD / HTTP/1.1" 404 Not Found
INFO:     127.0.0.1:50314 - "POST /v1/messages?beta=true HTTP/1.1" 400 Bad Request
INFO:     127.0.0.1:50316 - "POST /v1/messages?beta=true HTTP/1.1" 400 Bad Request
INFO:     127.0.0.1:50318 - "POST /v1/responses HTTP/1.1" 200 OK
"""


def test_http_statuses_counts_method_path_and_status_without_the_query() -> None:
    assert http_statuses(ACCESS_LOG) == Counter(
        {("HEAD", "/", 404): 1, ("POST", "/v1/messages", 400): 2, ("POST", "/v1/responses", 200): 1}
    )


def line(body: dict, cached: int, prompt: int) -> dict:
    return {"body": body, "kvtestbed": {"cached_tokens": cached, "prompt_tokens": prompt}}


def test_the_repeat_ignores_per_session_fields_and_reports_its_cached_tokens() -> None:
    title = {"model": "m", "messages": [{"role": "user", "content": "title"}]}
    main = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {"user_id": "run-1"}}
    run1 = [line(title, 0, 40), line(main, 0, 900)]
    run2 = [line(main | {"metadata": {"user_id": "run-2"}}, 880, 900), line(title, 32, 40)]
    assert find_repeat(run1, run2) == Repeat(index=3, first=2, cached=880, prompt=900)
    changed = main | {"messages": [{"role": "user", "content": "other"}]}
    assert find_repeat(run1, [line(changed, 0, 900)]) is None
    codex = {"model": "m", "input": [{"type": "message", "id": "msg_1", "role": "user", "content": "hi"}]}
    again = {"model": "m", "input": [{"type": "message", "id": "msg_2", "role": "user", "content": "hi"}]}
    assert find_repeat([line(codex, 0, 90)], [line(again, 80, 90)]) == Repeat(2, 1, 80, 90)  # item ids aside


def test_cached_and_prompt_from_each_api_usage_when_there_is_no_kvtestbed_object() -> None:
    anthropic = {"input_tokens": 10, "cache_read_input_tokens": 96, "cache_creation_input_tokens": 16}
    assert cached_and_prompt({"usage": anthropic}) == (96, 122)
    chat = {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}
    assert cached_and_prompt({"usage": chat}) == (32, 50)
    responses = {"input_tokens": 70, "input_tokens_details": {"cached_tokens": 64}}
    assert cached_and_prompt({"usage": responses}) == (64, 70)
    assert cached_and_prompt(line({}, 16, 20)) == (16, 20)


def outcome(status: int, cached: int | None, exit_status: int | str = 0) -> Outcome:
    runs = [Run("claude -p hi", exit_status, "Done.", 3.0), Run("claude -p hi", 0, "Done.", 2.0)]
    statuses = Counter({("POST", "/v1/messages", status): 2})
    repeat = None if cached is None else Repeat(3, 1, cached, 900)
    return Outcome("claude-code", "2.1.197", runs=runs, statuses=statuses, recorded=2, repeat=repeat)


def test_verdict_needs_clean_exits_no_errors_and_a_cached_repeat() -> None:
    assert outcome(200, 880).ok
    assert not outcome(400, 880).ok
    assert not outcome(200, 0).ok
    assert not outcome(200, None).ok
    assert not outcome(200, 880, exit_status="timeout").ok
    text = report(outcome(400, None), "synthetic:qwen2.5-0.5b")
    assert text.splitlines()[0] == "claude-code 2.1.197 on synthetic:qwen2.5-0.5b: FAILED"
    assert "HTTP: POST /v1/messages 400 x2" in text and "repeat: none of the 2 recorded" in text
    assert "cached 880 of 900 prompt tokens" in report(outcome(200, 880), "m")
    assert report(Outcome("codex", skipped="npm not found"), "m") == "codex: skipped: npm not found"


def test_each_client_gets_only_its_documented_settings(tmp_path: Path, monkeypatch) -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    tools = tmp_path / "tools"
    (tools / "node_modules" / ".bin").mkdir(parents=True)
    for name in ("claude", "codex"):
        (tools / "node_modules" / ".bin" / name).touch()
    url = "http://127.0.0.1:8123"
    argv, env = command("claude-code", url, tmp_path, tools, "k")
    assert (
        argv[1:] == ["-p", argv[2]] and env["ANTHROPIC_BASE_URL"] == url and env["ANTHROPIC_API_KEY"] == "k"
    )
    assert not {k for k in env if k.startswith("ANTHROPIC_")} - {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"}
    argv, env = command("codex", url, tmp_path, tools, "k", model="served-name")
    config = tomllib.loads((Path(env["CODEX_HOME"]) / "config.toml").read_text())
    provider = config["model_providers"][config["model_provider"]]
    assert config["model"] == "served-name" and provider["base_url"] == f"{url}/v1"
    assert provider["wire_api"] == "responses" and env[provider["env_key"]] == "k"
    argv, env = command("agents-chat", url, tmp_path, None, "k", model="smollm2-135m")
    assert argv[-3:] == ["agents-chat", "--model", "smollm2-135m"] and env["OPENAI_BASE_URL"] == f"{url}/v1"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert command("codex", url, tmp_path, None, "k").startswith("codex not found")
