"""`bench replay --analyze`: an envelope's `format` that names no format (read as whatever the body looked
like, silently) is refused naming the request; a long Claude Code transcript is read and analyzed at a cost
linear in its lines."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from transformers import PreTrainedTokenizerBase

from engine.bench.__main__ import main
from engine.traces.claude_code import read_claude_code
from tests.redteam.cli import one_error_line
from tests.traces.long_claude_code import long_claude_code_project

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Name a colour."}]}


@pytest.mark.parametrize("fmt", ["json", "openai", "Anthropic", "", 5, ["anthropic"]])
def test_an_unknown_format_is_refused_naming_the_request(tmp_path, capsys, fmt) -> None:
    trace = tmp_path / "t.jsonl"
    lines = [{"format": "openai-chat", "body": CHAT}, {"format": fmt, "body": CHAT}]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["replay", str(trace), "--analyze", "--model", "smollm2-135m", "--out", str(tmp_path / "run")]
    line = one_error_line(capsys, main, argv)
    assert "request 2: format: expected one of openai-chat, openai-responses, anthropic" in line


def test_a_long_claude_code_transcript_costs_each_record_once(tmp_path, monkeypatch) -> None:
    """A transcript of 500 and of 2,000 lines (one of 20,000 ran past 900 s at 2.9 GB: every request's
    messages built afresh, and rendered whole about 7 times): the reader's allocations grow linearly with the
    lines, and the analysis renders at most 4 texts a request on average."""
    peaks, got = {}, {}
    for n in (500, 2000):
        long_claude_code_project(tmp_path / f"p{n}", n, context_chars=20_000)
        tracemalloc.start()
        got[n] = read_claude_code(sorted((tmp_path / f"p{n}").rglob("*.jsonl"))).requests
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[2000] <= 4 * 1.5 * peaks[500]
    renders = []
    render = PreTrainedTokenizerBase.apply_chat_template
    monkeypatch.setattr(
        PreTrainedTokenizerBase,
        "apply_chat_template",
        lambda self, *a, **k: renders.append(1) or render(self, *a, **k),
    )
    argv = [
        "replay",
        str(tmp_path / "p500"),
        "--analyze",
        "--model",
        "synthetic:qwen2.5-0.5b",
        "--out",
        str(tmp_path / "r"),
    ]
    assert main(argv) == 0
    assert len(renders) <= 4 * len(got[500])
