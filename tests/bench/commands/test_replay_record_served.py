"""`bench replay --analyze` of the server's own record equals what the server reported, request by request,
where the record holds more than one line's body can say: a Responses chain through `previous_response_id`
(each line records only its new input and a reference, so the record grows linearly with the chain, and the
replay rebuilds each prompt from the earlier lines), and requests the engine admitted in one step (they read
none of each other's blocks, which the replay knows from the record's `steps`). A real SmolLM2 server on
loopback, the official openai SDK, concurrent clients in threads."""

from __future__ import annotations

import csv
import json
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from engine.bench.__main__ import main
from tests.serve.clients import BLOCK, GREEDY, MODEL, openai_client
from tests.serve.conftest import Server, start, stop, wait_ready

CACHE_TOKENS = 16384
TURNS = 10
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x" * 50_000}
SYSTEM = (
    "You are the front desk of a mountain hut. The hut sleeps forty, serves dinner at seven and breakfast at "
    "six, has no showers, sells maps and tea, and asks every guest to bring a sleeping bag liner. Answer in "
    "one short sentence, politely and plainly, and never invent a rule the hut does not have. "
)
BATCH = 6
DESK = "Guest desk. " + SYSTEM  # its own first block: nothing the chain cached


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("served")
    args = ["--model", MODEL, "--device", "cpu", "--dtype", "float32", "--cache-tokens", str(CACHE_TOKENS)]
    started = start(
        [*args, "--record", str(folder / "rec.jsonl")], folder / "server.log", folder / "rec.jsonl"
    )
    try:
        wait_ready(started)
        yield started
    finally:
        stop(started)


def lines(server: Server) -> list[dict[str, Any]]:
    assert server.record is not None
    return [json.loads(line) for line in server.record.read_text().splitlines()]


def replayed(record: Path, out: Path) -> dict[tuple[str, int], tuple[int, str]]:
    """(session, turn) -> the cached tokens `replay --analyze` predicts, and the recorded miss it shows."""
    argv = ["replay", str(record), "--analyze", "--model", MODEL, "--rules", "local", "--out", str(out)]
    assert main([*argv, "--cache-tokens", str(CACHE_TOKENS), "--block-size", str(BLOCK)]) == 0
    with (out / "requests.csv").open() as f:
        rows = csv.DictReader(f)
        return {
            (r["conversation"], int(r["turn"])): (int(r["cached_tokens"]), r["recorded_miss"]) for r in rows
        }


def reported(entries: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[int, str]]:
    """(session, turn) -> the cached tokens the server reported, and its miss reason; a session's turns in
    the order admitted."""
    turns: Counter[str] = Counter()
    out = {}
    for e in sorted(entries, key=lambda e: (e["steps"]["admitted"], e["timestamp"])):
        turns[e["session_id"]] += 1
        report = e["kvtestbed"]
        out[e["session_id"], turns[e["session_id"]]] = (report["cached_tokens"], report["miss_reason"] or "")
    return out


def test_a_responses_chain_is_recorded_linearly_and_replays_as_served(server: Server, tmp_path: Path) -> None:
    client, previous = openai_client(server), None
    for turn in range(TURNS):
        new = [
            REASONING,
            {"type": "message", "role": "user", "content": f"Question {turn}: what time is dinner?"},
        ]
        continued = {"previous_response_id": previous} if previous else {}
        answer = client.responses.create(
            model=MODEL,
            instructions=SYSTEM,
            input=new,
            user="chain",
            max_output_tokens=8,
            **continued,
            **GREEDY,
        )
        previous = answer.id
    chain = [e for e in lines(server) if e["session_id"] == "chain"]
    assert len(chain) == TURNS and chain[-1]["kvtestbed"]["prompt_tokens"] > 20 * TURNS
    for e in chain[1:]:  # only the new input, the reasoning item as its digest, and the reference
        assert len(e["body"]["input"]) == 2 and e["body"]["previous_response_id"] == e["continues"]["id"]
        assert "encrypted_content" not in json.dumps(e) and e["output"]
    sizes = [len(json.dumps(e)) for e in chain[1:]]
    assert (
        max(sizes) < 6_000 and max(sizes) - min(sizes) < 1_000
    )  # a turn's line does not grow with the chain
    assert reported(chain)[("chain", TURNS)][0] > 0
    replay = replayed(server.record, tmp_path / "chain")
    assert {k: v for k, v in replay.items() if k[0] == "chain"} == reported(chain)


def test_requests_admitted_in_one_step_replay_as_served(server: Server, tmp_path: Path) -> None:
    """A long prompt holds the engine for a step; six requests sharing a system prompt arrive meanwhile and
    are admitted together in the next: none reads another's blocks. A seventh, after them, reads them."""
    client = openai_client(server)
    blocker = " ".join(f"entry {i}" for i in range(600))
    started = threading.Event()

    def hold() -> None:
        with client.responses.stream(
            model=MODEL, input=blocker, user="blocker", max_output_tokens=1
        ) as stream:
            for event in stream:
                if event.type == "response.created":  # at admission, before the step's forward
                    started.set()

    def ask(n: int) -> None:
        messages = [{"role": "system", "content": DESK}, {"role": "user", "content": f"Guest {n}: any tea?"}]
        client.chat.completions.create(
            model=MODEL, messages=messages, user=f"guest{n}", max_tokens=4, **GREEDY
        )

    with ThreadPoolExecutor(BATCH + 1) as pool:
        held = pool.submit(hold)
        assert started.wait(120)
        asked = [pool.submit(ask, n) for n in range(BATCH)]
        held.result(timeout=300)
        for a in asked:
            a.result(timeout=300)
    ask(BATCH)
    guests = [e for e in lines(server) if e["session_id"].startswith("guest")]
    steps = Counter(e["steps"]["admitted"] for e in guests[:BATCH])
    assert max(steps.values()) > 1  # requests admitted in one step
    first = min(steps)
    together = [e for e in guests if e["steps"]["admitted"] == first]
    assert all(e["kvtestbed"]["cached_tokens"] == 0 for e in together)  # none read another's blocks
    assert guests[-1]["kvtestbed"]["cached_tokens"] > 0  # it reads the system prompt they wrote
    replay = replayed(server.record, tmp_path / "batch")
    assert {k: v for k, v in replay.items() if k[0].startswith("guest")} == reported(guests)
