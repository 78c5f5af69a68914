"""scripts/beside_long_prefill.py end to end at a small size: a tiny Qwen2 served with 128-token steps, a
6,000-word prompt and a 40-word one beside it, each request's counts and timings in the results file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from beside_long_prefill import main, prompt  # noqa: E402


def test_a_prompt_has_as_many_words_as_tokens_asked_for() -> None:
    assert len(prompt(400, 1).split()) == 400 and prompt(400, 1) != prompt(400, 2)


def test_the_short_request_alone_and_beside_the_long_one(tiny_dir, tmp_path: Path) -> None:
    out = tmp_path / "beside.json"
    model = str(tiny_dir("qwen2", tokenizer=True))
    flags = ["--long-tokens", "6000", "--short-tokens", "40", "--after-s", "0", "--reply-tokens", "16"]
    assert (
        main(["--model", model, *flags, "--server-flag=--max-num-batched-tokens=128", "--out", str(out)]) == 0
    )
    got = json.loads(out.read_text())
    for name in ("alone", "beside", "long"):
        assert got[name]["completion_tokens"] == 16 and got[name]["client_ttft_s"] > 0
    shorts = (got["alone"]["prompt_tokens"], got["beside"]["prompt_tokens"])
    assert max(shorts) < 128 < got["long"]["prompt_tokens"]
    assert got["beside"]["cached_tokens"] < 32  # nothing but the template's first block in common
    assert set(got["ratios_beside_over_alone"]) == {
        "client_ttft_s",
        "reply_whole_s",
        "s_per_output_token",
        "longest_gap_s",
    }
