"""The `kvtestbed` extension object: the cache's own answer on every response (every field is described in
docs/serve.md), and the live page's entry for a request (the same, plus the prompt's regions)."""

from __future__ import annotations

import time
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.prompts.regions import RenderedPrompt, marked_text
from engine.runtime.outputs import Generation
from engine.serve.chat_request import ChatRequest
from engine.serve.miss_reason import MissAnalysis
from engine.serve.sessions import SessionMatch

CONTEXT_TOKENS = 16  # tokens of text shown either side of a divergence


def expected_written(prompt_tokens: int, cached_tokens: int, block_size: int) -> int:
    """At admission, the prompt tokens this request is expected to write to the cache: its full blocks past
    the cached prefix (Anthropic's `message_start`; the final usage counts what was written,
    `Usage.written_tokens`: fewer where an equal block was cached already)."""
    return prompt_tokens // block_size * block_size - cached_tokens


def _head(req: ChatRequest, match: SessionMatch, block_size: int, cache_scope: str | None) -> dict[str, Any]:
    """What is known once the request is prepared: itself, its session, the request it is compared with."""
    return {
        "request_id": req.request_id,
        "session_id": match.session,
        "session_source": match.source,
        "previous_request_id": match.previous.request_id if match.previous else None,
        "previous_session_id": match.previous.session if match.previous else None,
        "model": req.model,
        "cache_scope": cache_scope,
        "block_size": block_size,
    }


def admission_report(
    req: ChatRequest,
    match: SessionMatch,
    prompt_tokens: int,
    cached_tokens: int,
    block_size: int,
    cache_scope: str | None = None,
) -> dict[str, Any]:
    """The `kvtestbed` object as far as it is known when the request is admitted to a step (on Anthropic's
    `message_start`, whose message the SDK's stream accumulator keeps as its final message): the request, its
    session and what the cache served, `complete: false`. The complete object comes with the answer's end."""
    counts = {"prompt_tokens": prompt_tokens, "cached_tokens": cached_tokens}
    return (
        _head(req, match, block_size, cache_scope)
        | counts
        | {
            "computed_tokens": prompt_tokens - cached_tokens,
            "complete": False,
        }
    )


def build_report(
    req: ChatRequest,
    match: SessionMatch,
    gen: Generation,
    analysis: MissAnalysis,
    rendered: RenderedPrompt,
    tokenizer: PreTrainedTokenizerBase,
    block_size: int,
    timing: dict[str, float],
    cache_scope: str | None = None,
) -> dict[str, Any]:
    u, ids = gen.usage, rendered.token_ids
    change = analysis.first_change
    divergence = (
        {
            "token": change,
            "region": rendered.region_at(change).label,
            "text": marked_text(tokenizer, ids, change, CONTEXT_TOKENS),
            "lost_tokens": analysis.lost_tokens,
            "retokenized": analysis.retokenized,
        }
        if change >= 0
        else None
    )
    return _head(req, match, block_size, cache_scope) | {
        "prompt_tokens": u.prompt_tokens,
        "cached_tokens": u.cached_tokens,
        "computed_tokens": u.computed_tokens,
        "cache_written_tokens": u.written_tokens,
        "completion_tokens": u.completion_tokens,
        "reuse_end": {
            "token": u.first_divergence,
            "region": rendered.region_at(u.first_divergence).label,
            "text": u.divergence_context,
        },
        "expected_cached_tokens": analysis.expected_cached_tokens,
        "miss_reason": analysis.reason,
        "divergence": divergence,
        "hint": analysis.hint,
        "finish_reason": gen.finish_reason,
        "timing": timing,
    }


def page_entry(req: ChatRequest, report: dict[str, Any], rendered: RenderedPrompt) -> dict[str, Any]:
    """What the live page shows of a request: the report, the API, when, and the prompt's regions."""
    regions = [[r.label, r.kind, r.start, r.end] for r in rendered.regions]
    return report | {"api": req.api, "time": time.time(), "regions": regions}
