"""`bench layout --endpoint URL` against a real `python -m engine.serve` process: the layouts' requests, each
conversation from an empty server cache (its reset route), cold baselines, reported equal to predicted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.bench.__main__ import main
from engine.errors import EngineError
from tests.bench.commands.conftest import KEY, KEY_ENV
from tests.serve.conftest import Server


def layout(server: Server, model: Path, out: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    argv = [
        "layout",
        "--endpoint",
        server.url,
        "--model",
        str(model),
        "--out",
        str(out),
        "--api-key-env",
        KEY_ENV,
    ]
    argv += [
        "--layouts",
        "stable-first",
        "timestamp-first",
        "--turns",
        "2",
        "--repeats",
        "2",
        "--max-tokens",
        "4",
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, KEY)
        status = main([*argv, *flags])
    return status, json.loads((out / "layout.json").read_text())


def test_layouts_against_a_live_server(server, qwen_dir, tmp_path) -> None:
    status, result = layout(server, qwen_dir, tmp_path / "out", "--api", "anthropic")
    rows, summary = result["requests"], {s["layout"]: s for s in result["summary"]}
    assert status == 0 and len(rows) == 2 * 2 * 2 * 2  # passes x layouts x turns x (warm, cold)
    assert all(r["status"] == "ok" and r["agrees"] == "yes" for r in rows)
    assert all(r["cached_tokens"] == 0 for r in rows if r["kind"] == "cold" or r["turn"] == 1)
    assert [r["layout"] for r in rows if r["pass"] == 1][:2] == ["timestamp-first"] * 2  # order rotated
    assert summary["stable-first"]["ttft_ratio"] == 1.0 and summary["stable-first"]["cold_ttft_s"] > 0
    assert summary["stable-first"]["cached_share"] > summary["timestamp-first"]["cached_share"]
    assert "reset" in result["environment"]["isolation"]
    for name in ("stable-first", "timestamp-first"):  # per layout and kind, in `vllm bench serve`'s keys
        warm = json.loads((tmp_path / "out" / "vllm_bench_serve" / f"{name}-warm.json").read_text())
        mine = [r for r in rows if r["layout"] == name and r["kind"] == "warm"]
        assert warm["completed"] == len(mine) == 4 and warm["duration"] > 0
        assert warm["ttfts"] == [r["ttft_s"] for r in mine] and warm["max_concurrency"] == 1
    for path in (tmp_path / "out").rglob("*"):
        assert not path.is_file() or KEY not in path.read_text()


def test_a_cache_salt_the_server_refuses_fails_on_every_row(server, qwen_dir, tmp_path) -> None:
    status, result = layout(server, qwen_dir, tmp_path / "out", "--cache-salt", "--repeats", "1")
    assert status == 0 and all(
        "HTTP 400" in r["status"] and "cache_salt" in r["status"] for r in result["requests"]
    )


def test_cache_salt_needs_an_endpoint(tmp_path) -> None:
    with pytest.raises(EngineError, match="add --endpoint"):
        main(["layout", "--cache-salt", "--out", str(tmp_path / "o")])
