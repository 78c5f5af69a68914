"""scripts/agents_check.py, agent_runs.py and agent_installs.py without npm, PyPI or a server: reading the
server's access log and --record file, finding the repeated request, each request in a few words, the verdict
per client, each client's documented settings, where a Python client is found (here, else its own virtual
environment), and that no folder holding the user's files is emptied."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import agents_check  # noqa: E402
from agent_installs import found, installed_version, python_for  # noqa: E402
from agent_runs import MARK, Run, claim, command, not_ours, prepare  # noqa: E402
from agents_check import (  # noqa: E402
    Outcome,
    Repeat,
    cached_and_prompt,
    find_repeat,
    http_statuses,
    report,
    turn,
)

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
    # aider's A2 holds the file A1 edited; B1, a copy of the repository as it was, repeats A1
    assert find_repeat(run1, [line(changed, 0, 900)], [line(title, 32, 40)]) == Repeat(4, 1, 32, 40)


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
    requests = [[line({}, 0, 900), line({}, 896, 910)], [line({}, 880, 900), line({}, 896, 910)]]
    return Outcome("claude-code", "2.1.197", runs=runs, requests=requests, statuses=statuses, repeat=repeat)


def test_verdict_needs_clean_exits_no_errors_and_a_cached_repeat() -> None:
    assert outcome(200, 880).ok
    assert not outcome(400, 880).ok
    assert not outcome(200, 0).ok
    assert not outcome(200, None).ok
    assert not outcome(200, 880, exit_status="timeout").ok
    text = report(outcome(400, None), "synthetic:qwen2.5-0.5b")
    assert text.splitlines()[0] == "claude-code 2.1.197 on synthetic:qwen2.5-0.5b: FAILED"
    assert "HTTP: POST /v1/messages 400 x2" in text and "repeat: none of the 2 recorded" in text
    assert "  A1 (in work/): exit 0 after 3 s; last line: Done." in text
    assert "    2 requests: 880/900 (98%); 896/910 (98%)" in text  # A2's
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


def test_each_request_in_a_few_words() -> None:
    hit = line({}, 96, 100) | {"kvtestbed": {"cached_tokens": 96, "prompt_tokens": 100, "miss_reason": "hit"}}
    assert turn(hit) == "96/100 (96%)"
    miss = {
        "cached_tokens": 480,
        "prompt_tokens": 21304,
        "miss_reason": "system_changed",
        "divergence": {"token": 490, "region": "system"},
        "tool_calls": {"format": "hermes", "calls": 1, "problems": []},
    }
    assert turn({"kvtestbed": miss}) == "480/21304 (2%) system_changed at token 490 (system), 1 tool call"
    gone = {"cached_tokens": 0, "prompt_tokens": 50, "miss_reason": "first_request", "aborted": True}
    assert turn({"kvtestbed": gone}) == "0/50 (0%) first_request, aborted"


def test_aider_is_run_without_a_terminal_with_its_documented_flags(tmp_path: Path, monkeypatch) -> None:
    bin_dir = tmp_path / "tools" / "venvs" / "aider-chat" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "aider").touch()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    argv, env = command("aider", "http://127.0.0.1:8123", tmp_path, tmp_path / "tools", "k", model="m")
    assert argv[0] == str(bin_dir / "aider") and argv[1:7] == [
        "--model",
        "openai/m",
        "--openai-api-base",
        "http://127.0.0.1:8123/v1",
        "--openai-api-key",
        "k",
    ]
    assert {"--no-stream", "--yes-always"} <= set(argv) and argv[-2] == "--message"
    assert env["HOME"] == str(tmp_path / "home")
    assert command("aider", "http://x", tmp_path, None, "k").startswith("aider not found")


def test_a_python_client_not_importable_here_runs_in_its_own_environment(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    if installed_version("langchain-anthropic", None):
        pytest.skip("langchain-anthropic is installed here: it is used as it is")
    assert not found("langchain-anthropic", tools)
    site = tools / "venvs" / "langchain-anthropic" / "lib" / "python3.11" / "site-packages"
    (site / "langchain_anthropic-1.7.10.dist-info").mkdir(parents=True)
    assert installed_version("langchain-anthropic", tools) == "1.7.10"
    python = python_for("langchain-anthropic", tools)
    assert python == str(tools / "venvs" / "langchain-anthropic" / "bin" / "python")
    argv, _ = command("langchain-anthropic", "http://x", tmp_path, tools, "k", model="m")
    assert argv[0] == python and argv[-3:] == ["langchain-anthropic", "--model", "m"]


def test_a_folder_is_emptied_only_where_a_run_made_it(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    assert "holds files that no agents run wrote" in (not_ours(mine) or "")
    with pytest.raises(FileExistsError):
        prepare(mine)
    assert (mine / "notes.txt").read_text() == "the user's"
    base = tmp_path / "run"
    prepare(base)
    assert (base / MARK).exists() and (base / "work" / "README.md").exists()
    assert (base / "elsewhere" / ".git").is_dir()  # the same repository in another directory
    (base / "work" / "left.txt").write_text("from the last run")
    assert not_ours(base) is None and not_ours(tmp_path / "absent") is None
    prepare(base)
    assert not (base / "work" / "left.txt").exists()
    claim(tmp_path / "empty")
    assert [p.name for p in (tmp_path / "empty").iterdir()] == [MARK]


def test_an_out_whose_folder_holds_the_users_files_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    (tmp_path / "smollm2-135m").mkdir()
    (tmp_path / "smollm2-135m" / "keep.txt").write_text("the user's")
    monkeypatch.setattr(agents_check, "prepare_clients", lambda args: pytest.fail("installed anyway"))
    with pytest.raises(SystemExit) as exited:
        agents_check.main(["--clients", "agents-chat", "--out", str(tmp_path), "--no-netns"])
    assert exited.value.code == 2 and "--out:" in capsys.readouterr().err
    assert (tmp_path / "smollm2-135m" / "keep.txt").read_text() == "the user's"


def test_aider_gets_a_server_of_its_own() -> None:
    args = agents_check.argparse.Namespace(
        clients=["codex", "agents-chat", "aider"], coding_model="/m/tiny q"
    )
    groups = agents_check.groups(args)
    assert [(g.clients, g.folder) for g in groups] == [
        (["codex"], "m-tiny-q"),
        (["agents-chat"], "smollm2-135m"),
        (["aider"], "smollm2-135m-aider"),
    ]
    assert groups[0].client_model is None and groups[2].client_model == "smollm2-135m"
