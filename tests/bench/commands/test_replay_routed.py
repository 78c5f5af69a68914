"""`bench replay TRACE --endpoint URL1 --endpoint URL2 --router R` against two real `python -m engine.serve`
processes (the bundled SmolLM2) on loopback ports: each request goes where the policy puts it, and the cached
tokens each server reported equal the prediction of that server's own cache, request by request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.bench.__main__ import main
from engine.errors import EngineError
from tests.serve.conftest import Server, start, stop, wait_ready

CACHE_TOKENS = "8192"
TURNS = 3


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    folder = tmp_path_factory.mktemp("replicas")
    args = [
        "--model",
        "smollm2-135m",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--cache-tokens",
        CACHE_TOKENS,
    ]
    servers = [start(args, folder / f"replica{i}.log") for i in range(2)]  # their loads overlap
    try:
        for s in servers:
            wait_ready(s)
        yield servers
    finally:
        for s in servers:
            stop(s)


def routed(replicas: list[Server], traces: list[str], out: Path, router: str) -> dict[str, Any]:
    argv = ["replay", *traces, "--model", "smollm2-135m", "--out", str(out), "--router", router]
    for s in replicas:
        argv += ["--endpoint", s.url]
    argv += ["--max-tokens", "4", "--reset-cache", "--cache-tokens", CACHE_TOKENS, "--dtype", "float32"]
    assert main(argv) == 0
    return json.loads((out / "endpoint.json").read_text())


def hosts(replicas: list[Server]) -> list[str]:
    return [s.url.removeprefix("http://") for s in replicas]


def short_sessions(tmp_path: Path) -> list[str]:
    """Two sessions of the same short conversation (TURNS requests, each carrying the replies before it),
    as two trace files: small prompts, so the replicas answer fast."""
    system = {"role": "system", "content": "You are a terse assistant for a garden shop. " * 4}
    questions = ["Which herbs grow in shade?", "And in full sun?", "Which of those need the least water?"]
    paths = []
    for name in ("alpha", "beta"):
        messages, lines = [system], []
        for t, q in enumerate(questions[:TURNS]):
            messages = [*messages, {"role": "user", "content": q}]
            body = {"model": "m", "messages": messages}
            lines.append(
                json.dumps({"timestamp": f"2026-01-01T00:00:{10 * t:02d}Z", "session_id": name, "body": body})
            )
            messages = [*messages, {"role": "assistant", "content": f"Answer {t + 1}: mint, parsley."}]
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("router", ["round-robin", "kv-cost"])
def test_cached_tokens_equal_the_prediction_of_each_placement(replicas, tmp_path, router: str) -> None:
    result = routed(replicas, short_sessions(tmp_path), tmp_path / "out", router)
    rows = result["requests"]
    assert len(rows) == 2 * TURNS and all(r["status"] == "ok" for r in rows)
    assert [r["cached_tokens"] for r in rows] == [r["predicted_cached_tokens"] for r in rows]
    assert [r["prompt_tokens"] for r in rows] == [r["predicted_prompt_tokens"] for r in rows]
    placed = [r["replica"] for r in rows]
    assert set(placed) <= set(hosts(replicas))
    assert result["environment"]["router"] == router
    assert sum(x["requests"] for x in result["replicas"]) == len(rows)
    sent = sorted(rows, key=lambda r: r["started_s"])
    if router == "round-robin":  # in turn, in the order they were sent (one session at a time)
        turns = [r["replica"] for r in sent]
        assert turns[::2] == [turns[0]] * TURNS and turns[1::2] == [turns[1]] * TURNS
        assert turns[0] != turns[1]
    else:  # both sessions are the same conversation: a prefix router keeps it where its prefix is cached
        assert len(set(placed)) == 1
        assert all(r["cached_tokens"] > 0 for r in rows[1:])


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--endpoint", "http://127.0.0.1:1", "--endpoint", "http://127.0.0.1:2"], "give --router"),
        (["--endpoint", "http://127.0.0.1:1", "--router", "session"], "give --endpoint once per replica"),
        (["--router", "session"], "add --endpoint"),
        (
            [
                "--endpoint",
                "http://127.0.0.1:1",
                "--endpoint",
                "http://127.0.0.1:1/v1",
                "--router",
                "session",
            ],
            "twice",
        ),
    ],
)
def test_refusals(tmp_path, flags: list[str], message: str) -> None:
    with pytest.raises(EngineError, match=message):
        main(
            ["replay", "example:openai-chat", "--model", "smollm2-135m", "--out", str(tmp_path / "o"), *flags]
        )
