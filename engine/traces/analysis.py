"""`--analyze`: what the prefix cache does with a trace, without a model forward.

Each request is rendered with the model's chat template and tokenizer (no weights), served by the local
engine's own `BlockManager` exactly as a replay drives it (the same cached-token counts, request by
request) and by each chosen hosted rule. Per request: prompt and cached tokens, where reuse ended and
where the prompt first differs from the previous request of its session plus that request's reply (token,
region, text), and per rule the cached tokens and input cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from engine.prompts.messages import Message
from engine.prompts.regions import common_prefix, marked_text
from engine.traces.providers.anthropic import LOOKBACK_BLOCKS
from engine.traces.providers.base import CacheRule, RulePrompt, Served
from engine.traces.providers.local import LocalRule
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest
from engine.traces.sessions import request_times
from engine.traces.tokens import TokenizedText


@dataclass
class AnalyzedRequest:
    conversation: str  # the session
    turn: int  # 1-based, within the session
    time_s: float
    prompt_tokens: int
    cached_tokens: int  # the local engine's
    computed_tokens: int
    cached_share: float
    first_divergence: int  # first token not served from cache (block-aligned)
    divergence_region: str
    divergence_context: str
    first_change: int  # first token differing from the previous request + its reply (-1: none)
    change_region: str
    change_context: str
    lost_tokens: (
        int  # tokens of the previous request + its reply after the first change: reuse the change cost
    )
    served: dict[str, Served] = field(default_factory=dict)  # rule name -> what it served
    regions: list[tuple[str, int, int]] = field(
        default_factory=list
    )  # filled for each session's last request

    def row(self) -> dict[str, Any]:
        """Flat dict for CSV and tables: one cached/share/written/cost/why column group per rule, and
        `why_none`: each rule that read nothing, and why."""
        base = {k: v for k, v in vars(self).items() if k not in ("served", "regions")}
        for name, s in self.served.items():
            base |= {
                f"{name}_cached": s.cached_tokens,
                f"{name}_share": s.cached_tokens / self.prompt_tokens,
                f"{name}_written": s.written_tokens,
                f"{name}_cost": s.input_cost,
                f"{name}_why_none": s.why_none,
            }
        return base | {
            "why_none": "; ".join(f"{n}: {s.why_none}" for n, s in self.served.items() if s.why_none)
        }


def replies(requests: Sequence[TraceRequest]) -> list[Message | None]:
    """Request n's reply: the assistant message the next request of its session carries right after
    request n's messages (None when there is none)."""
    out: list[Message | None] = [None] * len(requests)
    last: dict[str, int] = {}
    for i, req in enumerate(requests):
        j = last.get(req.session)
        if j is not None:
            n, prev = len(requests[j].messages), req.messages
            out[j] = prev[n] if len(prev) > n and prev[n]["role"] == "assistant" else None
        last[req.session] = i
    return out


class Analyzer:
    def __init__(self, renderer: TraceRenderer, local: LocalRule, rules: Sequence[CacheRule] = ()) -> None:
        self.renderer, self.local, self.rules = renderer, local, list(rules)
        self.needs_breakpoints = any(r.name == "anthropic" for r in self.rules)
        self.prompts: list[tuple[list[int], list[int]]] = []  # (prompt ids, reply ids) when kept

    def run(self, requests: Sequence[TraceRequest], keep_ids: bool = False) -> list[AnalyzedRequest]:
        """Serve the requests in the order given (interleave sessions by time before calling this)."""
        following = replies(requests)
        before: dict[str, list[int]] = {}  # session -> previous prompt + its reply, as cached
        turns: dict[str, int] = {}
        out: list[AnalyzedRequest] = []
        last: dict[
            str, tuple[int, TraceRequest, TokenizedText, list[int]]
        ] = {}  # session -> its latest request
        steps = list(zip(requests, following, request_times(requests), strict=True))
        for req, reply, when in tqdm(steps, desc="analyze", unit="req", leave=False):
            turn = turns[req.session] = turns.get(req.session, 0) + 1
            prompt = self.renderer.prompt(req)
            ids, ends = prompt.ids, self.renderer.message_ends(req, prompt)
            reply_ids = self.renderer.reply(req, prompt, reply) if reply is not None else []
            marks, block_ends = (
                self.renderer.anthropic_positions(req, prompt, ends, LOOKBACK_BLOCKS)
                if self.needs_breakpoints
                else ((), ())
            )
            rp = RulePrompt(ids, when, req.model, marks, block_ends, reply_ids)
            local = self.local.serve(rp)
            served = {"local": local} | {r.name: r.serve(rp) for r in self.rules}
            prev = before.get(req.session)
            lcp = common_prefix(ids, prev) if prev is not None else len(ids)
            change = lcp if prev is not None and lcp < len(prev) else -1
            lost = len(prev) - change if prev is not None and change >= 0 else 0
            before[req.session] = ids + reply_ids[:-1]
            if keep_ids and not local.why_none:  # a request the local model refuses is in no pressure sweep
                self.prompts.append((ids, reply_ids))
            cached = local.cached_tokens
            last[req.session] = (len(out), req, prompt, ends)
            out.append(
                AnalyzedRequest(
                    conversation=req.session,
                    turn=turn,
                    time_s=when,
                    prompt_tokens=len(ids),
                    cached_tokens=cached,
                    computed_tokens=len(ids) - cached,
                    cached_share=cached / len(ids),
                    first_divergence=cached,
                    divergence_region=self.renderer.region_at(req, prompt, ends, cached),
                    divergence_context=marked_text(self.renderer.tokenizer, ids, cached, 24),
                    first_change=change,
                    change_region=self.renderer.region_at(req, prompt, ends, change) if change >= 0 else "",
                    change_context=marked_text(self.renderer.tokenizer, ids, change, 16)
                    if change >= 0
                    else "",
                    lost_tokens=lost,
                    served=served,
                )
            )
        for i, req, prompt, ends in last.values():  # for the token strip
            out[i].regions = [(r.label, r.start, r.end) for r in self.renderer.regions(req, prompt, ends)]
        return out
