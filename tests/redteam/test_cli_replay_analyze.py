"""`bench replay --analyze`: an envelope's `format` that names no format (read as whatever the body looked
like, silently) is refused naming the request."""

from __future__ import annotations

import json

import pytest

from engine.bench.__main__ import main
from tests.redteam.cli import one_error_line

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Name a colour."}]}


@pytest.mark.parametrize("fmt", ["json", "openai", "Anthropic", "", 5, ["anthropic"]])
def test_an_unknown_format_is_refused_naming_the_request(tmp_path, capsys, fmt) -> None:
    trace = tmp_path / "t.jsonl"
    lines = [{"format": "openai-chat", "body": CHAT}, {"format": fmt, "body": CHAT}]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["replay", str(trace), "--analyze", "--model", "smollm2-135m", "--out", str(tmp_path / "run")]
    line = one_error_line(capsys, main, argv)
    assert "request 2: format: expected one of openai-chat, openai-responses, anthropic" in line
