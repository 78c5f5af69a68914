"""The reference run of `bench replay --endpoint` against this project's own server: start
`python -m engine.serve` on a free loopback port, replay the shipped example traces over both APIs (each from
an empty server cache), stop the server. One results folder per (example, API) under --out.

    python scripts/endpoint_run.py --model smollm2-135m [--device cpu] [--dtype float32] --out results/endpoint-smollm2-135m-cpu [--overwrite]
                                   [--max-tokens 32] [--examples openai-chat anthropic ...] [--apis openai anthropic]

The server and the prediction get the same model, block size (16) and cache size, so the reported and the
predicted cached tokens must agree on every request; the replay exits 0 either way and each report.md lists
any disagreement.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's engine, also for the commands run below (cwd=ROOT)

from engine.traces.shipped import EXAMPLES  # noqa: E402

READY_S = 300.0
CACHE_TOKENS = "16384"
TEXT_EXAMPLES = [name for name in EXAMPLES if name != "mooncake"]  # a hash-id trace has no text to send


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"error: the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/metrics", timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"error: the server was not ready after {READY_S:.0f} s:\n{log.read_text()}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--max-tokens", default="32")
    p.add_argument("--examples", nargs="+", choices=TEXT_EXAMPLES, default=TEXT_EXAMPLES)
    p.add_argument("--apis", nargs="+", choices=["openai", "anthropic"], default=["openai", "anthropic"])
    args = p.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    port, log = free_port(), args.out / "server.log"
    url = f"http://127.0.0.1:{port}"
    model = [
        "--model",
        args.model,
        "--device",
        args.device,
        "--dtype",
        args.dtype,
        "--cache-tokens",
        CACHE_TOKENS,
    ]
    serve = [sys.executable, "-m", "engine.serve", "--port", str(port), "--log-level", "warning", *model]
    with log.open("w") as out:
        server = subprocess.Popen(serve, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    status = 0
    try:
        wait_ready(url, server, log)
        for fmt in args.examples:
            for api in args.apis:
                folder = args.out / f"{fmt}-{api}"
                replay = [sys.executable, "-m", "engine.bench", "replay", f"example:{fmt}", "--endpoint", url]
                replay += [*model, "--api", api, "--reset-cache", "--max-tokens", args.max_tokens]
                replay += ["--out", str(folder)] + (["--overwrite"] if args.overwrite else [])
                status = subprocess.run(replay, cwd=ROOT).returncode or status
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    return status


if __name__ == "__main__":
    sys.exit(main())
