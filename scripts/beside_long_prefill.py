"""A short request beside a long prefill, on a real server: its time to first token and its pace alone and
beside the long one, in the same server, so that their ratio holds on a loaded machine.

    python scripts/beside_long_prefill.py [--model synthetic:qwen2.5-0.5b] [--long-tokens 12000]
                                          [--short-tokens 400] [--after-s 30] [--reply-tokens 32]
                                          [--server-flag=--FLAG=VALUE ...] [--out FILE.json]

One `python -m engine.serve` of this checkout, three streamed Chat Completions requests whose prompts are
words drawn at random (nothing cached between them but the chat template's first tokens): the short request
alone; then the long one, and another short one of the same length --after-s seconds after it was sent. Each
reply is up to --reply-tokens tokens (synthetic weights never end one sooner). Per request: the time to the
first text as the client saw it, the server's own timing (its `kvtestbed` object), the longest wait between
two pieces of text; then the short request's ratios beside / alone, whether its reply was whole before the
long one's first text, and the machine's load averages at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from agents_check import KEY, Server

WORDS = (
    "apple river stone cloud garden window paper silver mountain candle forest yellow engine bridge market "
    "winter orange pencil harbor ladder basket rocket violin desert meadow castle button copper island lemon "
    "pillow saddle tunnel wallet anchor blanket cotton dragon feather hammer jacket kettle magnet needle parrot"
).split()


def prompt(tokens: int, seed: int) -> str:
    """About `tokens` tokens of words drawn at random (one token each in byte-level BPEs, a space before)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(tokens))


def streamed(url: str, text: str, max_tokens: int) -> dict[str, Any]:
    """Send one streamed chat request; when it was sent, when each piece of text came, the server's report."""
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}
    body |= {"stream": True, "temperature": 0}
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    request = urllib.request.Request(f"{url}/v1/chat/completions", json.dumps(body).encode(), headers)
    sent, pieces, report = time.time(), [], None
    with urllib.request.urlopen(request, timeout=3600) as answer:
        for raw in answer:
            line = raw.decode().strip()
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                pieces.append(time.time())
            report = chunk.get("kvtestbed", report)
    return {"sent": sent, "pieces": pieces, "report": report}


def summary(got: dict[str, Any]) -> dict[str, Any]:
    pieces, report = got["pieces"], got["report"] or {}
    gaps = [b - a for a, b in zip(pieces, pieces[1:], strict=False)]
    timing = report.get("timing", {})
    return {
        "prompt_tokens": report.get("prompt_tokens"),
        "cached_tokens": report.get("cached_tokens"),
        "completion_tokens": report.get("completion_tokens"),
        "client_ttft_s": pieces[0] - got["sent"] if pieces else None,
        "reply_whole_s": pieces[-1] - got["sent"] if pieces else None,
        "longest_gap_s": max(gaps, default=0.0),
        "server_timing": timing,
        "s_per_output_token": timing["decode_s"] / (report["completion_tokens"] - 1)
        if report.get("completion_tokens", 0) > 1
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="synthetic:qwen2.5-0.5b")
    p.add_argument("--long-tokens", type=int, default=12000)
    p.add_argument("--short-tokens", type=int, default=400)
    p.add_argument("--after-s", type=float, default=30.0, help="the short request's delay after the long one")
    p.add_argument("--reply-tokens", type=int, default=32)
    p.add_argument("--server-flag", action="append", default=[], help="one more server flag, --FLAG=VALUE")
    p.add_argument("--out", type=Path, default=None, help="the results as JSON (default: printed only)")
    args = p.parse_args(argv)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        server = Server(args.model, ["m"], Path(folder), args.server_flag, args.reply_tokens)
        try:
            why = server.wait_ready()
            if why is not None:
                print(why, file=sys.stderr)
                return 1
            alone = streamed(server.url, prompt(args.short_tokens, 1), args.reply_tokens)
            beside: dict[str, Any] = {}
            long_text = prompt(args.long_tokens, 3)
            thread = threading.Thread(
                target=lambda: beside.update(long=streamed(server.url, long_text, args.reply_tokens))
            )
            thread.start()
            time.sleep(args.after_s)
            beside["short"] = streamed(server.url, prompt(args.short_tokens, 2), args.reply_tokens)
            thread.join()
        finally:
            server.stop()
    result: dict[str, Any] = {"argv": sys.argv[1:], "load_start": load_start, "load_end": os.getloadavg()}
    result |= {"alone": summary(alone), "beside": summary(beside["short"]), "long": summary(beside["long"])}
    short, solo, long = result["beside"], result["alone"], beside["long"]
    result["short_whole_before_long_first_text"] = bool(
        beside["short"]["pieces"] and long["pieces"] and beside["short"]["pieces"][-1] < long["pieces"][0]
    )
    result["ratios_beside_over_alone"] = {
        key: short[key] / solo[key] if short[key] and solo[key] else None
        for key in ("client_ttft_s", "reply_whole_s", "s_per_output_token", "longest_gap_s")
    }
    text = json.dumps(result, indent=1)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
