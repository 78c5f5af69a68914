"""`bench replay --analyze` of the server's own `--record` file: a real `python -m engine.serve` process
(SmolLM2, greedy, two served model names) answers a mixed sequence of OpenAI and Anthropic requests in three
sessions that share a prefix across the two APIs, replies cut at their token limit, and a request under the
other served name (its own cache namespace); the replay of the one mixed record file reads each line in its
own format through one shared cache and reports, request by request, the cached tokens the server reported,
with the recorded usage beside them."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.bench.__main__ import main
from tests.serve.clients import BLOCK, GREEDY, MODEL, anthropic_client, openai_client
from tests.serve.conftest import Server, start, stop, wait_ready

OTHER = "smollm2-b"  # a second served name for the same weights: its own cache namespace
CACHE_TOKENS = 8192
SYSTEM = "You are the help desk of a small bakery. Answer in one short sentence, politely and plainly."
FIRST = "Which bread do you bake every morning, and until what time is it usually available?"


@pytest.fixture(scope="module")
def recorded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("record")
    args = ["--model", MODEL, "--device", "cpu", "--dtype", "float32", "--cache-tokens", str(CACHE_TOKENS)]
    args += [
        "--served-model-name",
        MODEL,
        "--served-model-name",
        OTHER,
        "--record",
        str(folder / "rec.jsonl"),
    ]
    server = start(args, folder / "server.log", folder / "rec.jsonl")
    try:
        wait_ready(server)
        yield server
    finally:
        stop(server)


def mixed_traffic(server: Server) -> None:
    """Sessions alpha (OpenAI) and zulu (Anthropic) open with the same system prompt and question, so
    zulu's first request reads what alpha's wrote; replies are cut at 6 tokens and carried into the next
    turn; beta asks alpha's first question under the other served name."""
    chat, messages = openai_client(server).chat.completions, anthropic_client(server).messages
    alpha: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": FIRST}]
    zulu: list[dict[str, Any]] = [{"role": "user", "content": FIRST}]
    ask = {"temperature": 0, "max_tokens": 6}

    def openai_turn(history: list[dict[str, Any]], user: str, model: str = MODEL) -> str:
        r = chat.create(model=model, messages=history, user=user, **ask)
        return r.choices[0].message.content or ""

    def anthropic_turn(history: list[dict[str, Any]]) -> str:
        r = messages.create(
            model=MODEL,
            system=SYSTEM,
            messages=history,
            metadata={"user_id": "zulu"},
            max_tokens=6,
            extra_body=GREEDY,
        )
        return "".join(b.text for b in r.content if b.type == "text")

    alpha.append({"role": "assistant", "content": openai_turn(alpha, "alpha")})
    zulu.append({"role": "assistant", "content": anthropic_turn(zulu)})
    alpha.append({"role": "user", "content": "And do you have anything without gluten?"})
    alpha.append({"role": "assistant", "content": openai_turn(alpha, "alpha")})
    zulu.append({"role": "user", "content": "Can I order a birthday cake for Saturday?"})
    zulu.append({"role": "assistant", "content": anthropic_turn(zulu)})
    openai_turn(alpha[:2], "beta", OTHER)
    alpha.append({"role": "user", "content": "Thank you. Where can I park?"})
    openai_turn(alpha, "alpha")


def replayed(record: Path, out: Path) -> list[dict[str, str]]:
    argv = ["replay", str(record), "--analyze", "--model", MODEL, "--rules", "local", "--out", str(out)]
    assert main([*argv, "--cache-tokens", str(CACHE_TOKENS), "--block-size", str(BLOCK)]) == 0
    with (out / "requests.csv").open() as f:
        return list(csv.DictReader(f))


def test_the_mixed_record_replays_as_the_server_served_it(recorded_server: Server, tmp_path: Path) -> None:
    mixed_traffic(recorded_server)
    entries = [json.loads(line) for line in recorded_server.record.read_text().splitlines()]
    assert [e["format"] for e in entries] == ["openai-chat", "anthropic"] * 2 + ["openai-chat"] * 2
    served = [e["kvtestbed"] for e in entries]
    assert served[1]["cached_tokens"] > 0  # zulu's first request read alpha's blocks: one cache, two APIs
    assert served[4]["cached_tokens"] == 0 and served[4]["model"] == OTHER  # the other namespace
    assert any(s["finish_reason"] == "length" for s in served[:4])  # replies cut at the limit, carried on
    rows = replayed(recorded_server.record, tmp_path / "out")
    assert [r["conversation"] for r in rows] == [e["session_id"] for e in entries]
    assert [int(r["prompt_tokens"]) for r in rows] == [s["prompt_tokens"] for s in served]
    assert [int(r["cached_tokens"]) for r in rows] == [s["cached_tokens"] for s in served]
    # the recorded columns hold what each line's usage said, in either API's form
    assert [int(r["recorded_cache_read_tokens"]) for r in rows] == [s["cached_tokens"] for s in served]
    assert [int(r["recorded_prompt_tokens"]) for r in rows] == [s["prompt_tokens"] for s in served]
    assert [int(r["recorded_cache_write_tokens"]) for r in rows] == [
        s["cache_written_tokens"] for s in served
    ]
    agreement = json.loads((tmp_path / "out" / "analysis.json").read_text())["agreement"]
    local = next(a for a in agreement if a["rule"] == "local")
    assert (
        local["recorded_share"] == pytest.approx(local["predicted_share"]) and local["median_share_gap"] == 0
    )
