"""Log envelopes: a body's declared format (a file may mix APIs), the response's usage as recorded usage, and
what engine.serve's own report adds (its provider, its cache writes on either API, a reply cut at its token
limit, its per-model cache namespace, its own miss reason, the engine steps that admitted the request and published
its blocks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.load import load_trace

MESSAGES = [{"role": "user", "content": "Name a colour."}]
CHAT = {"model": "m", "messages": MESSAGES}
ANTHROPIC = {"model": "m", "system": "Be brief.", "messages": MESSAGES}


def write(path: Path, *entries: dict) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def test_declared_formats_mix_in_one_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mixed.jsonl",
        {"session_id": "a", "format": "openai-chat", "body": CHAT},
        {"session_id": "b", "format": "anthropic", "body": {"model": "m", "messages": MESSAGES}},
        {"session_id": "c", "format": "openai-responses", "body": {"model": "m", "input": "Name a colour."}},
    )
    got = load_trace(path)
    assert [r.messages for r in got] == [MESSAGES] * 3 and [r.session for r in got] == ["a", "b", "c"]
    assert all(r.recorded is None and not r.reply_cut and r.cache_salt == "" for r in got)
    undeclared = write(
        tmp_path / "undeclared.jsonl",
        {"body": {"messages": [{"role": "system", "content": "x"}, *MESSAGES]}},
        {"body": ANTHROPIC},
    )
    with pytest.raises(
        TraceError, match="request 2 looks like anthropic but request 1 looks like openai-chat"
    ):
        load_trace(undeclared)  # bodies that declare nothing must still agree
    other = write(tmp_path / "other.jsonl", {"format": "json", "body": ANTHROPIC})
    with pytest.raises(TraceError, match="format: expected one of openai-chat, openai-responses, anthropic"):
        load_trace(other)  # not a format: refused, not read as another


def test_usage_is_recorded_in_its_apis_form(tmp_path: Path) -> None:
    chat_usage = {"prompt_tokens": 40, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 32}}
    anthropic_usage = {"input_tokens": 8, "cache_read_input_tokens": 32, "cache_creation_input_tokens": 16}
    path = write(
        tmp_path / "log.jsonl",
        {"format": "openai-chat", "body": CHAT, "usage": chat_usage},
        {"format": "anthropic", "body": ANTHROPIC, "usage": anthropic_usage | {"output_tokens": 2}},
    )
    chat, anthropic = (r.recorded for r in load_trace(path))
    assert (chat.provider, chat.prompt_tokens, chat.cache_read_tokens, chat.output_tokens) == (
        "openai",
        40,
        32,
        3,
    )
    assert (anthropic.provider, anthropic.prompt_tokens, anthropic.cache_write_tokens) == (
        "anthropic",
        56,
        16,
    )
    bad = write(
        tmp_path / "bad.jsonl", {"format": "openai-chat", "body": CHAT, "usage": {"prompt_tokens": -5}}
    )
    with pytest.raises(TraceError, match=r"request 1: usage\.prompt_tokens: expected a token count"):
        load_trace(bad)


def test_the_servers_own_report(tmp_path: Path) -> None:
    report = {
        "model": "smollm2-b",
        "cache_written_tokens": 16,
        "finish_reason": "length",
        "cached_tokens": 16,
    }
    path = write(
        tmp_path / "record.jsonl",
        {
            "timestamp": 1796029200.0,
            "session_id": "s",
            "format": "openai-chat",
            "body": CHAT,
            "usage": {"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 16}},
            "kvtestbed": report,
        },
        {"format": "anthropic", "body": ANTHROPIC, "usage": {"input_tokens": 8}, "kvtestbed": {"model": "m"}},
    )
    served, second = load_trace(path)
    assert served.recorded.provider == "kvtestbed" and served.recorded.cache_write_tokens == 16
    assert served.reply_cut and served.cache_salt == "smollm2-b" and served.timestamp == 1796029200.0
    assert second.recorded.provider == "kvtestbed" and not second.reply_cut and second.cache_salt == "m"


def test_the_servers_own_record_is_replayed_in_the_order_sent(tmp_path: Path) -> None:
    """engine.serve writes a line when its request finishes: two concurrent requests of one session finished
    out of the order they were sent, and replay refused the server's own record (times going backwards)."""
    from engine.traces.sessions import interleave

    line = {"session_id": "s", "format": "openai-chat", "body": CHAT, "kvtestbed": {"model": "m"}}
    path = write(tmp_path / "record.jsonl", line | {"timestamp": 2.0}, line | {"timestamp": 1.0})
    assert [r.timestamp for r in interleave(load_trace(path))] == [1.0, 2.0]
    other = write(
        tmp_path / "proxy.jsonl",
        *(
            {k: v for k, v in e.items() if k != "kvtestbed"}
            for e in (line | {"timestamp": 2.0}, line | {"timestamp": 1.0})
        ),
    )
    with pytest.raises(TraceError, match="before request"):
        interleave(load_trace(other))  # any other log keeps its order, and a time going back is refused


def test_the_provider_named_or_inferred_from_the_usage_and_model(tmp_path: Path) -> None:
    openai_form = {"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 640}}
    deepseek = openai_form | {"prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 260}
    path = write(
        tmp_path / "providers.jsonl",
        {"format": "openai-chat", "body": CHAT, "usage": openai_form},
        {"format": "openai-chat", "body": CHAT, "usage": deepseek},
        {"format": "openai-chat", "body": CHAT | {"model": "deepseek/deepseek-chat"}, "usage": openai_form},
        {"format": "openai-chat", "body": CHAT, "usage": openai_form, "provider": "gcp.gemini"},
        {
            "format": "anthropic",
            "body": ANTHROPIC,
            "usage": {"input_tokens": 5, "cache_read_input_tokens": 9},
        },
    )
    got = [r.recorded.provider for r in load_trace(path)]
    assert got == ["openai", "deepseek", "deepseek", "gcp.gemini", "anthropic"]
    bad = write(tmp_path / "bad.jsonl", {"body": CHAT, "usage": openai_form, "provider": "acme"})
    with pytest.raises(TraceError, match=r"request 1: provider: expected one of openai, anthropic, deepseek"):
        load_trace(bad)


def test_the_servers_miss_reason_and_engine_steps(tmp_path: Path) -> None:
    """The recorded miss is the server's own reason (a retokenized reply is no miss a replay can see in the
    text), costing the previous tokens after the change; `steps` are read, malformed ones refused by field."""
    line = {"timestamp": 1.0, "format": "openai-chat", "body": CHAT, "usage": {"prompt_tokens": 40}}
    retokenized = {"miss_reason": "reply_retokenized", "divergence": {"lost_tokens": 7}, "cached_tokens": 16}
    steps = {"server": 5.0, "admitted": 3, "published": [[3, 32], [9, 48]]}
    path = write(
        tmp_path / "record.jsonl",
        line | {"kvtestbed": retokenized, "steps": steps},
        line | {"timestamp": 2.0, "kvtestbed": {"miss_reason": None}},
        line | {"timestamp": 3.0, "kvtestbed": {"model": "m"}},  # an older report without the field
    )
    first, second, third = load_trace(path)
    assert first.recorded.miss == ("reply_retokenized", 7)
    assert first.steps is not None and (first.steps.server, first.steps.admitted) == (5.0, 3)
    assert first.steps.published == ((3, 32), (9, 48))
    assert second.recorded.miss == (None, 0) and second.steps is None and third.recorded.miss is None
    for bad, where in [({"admitted": 0}, "steps.admitted"), ({"published": [[1]]}, r"steps.published\[0\]")]:
        write(path, line | {"kvtestbed": {}, "steps": steps | bad})
        with pytest.raises(TraceError, match=f"request 1: {where}"):
            load_trace(path)
