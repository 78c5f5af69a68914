"""Streamed TTFT through `python -m engine.serve` on loopback against the direct engine call, for the same
prompt (`serve_ttft`; ours only). Target: server ≤ 1.05 × direct + 5 ms (CPU, 512 and 2,048 tokens).

Both arms time the same thing from the caller's side: chat messages in, to the first token out. Direct:
`Engine.generate(messages, max_new_tokens=1, on_token=...)`, from the call to the first `on_token` (template,
tokenizer, lookup, prefill, first sample). Server: an HTTP/1.1 POST to /v1/chat/completions with
`stream: true` (on a loopback connection opened just before, untimed), from just before the request is written
to the first SSE chunk that carries the token (content, or the finish reason where the token's text is held
back), whenever the server sends its role chunk; the rest of the stream is read untimed. The server is another
process over the same model, dtype and cache size. Each round gives both arms the same new prompt (a fresh
nonce first, so both prefill it cold but for the template's shared opening block, the same in both), in
alternating order, after one untimed warm-up round. The record keeps each arm's median [min-max], the
per-round ratio and overhead, and a one-sided sign test of the target on the paired rounds; the case fails
only when the rounds show the target significantly missed (p < 0.05).
"""

from __future__ import annotations

import http.client
import itertools
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import engine
from benchmarks.conftest import shapes_of
from engine.bench.reporting.stats import spread
from engine.runtime.engine import Engine

ROOT = Path(__file__).resolve().parent.parent
FACTOR, SLACK_S = 1.05, 0.005  # the target: server <= FACTOR * direct + SLACK_S
MIN_ROUNDS, MAX_ROUNDS = 7, 40
WORDS = "alpha beta gamma delta river stone cloud paper green music table light".split()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "served" in metafunc.fixturenames:
        metafunc.parametrize("served", list(shapes_of(metafunc.config).prefill))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def carries_the_token(line: bytes) -> bool:
    """An SSE line of a Chat Completions stream with the first token: a chunk whose delta has content or whose
    choice has finished (not the role chunk, a keep-alive comment or a blank line). A stream that ends without
    one is an error, not a time."""
    if not line:
        raise RuntimeError("the stream ended before its first token")
    if not line.startswith(b"data: {"):
        return False
    choices = json.loads(line[6:]).get("choices") or [{}]
    return bool(choices[0].get("delta", {}).get("content") or choices[0].get("finish_reason"))


def sign_test(differences: list[float]) -> tuple[float, float]:
    """One-sided exact sign-test p-values (ties dropped): (P[this many or more below 0 by chance], P[this
    many or more above 0 by chance])."""
    below, above = sum(d < 0 for d in differences), sum(d > 0 for d in differences)
    n = below + above

    def tail(k: int) -> float:
        return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n if n else 1.0

    return tail(below), tail(above)


class Served:
    """A server process over the same model."""

    def __init__(self, model: str, device: str, dtype: str, cache_tokens: int, port: int) -> None:
        args = ["--model", model, "--device", device, "--dtype", dtype, "--cache-tokens", str(cache_tokens)]
        cmd = [sys.executable, "-m", "engine.serve", *args, "--port", str(port), "--log-level", "warning"]
        env = {k: v for k, v in os.environ.items() if k != "KVTESTBED_API_KEY"}  # no key: served without one
        self.log = tempfile.TemporaryFile()  # the server's stderr, shown if it does not start
        self.process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        self.model, self.port = model, port
        deadline = time.monotonic() + 300
        while True:
            if self.process.poll() is not None or time.monotonic() >= deadline:
                self.log.seek(0)
                said = self.log.read().decode(errors="replace")[-2000:]
                raise AssertionError(f"the server did not start: {said}")
            try:
                ready = self.connect()
                ready.request("GET", "/metrics")
                ready.getresponse().read()
                ready.close()
                return
            except OSError:
                time.sleep(0.25)

    def connect(self) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        connection.connect()
        return connection

    def first_token(self, messages: list[dict[str, Any]]) -> tuple[float, dict[str, Any]]:
        """Seconds to the first SSE chunk carrying the token, and the `kvtestbed` object of the stream's end."""
        body = json.dumps(
            {"model": self.model, "messages": messages, "max_tokens": 1, "stream": True, "temperature": 0}
        )
        connection = self.connect()  # untimed: a new loopback connection for each request
        start = time.perf_counter()
        connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        line = reply.readline()
        while not carries_the_token(line):
            line = reply.readline()
        took = time.perf_counter() - start
        rest = (line + reply.read()).split(b"\n")  # from the token's chunk: the report is on the last
        chunks = [json.loads(line[6:]) for line in rest if line.startswith(b"data: {")]
        connection.close()
        return took, next(c["kvtestbed"] for c in chunks if "kvtestbed" in c)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


@pytest.fixture(scope="module")
def arms(pytestconfig: pytest.Config) -> Iterator[Callable[[str], tuple[Engine, Served]]]:
    """arms(device) -> the direct engine and a server over the same model, made once per device."""
    made: dict[str, tuple[Engine, Served]] = {}

    def get(device: str) -> tuple[Engine, Served]:
        if device not in made:
            model, cache_tokens = pytestconfig.getoption("model"), 65536
            direct = engine.load(model, device, pytestconfig.getoption("dtype"), cache_tokens=cache_tokens)
            served = Served(model, device, direct.info["dtype"], cache_tokens, free_port())
            made[device] = (direct, served)
        return made[device]

    yield get
    for _, served in made.values():
        served.stop()


def prompt(e: Engine, tokens: int, nonce: int) -> list[dict[str, Any]]:
    """A user message whose rendered prompt has about `tokens` tokens, starting with `nonce`."""

    def messages(n: int) -> list[dict[str, Any]]:
        words = " ".join(itertools.islice(itertools.cycle(WORDS), n))
        return [{"role": "user", "content": f"Round {nonce}. {words}"}]

    lo, hi = 0, tokens
    while lo < hi:  # the most words that stay within `tokens`
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if len(e.render(messages(mid))) <= tokens else (lo, mid - 1)
    return messages(lo)


def direct_first_token(e: Engine, messages: list[dict[str, Any]]) -> tuple[float, Any]:
    first: list[float] = []
    start = time.perf_counter()
    gen = e.generate(
        messages, max_new_tokens=1, on_token=lambda _text: first or first.append(time.perf_counter())
    )
    return (first[0] if first else time.perf_counter()) - start, gen.usage


def test_serve_ttft(benchmark, arms, shapes, device: str, served: int) -> None:
    direct, server = arms(device)
    nonces, orders = itertools.count(), itertools.cycle([("direct", "server"), ("server", "direct")])
    times: list[dict[str, float]] = []

    def round_() -> None:
        messages, took = prompt(direct, served, next(nonces)), {}
        for arm in next(orders):
            if arm == "direct":
                took[arm], usage = direct_first_token(direct, messages)
            else:
                took[arm], report = server.first_token(messages)
        assert (report["prompt_tokens"], report["cached_tokens"]) == (
            usage.prompt_tokens,
            usage.cached_tokens,
        )
        times.append(took)

    start = time.perf_counter()
    round_()  # warm-up, untimed in the record below
    rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, int(shapes.budget_s / (time.perf_counter() - start))))
    benchmark.group = f"serve ttft {served} {device}"
    benchmark.extra_info.update(
        case="serve_ttft",
        impl="server/direct",
        tokens=served,
        device=device,
        dtype=direct.info["dtype"],
        model=direct.source.model_id,
    )
    benchmark.pedantic(round_, rounds=rounds, iterations=1)
    timed = times[1:]
    d, s = [t["direct"] for t in timed], [t["server"] for t in timed]
    meets_p, misses_p = sign_test([b - (FACTOR * a + SLACK_S) for a, b in zip(d, s, strict=True)])
    verdict = "meets" if meets_p < 0.05 else "misses" if misses_p < 0.05 else "within noise"
    ratios, overhead = [b / a for a, b in zip(d, s, strict=True)], [b - a for a, b in zip(d, s, strict=True)]
    benchmark.extra_info.update(
        direct_s=spread(d),
        server_s=spread(s),
        ratio=spread(ratios),
        overhead_s=spread(overhead),
        target=f"server <= {FACTOR} x direct + {SLACK_S * 1e3:.0f} ms",
        verdict=verdict,
        p_meets=meets_p,
        p_misses=misses_p,
        load_1min=os.getloadavg()[0],
    )
    print(
        f"\nserve TTFT {served} tokens ({device}): direct {statistics.median(d) * 1e3:.1f} "
        f"[{min(d) * 1e3:.1f}-{max(d) * 1e3:.1f}] ms, server {statistics.median(s) * 1e3:.1f} "
        f"[{min(s) * 1e3:.1f}-{max(s) * 1e3:.1f}] ms, ratio {statistics.median(ratios):.3f} "
        f"[{min(ratios):.3f}-{max(ratios):.3f}], overhead {statistics.median(overhead) * 1e3:.1f} ms, n={len(d)}: "
        f"{verdict} (sign test p={meets_p:.3g} meets, p={misses_p:.3g} misses)"
    )
    assert verdict != "misses", f"streamed TTFT through the server misses {benchmark.extra_info['target']}"
