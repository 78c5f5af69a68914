"""The part of a prompt a trace does not hold, estimated where its recorded usage shows it.

Claude Code transcripts hold neither the system prompt nor the tool definitions, yet the provider cached
and billed them: a subagent's first request already reads ~12.7k tokens of them. Applied to the messages
alone, the hosted rules call such prompts shorter than they were (under a minimum they were far over) and
compare shares on another base than the recorded ones. So, per session whose requests lack the system
prompt (and the tools): the hidden prefix is estimated as the recorded cache read of the session's first
request that records one (what was cached before any message of its own; `--hidden-prefix-tokens N`
gives it instead, also for a session that lacks only the tools: a trajectory's or a Codex rollout's first
read is of the prompt it holds, which another run of the same task wrote, so it estimates nothing), and the hosted rules see N placeholder tokens before the messages, one content block
with a `cache_control` breakpoint at its end (where Claude Code marks its system prompt), so the
providers' minimums and breakpoints apply to the whole prompt and shares are of the same base as the
recorded ones. A prefix estimated from a read was cached before the session's first request (other calls
wrote it): the hosted rules hold it before that request. Sessions with prefixes of the same estimated size
share them (most likely the same agent's system prompt and tools). It is an estimate: the local cache, which holds what the trace holds, is not
given one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.kv.block_manager import chain_hash
from engine.traces.providers.base import RulePrompt
from engine.traces.request import FIVE_MINUTES, TraceRequest

FROM_FIRST_READ = "the recorded cache read of the session's first request"
GIVEN = "--hidden-prefix-tokens"


@dataclass(frozen=True)
class HiddenPrefix:
    tokens: int
    source: str  # how it was estimated

    @property
    def cached(self) -> bool:
        """Whether it was in the cache before the session's first request (it was read there)."""
        return self.source == FROM_FIRST_READ


def estimate(requests: Sequence[TraceRequest], given: int | None = None) -> dict[str, HiddenPrefix]:
    """Per session that lacks the system prompt or the tools, its hidden prefix (sessions without an
    estimate are left out)."""
    out: dict[str, HiddenPrefix] = {}
    decided: set[str] = set()
    for req in requests:
        if req.session in decided or not {"system", "tools"} & set(req.missing):
            continue
        if given is not None:
            out[req.session], _ = HiddenPrefix(given, GIVEN), decided.add(req.session)
        elif "system" not in req.missing:  # its first read is of what it holds (another run wrote it)
            decided.add(req.session)
        elif req.recorded is not None and req.recorded.cache_read_tokens is not None:
            decided.add(req.session)
            if req.recorded.cache_read_tokens > 0:
                out[req.session] = HiddenPrefix(req.recorded.cache_read_tokens, FROM_FIRST_READ)
    return out


def with_hidden(prompt: RulePrompt, tokens: int) -> RulePrompt:
    """`prompt` as a hosted rule sees it with `tokens` hidden tokens before it: placeholder ids (the first
    names the size, so prefixes of other sizes differ from token 0), a block of their own ahead of the
    content blocks with a breakpoint at its end (the auto-cache TTL of the request, else 5 minutes)."""
    ids = [-1 - tokens, *range(1, tokens)][:tokens]
    root = hashlib.blake2b(f"hidden:{prompt.model or ''}:{tokens}".encode(), digest_size=16).digest()
    chain = ((root, tokens), *((chain_hash(root, h), n + tokens) for h, n in prompt.chain))
    ttl = max((t for _, t in prompt.breakpoints), default=FIVE_MINUTES)
    marks = ((0, ttl), *((b + 1, t) for b, t in prompt.breakpoints))
    return replace(prompt, token_ids=[*ids, *prompt.token_ids], chain=chain, breakpoints=marks)


def notes(hidden: dict[str, HiddenPrefix]) -> list[str]:
    """What the report says of the estimates: one line, the sizes and how they were made."""
    if not hidden:
        return []
    sizes = sorted({h.tokens for h in hidden.values()})
    shown = ", ".join(f"{n:,}" for n in sizes[:5]) + (" ..." if len(sizes) > 5 else "")
    how = " / ".join(sorted({h.source for h in hidden.values()}))
    return [
        f"hidden prefix (an estimate): {len(hidden)} sessions lack the system prompt or tools; hosted rules see "
        f"{shown} placeholder tokens before their messages (from {how}), with a breakpoint after them, held "
        "before a session's first request where it was read there; predicted and recorded shares are of the "
        "whole prompt; the local cache sees the messages only"
    ]
