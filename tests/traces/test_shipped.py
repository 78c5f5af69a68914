"""The shipped example traces: present, loadable by name, and the same conversation in every format."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.chat import render_text
from engine.traces.load import load_trace
from engine.traces.shipped import EXAMPLES, trace_path


def test_examples_are_named_by_format() -> None:
    assert trace_path("example:anthropic") == EXAMPLES["anthropic"] and EXAMPLES["anthropic"].exists()
    with pytest.raises(TraceError, match="choose from example:openai-chat"):
        trace_path("example:xml")


def test_every_format_renders_to_the_same_tokens() -> None:
    tok = load_tokenizer(qwen_tokenizer_dir())
    rendered = {}
    for fmt, path in EXAMPLES.items():
        if fmt == "mooncake":  # hash ids, no text (tests/traces/test_mooncake.py)
            continue
        requests = load_trace(path)
        assert all(r.session == "fix-date-parser" for r in requests)
        rendered[fmt] = [
            tok(render_text(tok, r.messages, r.tools), add_special_tokens=False).input_ids for r in requests
        ]
    assert rendered["openai-responses"] == rendered["openai-chat"] == rendered["anthropic"]
    assert len(rendered["anthropic"]) == 6 and min(map(len, rendered["anthropic"])) > 1024


def test_the_anthropic_example_marks_system_and_last_message() -> None:
    last = load_trace(EXAMPLES["anthropic"])[-1]
    system = next(i for i, b in enumerate(last.blocks) if b.section == "system")
    assert [b.block for b in last.breakpoints] == [system, len(last.blocks) - 1]


def test_examples_ship_as_package_data() -> None:
    """pyproject's package-data patterns for engine.traces cover every example (installed, it has them)."""
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    patterns = json.loads(re.search(r'^"engine\.traces" = (\[.*\])$', text, re.M).group(1))
    for path in EXAMPLES.values():
        assert any(fnmatch.fnmatch(f"examples/{path.name}", p) for p in patterns), path.name
