"""`bench replay TRACE --endpoint URL` against a real `python -m engine.serve` process on a loopback port (a
tiny random Qwen2 with the offline Qwen tokenizer, behind an API key): the shipped examples over both APIs,
with the server's reported cached tokens equal to the local prediction on every request; an error row; the
key never in the results; sessions at once. An optional run against llama-cpp-python's server."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from engine.bench.__main__ import main
from engine.errors import EngineError
from engine.traces.load import read_entries
from engine.traces.shipped import EXAMPLES
from tests.bench.commands.conftest import KEY, KEY_ENV
from tests.serve.conftest import Server, stop

MAX_TOKENS = "4"


def replay(
    server: Server, model: Path, out: Path, trace: str, *flags: str, key: str = KEY, url: str | None = None
) -> tuple[int, dict[str, Any]]:
    """Run the command in this process; its exit status and endpoint.json."""
    argv = ["replay", trace, "--endpoint", url or server.url, "--model", str(model), "--out", str(out)]
    argv += ["--max-tokens", MAX_TOKENS, "--api-key-env", KEY_ENV, *flags]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, key)
        status = main(argv)
    return status, json.loads((out / "endpoint.json").read_text())


def no_key_in(out: Path) -> None:
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("fmt", [f for f in EXAMPLES if f != "mooncake"])  # hash ids: no text
def test_reported_cached_tokens_equal_the_prediction(server, qwen_dir, tmp_path, fmt: str, api: str) -> None:
    status, result = replay(
        server, qwen_dir, tmp_path / "out", f"example:{fmt}", "--api", api, "--reset-cache"
    )
    rows = result["requests"]
    assert status == 0 and len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    # the cache was emptied first (earlier runs sent these prompts): the first request is a cold miss
    assert rows[0]["cached_tokens"] == 0 and all(r["cached_tokens"] > 0 for r in rows[1:5])
    assert [r["cached_tokens"] for r in rows] == [r["predicted_cached_tokens"] for r in rows]
    assert [r["prompt_tokens"] for r in rows] == [r["predicted_prompt_tokens"] for r in rows]
    assert all(r["agrees"] == "yes" for r in rows) and result["summary"][0]["disagreements"] == 0
    assert all(r["ttft_s"] > 0 and r["e2e_s"] >= r["ttft_s"] for r in rows)
    source = (
        "usage.prompt_tokens_details.cached_tokens" if api == "openai" else "usage.cache_read_input_tokens"
    )
    assert {r["cached_field"] for r in rows} == {source}
    vllm = json.loads((tmp_path / "out" / "vllm_bench_serve.json").read_text())  # `vllm bench serve`'s keys
    assert vllm["completed"] == 6 and vllm["ttfts"] == [r["ttft_s"] for r in rows]
    assert vllm["total_input_tokens"] == sum(r["prompt_tokens"] for r in rows) and vllm["mean_ttft_ms"] > 0
    env = result["environment"]
    assert env["endpoint"] == server.url.removeprefix("http://") == env["options"]["endpoint"]
    assert env["served_model"] == str(qwen_dir) and env["server_cache_at_start"].startswith("emptied")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "agree on every request" in report
    no_key_in(tmp_path / "out")


def test_a_failed_request_is_recorded_on_its_row_and_the_run_goes_on(server, qwen_dir, tmp_path) -> None:
    system = {"role": "system", "content": "You answer briefly."}
    first = [system, {"role": "user", "content": "Name a colour."}]
    huge = {"role": "user", "content": "word " * 9000}  # over the tiny model's 8,192-token context
    later = [*first, {"role": "assistant", "content": "Blue."}]
    trace = tmp_path / "trace.jsonl"
    lines = [
        {"session_id": "s", "body": {"messages": first}},
        {"session_id": "s", "body": {"messages": [*later, huge]}},
        {"session_id": "s", "body": {"messages": [*later, {"role": "user", "content": "Another?"}]}},
    ]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    status, result = replay(server, qwen_dir, tmp_path / "out", str(trace), "--reset-cache")
    rows = result["requests"]
    assert status == 0 and [r["status"] == "ok" for r in rows] == [True, False, True]
    assert rows[1]["status"].startswith("HTTP 400") and rows[1]["predicted_cached_tokens"] is None
    assert rows[2]["agrees"] == "yes" and result["summary"][0]["errors"] == 1
    assert "Failed requests:" in (tmp_path / "out" / "report.md").read_text()


def test_a_wrong_key_fails_every_row_and_is_never_written(server, qwen_dir, tmp_path) -> None:
    wrong = "wrong-key-for-the-test"
    with pytest.raises(EngineError, match="HTTP 401 .is the key right") as refused:
        replay(server, qwen_dir, tmp_path / "o", "example:openai-chat", key=wrong)
    assert wrong not in str(refused.value)
    named = ("--served-model", str(qwen_dir))
    status, result = replay(server, qwen_dir, tmp_path / "out", "example:openai-chat", *named, key=wrong)
    assert status == 0 and all(r["status"].startswith("HTTP 401") for r in result["requests"])
    for path in (tmp_path / "out").rglob("*"):
        assert wrong not in path.read_text() and KEY not in path.read_text()


def two_sessions(tmp_path: Path) -> list[str]:
    """The shipped OpenAI session as two trace files of two session ids."""
    names = []
    for name in ("alpha", "beta"):
        path = tmp_path / f"{name}.jsonl"
        entries = read_entries(EXAMPLES["openai-chat"])
        path.write_text("".join(json.dumps(e | {"session_id": name}) + "\n" for e in entries))
        names.append(str(path))
    return names


@pytest.mark.parametrize("pace", [["--concurrency", "2"], ["--request-rate", "20"]])
def test_sessions_at_once(server, qwen_dir, tmp_path, pace: list[str]) -> None:
    a, b = two_sessions(tmp_path)
    argv = [
        "replay",
        a,
        b,
        "--endpoint",
        server.url,
        "--model",
        str(qwen_dir),
        "--out",
        str(tmp_path / "out"),
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, KEY)
        assert main([*argv, "--max-tokens", MAX_TOKENS, "--api-key-env", KEY_ENV, *pace]) == 0
    rows = json.loads((tmp_path / "out" / "endpoint.json").read_text())["requests"]
    assert sorted((r["session"], r["turn"]) for r in rows) == sorted(
        (s, t) for s in ("alpha", "beta") for t in range(1, 7)
    )
    assert all(r["status"] == "ok" and isinstance(r["cached_tokens"], int) for r in rows)
    starts = [r["started_s"] for r in rows]
    assert starts == sorted(starts)  # rows in the order they were sent


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--endpoint", "ftp://x"], "http:// or https://"),
        (["--endpoint", "http://u:p@127.0.0.1:1"], "without credentials"),
        (["--endpoint", "http://127.0.0.1:1", "--analyze"], "--analyze"),
        (["--endpoint", "http://127.0.0.1:1", "--concurrency", "2", "--request-rate", "1"], "not both"),
        (["--concurrency", "2"], "add --endpoint"),
        (["--endpoint", "http://127.0.0.1:1", "--api-key-env", "KVTESTBED_UNSET_VARIABLE"], "not set"),
    ],
)
def test_refusals(qwen_dir, tmp_path, flags: list[str], message: str) -> None:
    with pytest.raises(EngineError, match=message):
        main(
            ["replay", "example:openai-chat", "--model", str(qwen_dir), "--out", str(tmp_path / "o"), *flags]
        )


def test_hash_id_traces_are_not_sent(qwen_dir, tmp_path) -> None:
    with pytest.raises(EngineError, match="hash-id traces hold no text"):
        main(["replay", "example:mooncake", "--model", str(qwen_dir), "--endpoint", "http://127.0.0.1:1"])


def test_a_server_that_cannot_be_reached_is_named(qwen_dir, tmp_path) -> None:
    with pytest.raises(EngineError, match="cannot reach 127.0.0.1:9"):
        main(
            [
                "replay",
                "example:openai-chat",
                "--endpoint",
                "http://127.0.0.1:9",
                "--out",
                str(tmp_path / "o"),
            ]
        )


# llama-cpp-python with its server's own dependencies (the `server` extra)
LLAMA_CPP = all(
    importlib.util.find_spec(m) is not None for m in ("llama_cpp", "sse_starlette", "starlette_context")
)


@pytest.mark.skipif(
    not LLAMA_CPP,
    reason="llama-cpp-python's server is not installed (pip install 'llama-cpp-python[server]')",
)
def test_llama_cpp_python_server(tmp_path) -> None:  # pragma: no cover - runs only where it is installed
    import subprocess
    import sys

    from engine.loading.sources import ALIASES
    from tests.serve.conftest import free_port

    package, file = ALIASES["smollm2-135m"]
    gguf = Path(importlib.util.find_spec(package).origin).parent / file
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--port",
        str(port),
        "--n_ctx",
        "4096",
    ]
    log = (tmp_path / "llama.log").open("w")
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    s = Server(f"http://127.0.0.1:{port}", process, tmp_path / "llama.log")
    try:
        wait_ready_models(s)
        argv = ["replay", "example:openai-chat", "--endpoint", s.url, "--model", "smollm2-135m"]
        assert (
            main([*argv, "--block-size", "1", "--max-tokens", MAX_TOKENS, "--out", str(tmp_path / "o")]) == 0
        )
        rows = json.loads((tmp_path / "o" / "endpoint.json").read_text())["requests"]
        assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
        # it reports no cached-token count: "not reported", never 0
        assert all(r["cached_tokens"] is None or r["agrees"] == "yes" for r in rows)
    finally:
        stop(s)


def wait_ready_models(server: Server) -> None:  # pragma: no cover - llama-cpp-python only
    """Wait (bounded) until a server without /metrics answers /v1/models."""
    import time
    import urllib.request

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"llama-cpp-python server exited:\n{server.log.read_text()}")
        try:
            with urllib.request.urlopen(f"{server.url}/v1/models", timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"llama-cpp-python server not ready:\n{server.log.read_text()}")
