"""A long Claude Code transcript is read and analyzed in time and memory linear in its lines: requests share
the message objects of the requests they continue (each message parsed once), no text is rendered twice
(a constant number of renderings per request), and the results are those of a rebuild from scratch.
Scaling is asserted by counts and allocations at N and 4N lines, never by wall time."""

from __future__ import annotations

import copy
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

import engine.traces.anthropic_messages as anthropic_messages
import engine.traces.rendering as rendering
from engine.kv.block_manager import BlockManager
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.traces.analysis import AnalyzedRequest, Analyzer, replies
from engine.traces.claude_code import read_claude_code
from engine.traces.claude_code_chains import ChainMessages
from engine.traces.claude_code_tree import Transcripts
from engine.traces.inputs import load_inputs
from engine.traces.providers.local import LocalRule
from engine.traces.providers.registry import HOSTED
from engine.traces.request import TraceRequest
from engine.traces.sessions import interleave
from tests.traces.long_claude_code import long_claude_code_project

N = 250  # lines; the cases compare N with 4N
CONTEXT = 12_000  # characters of chain text before a compaction (kept small: the cases stay fast)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(qwen_tokenizer_dir())


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("long")
    return {n: long_claude_code_project(root / f"p{n}", n, context_chars=CONTEXT) for n in (N, 4 * N)}


def files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.jsonl"))


def lines(folder: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in files(folder))


def requests_of(folder: Path) -> list[TraceRequest]:
    return interleave(load_inputs([folder]).requests)


def analyze(tokenizer, requests: list[TraceRequest]) -> list[AnalyzedRequest]:
    local = LocalRule(BlockManager(8192, 16, b"long"), context=32_768)
    renderer = rendering.TraceRenderer(tokenizer, [151645])
    return Analyzer(renderer, local, [rule() for rule in HOSTED.values()]).run(requests)


def renderings_owed(requests: list[TraceRequest]) -> int:
    """Renderings an analysis needs when no text is rendered twice: per request its prompt, its reply's
    (where a later request carries one), and one per message after the reply of the request it continues;
    a request that starts a conversation (a new session, or after a compaction) renders every message's
    end and its head (3 renderings, 2 more with tools: `regions.prompt_head`)."""
    by_id = {r.request_id: r for r in requests}
    owed = 0
    for req, reply in zip(requests, replies(requests), strict=True):
        parent = by_id.get(req.parent_id)
        owed += 1 + (reply is not None)
        if parent is not None and parent.messages[0] is req.messages[0]:
            owed += len(req.messages) - len(parent.messages) - 1
        else:
            owed += len(req.messages) + 3 + 2 * bool(req.tools)
    return owed


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch, tokenizer) -> Iterator[dict[str, int]]:
    """Chat-template renderings, messages parsed and characters tokenized, counted while a case runs."""
    counts = {"renders": 0, "parsed": 0, "tokenized": 0}
    render, parse, call = (
        tokenizer.apply_chat_template,
        anthropic_messages.parse_message,
        type(tokenizer).__call__,
    )

    def counted_render(*args, **kwargs):
        counts["renders"] += 1
        return render(*args, **kwargs)

    def counted_parse(*args, **kwargs):
        counts["parsed"] += 1
        return parse(*args, **kwargs)

    def counted_call(self, text=None, *args, **kwargs):
        counts["tokenized"] += len(text) if isinstance(text, str) else 0
        return call(self, text, *args, **kwargs)

    monkeypatch.setattr(tokenizer, "apply_chat_template", counted_render)
    monkeypatch.setattr(anthropic_messages, "parse_message", counted_parse)
    monkeypatch.setattr(type(tokenizer), "__call__", counted_call)
    yield counts


def test_the_generator_writes_what_it_is_asked_for(projects: dict[int, Path]) -> None:
    folder = projects[4 * N]
    assert 4 * N <= lines(folder) < 4 * N + 200
    text = "".join(p.read_text() for p in files(folder))
    for record in ('"compact_boundary"', '"isSidechain": true', '"tool_result"', '"thinking"', '"progress"'):
        assert record in text
    got = requests_of(folder)
    assert any(len([m for m in r.messages if m["role"] == "tool"]) >= 3 for r in got)  # parallel calls
    assert len({r.session for r in got}) > 1 and all(r.unanswered == () for r in got)


def test_requests_share_the_messages_of_the_request_they_continue(projects: dict[int, Path]) -> None:
    got = requests_of(projects[4 * N])
    by_id = {r.request_id: r for r in got}
    continued = [(by_id[r.parent_id], r) for r in got if r.parent_id in by_id]
    assert len(continued) > len(got) // 2
    for parent, req in continued:
        if req.messages[0] is parent.messages[0]:  # not across a compaction
            assert all(a is b for a, b in zip(parent.messages, req.messages, strict=False))
            assert all(a is b for a, b in zip(parent.blocks, req.blocks, strict=False))


def test_each_request_equals_its_chain_rebuilt_from_the_root(projects: dict[int, Path]) -> None:
    paths = files(projects[N])
    shared = read_claude_code(paths).requests
    book = Transcripts(paths)
    by_id = {r.request_id: r for r in shared}
    first = {rec.response: rec for rec in reversed(book.order) if rec.response is not None}
    for request_id, req in by_id.items():
        alone = ChainMessages(book).messages(book.history(first[request_id]).messages)  # nothing to build on
        body = {"model": "m", "messages": copy.deepcopy(alone.messages)}
        fresh = anthropic_messages.parse_anthropic(body)
        assert fresh.messages == req.messages and fresh.blocks == req.blocks


def test_reading_parses_each_message_once(projects: dict[int, Path], counted: dict[str, int]) -> None:
    for n in (N, 4 * N):
        counted["parsed"] = 0
        got = read_claude_code(files(projects[n])).requests
        # a response's message, a prompt, or a results turn (a parallel call's results one turn per request)
        assert counted["parsed"] <= lines(projects[n]) + len(got)


def test_analysis_renders_no_text_twice_and_scales_linearly(
    projects: dict[int, Path], tokenizer, counted: dict[str, int]
) -> None:
    per_request, tokenized = {}, {}
    for n in (N, 4 * N):
        requests = requests_of(projects[n])
        counted["renders"] = counted["tokenized"] = 0
        analyze(tokenizer, requests)
        per_request[n] = counted["renders"] / len(requests)
        tokenized[n] = counted["tokenized"]
        assert counted["renders"] <= renderings_owed(requests)
    assert per_request[4 * N] <= 1.2 * per_request[N]
    assert tokenized[4 * N] <= 4 * 1.5 * tokenized[N]


def test_kept_renderings_change_no_result(projects: dict[int, Path], tokenizer, monkeypatch) -> None:
    requests = requests_of(projects[N])
    kept = [r.row() for r in analyze(tokenizer, requests)]
    monkeypatch.setattr(rendering, "RECENT", 0)  # every text rendered afresh
    assert [r.row() for r in analyze(tokenizer, requests)] == kept


def test_memory_grows_linearly_with_the_lines(projects: dict[int, Path], tokenizer) -> None:
    peaks = {}
    for n in (N, 4 * N):
        tracemalloc.start()
        analyze(tokenizer, requests_of(projects[n]))
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[4 * N] <= 4 * 1.5 * peaks[N]
