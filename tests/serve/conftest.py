"""Real server processes for the serve tests: `python -m engine.serve` on free loopback ports, started
together once per session (SmolLM2, recording a trace and publishing KV events; a tiny random Qwen2 with
the offline Qwen tokenizer, whose chat template has a tool section, behind an API key, running one request
at a time with a one-request queue and a 1 MiB body limit), each waited for with a bounded loop and always
terminated."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
READY_S = 240.0  # SmolLM2 loads in ~12 s on a quiet machine; a loaded shared one is much slower
KEY = "test-key-21"
SMOLLM2_CACHE_TOKENS = 16384


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # names lower-cased
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def http(
    method: str, url: str, body: bytes | dict | None = None, headers: dict[str, str] | None = None
) -> Reply:
    """One plain HTTP request (for what the SDKs will not send: malformed JSON, oversized bodies)."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"} | (headers or {})
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return Reply(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode())
    except urllib.error.HTTPError as e:
        return Reply(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode())


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path
    record: Path | None = None
    key: str = "unused"
    kv_events: tuple[str, str] | None = None  # --kv-events and --kv-events-replay URLs

    def metrics(self) -> str:
        return http("GET", f"{self.url}/metrics").text

    def metric(self, line_start: str) -> float:
        """The value of the first metrics line that starts with `line_start` (0 when there is none yet: a
        labelled counter appears when first counted)."""
        for line in self.metrics().splitlines():
            if line.startswith(line_start):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


def start(args: list[str], log: Path, record: Path | None = None) -> Server:
    port = free_port()
    cmd = [sys.executable, "-m", "engine.serve", "--port", str(port), "--log-level", "warning", *args]
    env = {k: v for k, v in os.environ.items() if k != "KVTESTBED_API_KEY"} | {"HF_HUB_OFFLINE": "1"}
    with log.open("w") as out:
        process = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    return Server(f"http://127.0.0.1:{port}", process, log, record)


def wait_ready(server: Server) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.log.read_text()}")
        try:
            if http("GET", f"{server.url}/metrics").status == 200:
                return
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"server not ready after {READY_S:.0f} s:\n{server.log.read_text()}")


def stop(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=10)


@pytest.fixture(scope="session")
def servers(
    tmp_path_factory: pytest.TempPathFactory, tiny_dir: Callable[..., Path]
) -> Iterator[dict[str, Server]]:
    """Both servers, started at once (their model loads overlap)."""
    folder = tmp_path_factory.mktemp("serve")
    qwen = tiny_dir("qwen2", tokenizer=True)
    record = folder / "smollm2.jsonl"
    smollm2_args = ["--model", "smollm2-135m", "--device", "cpu", "--dtype", "float32"]
    smollm2_args += ["--cache-tokens", str(SMOLLM2_CACHE_TOKENS), "--record", str(record)]
    kv_events = (f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}")
    smollm2_args += ["--kv-events", kv_events[0], "--kv-events-replay", kv_events[1]]
    started = {
        "smollm2": start(smollm2_args, folder / "smollm2.log", record),
        "qwen": start(
            ["--model", str(qwen), "--device", "cpu", "--cache-tokens", "32768", "--api-key", KEY]
            + ["--served-model-name", "tiny-qwen", "--served-model-name", "tiny-qwen-b"]
            + ["--max-num-seqs", "1", "--max-queue", "1", "--max-body-mb", "1"],
            folder / "qwen.log",
        ),
    }
    started["qwen"].key = KEY
    started["smollm2"].kv_events = kv_events
    try:
        for server in started.values():
            wait_ready(server)
        yield started
    finally:
        for server in started.values():
            stop(server)


@pytest.fixture(scope="session")
def smollm2_server(servers: dict[str, Server]) -> Server:
    return servers["smollm2"]


@pytest.fixture(scope="session")
def qwen_server(servers: dict[str, Server]) -> Server:
    return servers["qwen"]
