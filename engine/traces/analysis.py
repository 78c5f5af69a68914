"""`--analyze`: what the prefix cache does with a trace, without a model forward.

Each request is rendered with the model's chat template and tokenizer (no weights), served by the local
engine's own `BlockManager` exactly as a replay drives it (the same cached-token counts, request by
request) and by each chosen hosted rule. Per request: prompt and cached tokens, where reuse ended and
where the prompt first differs from the request it continues plus that request's reply (token, region,
text, and the doctor's cause of it: `engine.traces.doctor.hint`), per rule the cached tokens and input
cost, the usage the provider recorded where the trace has it, and per cache (each rule, and the recorded
usage) where a miss came from (`engine.traces.miss_reasons`; for this project's server, the reason it
reported), and the recorded reads and writes the trace's own requests cannot explain
(`engine.traces.unexplained`).
A usage-only request (no content in the trace) gets its recorded figures and recorded miss reason only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tqdm import tqdm

from engine.prompts.messages import Message
from engine.prompts.regions import common_prefix, marked_text, token_span
from engine.traces.blocks import BlockChain
from engine.traces.chains import previous_requests
from engine.traces.doctor.hint import token_hint
from engine.traces.envelope import SERVER
from engine.traces.hidden_prefix import HiddenPrefix, with_hidden
from engine.traces.miss_reasons import Miss, TokenChange, changed_in, miss_reason
from engine.traces.outcomes import recorded_outcome, rule_outcome, shared_blocks
from engine.traces.providers.base import CacheRule, RulePrompt, Served
from engine.traces.providers.local import LocalRule
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest
from engine.traces.sessions import request_times
from engine.traces.unexplained import unexplained
from engine.traces.usage import RecordedUsage

RECORDED = "recorded"  # the miss reasons of the provider's own usage, beside the rules'
USAGE_FIELDS = (
    "prompt_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
)


@dataclass
class AnalyzedRequest:
    conversation: str  # the session
    turn: int  # 1-based, within the session
    time_s: float
    prompt_tokens: int  # 0 for a usage-only request
    cached_tokens: int  # the local engine's
    computed_tokens: int
    cached_share: float
    first_divergence: int  # first token not served from cache (block-aligned)
    divergence_region: str
    divergence_context: str
    first_change: int  # first token differing from the previous request + its reply (-1: none)
    change_region: str
    change_context: str
    lost_tokens: int  # tokens of the previous request + its reply after the first change
    gap_s: float | None = None  # since the request it continues (None: it continues none)
    served: dict[str, Served] = field(default_factory=dict)  # rule name -> what it served
    misses: dict[str, Miss | None] = field(default_factory=dict)  # cache (rule or "recorded") -> its miss
    recorded: RecordedUsage | None = None
    missing: tuple[str, ...] = ()  # prompt parts the trace does not hold ("system", "tools")
    cache_key: str | None = None
    cache_retention: str | None = None
    regions: list[tuple[str, int, int]] = field(default_factory=list)  # for each session's last request
    token_change: TokenChange | None = None  # the change as the rendered tokens show it (None: no content)
    change_cause: str = ""  # the doctor's cause of the first change (engine.traces.doctor.hint; "": none)
    unanswered: tuple[str, ...] = ()  # tool calls its history holds without their results
    unexplained_read: int | None = None  # recorded reads no earlier request could have left (tokens)
    unread_write: int | None = None  # recorded writes no later request read while live (tokens)

    def row(self) -> dict[str, Any]:
        """Flat dict for CSV and tables: recorded usage, one cached/share/written/cost/why column group per
        rule, `why_none` (each rule that read nothing, and why), then the misses."""
        skip = ("served", "regions", "misses", "recorded", "missing", "token_change")
        base = {k: v for k, v in vars(self).items() if k not in skip}
        base["missing"] = ",".join(self.missing)
        base["unanswered"] = ",".join(self.unanswered)
        for name in USAGE_FIELDS:
            base[f"recorded_{name}"] = getattr(self.recorded, name) if self.recorded else None
        base["recorded_share"] = self.recorded.cached_share if self.recorded else None
        for name, s in self.served.items():
            prompt = s.prompt_tokens or self.prompt_tokens
            base |= {
                f"{name}_cached": s.cached_tokens,
                f"{name}_share": s.cached_tokens / prompt if prompt else None,
                f"{name}_written": s.written_tokens,
                f"{name}_cost": s.input_cost,
                f"{name}_why_none": s.why_none,
            }
        base["why_none"] = "; ".join(f"{n}: {s.why_none}" for n, s in self.served.items() if s.why_none)
        for name, miss in self.misses.items():
            base[f"{name}_miss"] = miss.reason if miss else None
            base[f"{name}_missed_tokens"] = miss.missed_tokens if miss else None
        return base


def replies(requests: Sequence[TraceRequest]) -> list[Message | None]:
    """Request n's reply: the assistant message that the first later request continuing it
    (`engine.traces.chains`) carries right after request n's messages (None when there is none)."""
    out: list[Message | None] = [None] * len(requests)
    for i, j in enumerate(previous_requests(requests)):
        if j is not None and out[j] is None:
            n, msgs = len(requests[j].messages), requests[i].messages
            out[j] = msgs[n] if len(msgs) > n and msgs[n]["role"] == "assistant" else None
    return out


@dataclass
class _Kept:
    """What a later request that continues this one compares against."""

    before: list[int]  # prompt ids + the reply's, as cached
    prompt: RulePrompt
    served: dict[str, Served]


class Analyzer:
    def __init__(self, renderer: TraceRenderer, local: LocalRule, rules: Sequence[CacheRule] = ()) -> None:
        self.renderer, self.local, self.rules = renderer, local, list(rules)
        self.chain = (
            BlockChain(renderer.tokenizer) if any(r.name == "anthropic" for r in self.rules) else None
        )
        self.prompts: list[tuple[list[int], list[int]]] = []  # (prompt ids, reply ids) when kept
        self.hidden: dict[str, HiddenPrefix] = {}  # session -> the prefix the hosted rules see ahead
        self.warmed: set[str] = set()  # sessions whose hidden prefix the hosted rules hold already

    def _rule_prompt(self, req: TraceRequest, ids: list[int], when: float, reply: list[int]) -> RulePrompt:
        chain = self.chain.chain(req) if self.chain is not None else ()
        marks = [(b.block, b.ttl_s) for b in req.breakpoints]
        if req.auto_cache_ttl_s is not None and chain:
            marks.append((len(chain) - 1, req.auto_cache_ttl_s))
        return RulePrompt(
            ids,
            when,
            req.model,
            reply,
            chain,
            tuple(sorted(marks)),
            req.cache_key,
            req.cache_retention,
            req.cache_salt,
            req.steps,
        )

    def run(
        self,
        requests: Sequence[TraceRequest],
        keep_ids: bool = False,
        hidden: dict[str, HiddenPrefix] | None = None,
    ) -> list[AnalyzedRequest]:
        """Serve the requests in the order given (interleave sessions by time before calling this); `hidden`:
        per session, the tokens of prompt the trace lacks, ahead of its messages for the hosted rules
        (`engine.traces.hidden_prefix`)."""
        self.hidden = dict(hidden or {})
        previous, following, times = previous_requests(requests), replies(requests), request_times(requests)
        pending = Counter(p for p in previous if p is not None)  # later requests still to continue each
        kept: dict[int, _Kept] = {}
        turns: dict[str, int] = {}
        out: list[AnalyzedRequest] = []
        last: dict[str, tuple[int, TraceRequest, Any, list[int]]] = {}  # session -> its latest request
        for i, req in enumerate(tqdm(requests, desc="analyze", unit="req", leave=False)):
            turn = turns[req.session] = turns.get(req.session, 0) + 1
            p = previous[i]
            prev, gap = (requests[p], times[i] - times[p]) if p is not None else (None, None)
            if req.messages:
                record, state, render = self._analyze(
                    req, following[i], times[i], turn, prev, kept.get(p), keep_ids
                )
                last[req.session] = (i, req, *render)
            else:
                record, state = _usage_only(req, times[i], turn), None
            record.gap_s = gap
            outcome = recorded_outcome(req, prev, gap)
            if (
                outcome is not None and req.recorded.miss is not None
            ):  # the reporter's own reason (our server)
                reason, missed = req.recorded.miss
                record.misses[RECORDED] = Miss(reason, missed) if reason is not None else None
            elif outcome is not None:  # this project's server caches rendered tokens, as the local rule does
                by_tokens = record.token_change if req.recorded.provider == SERVER else None
                record.misses[RECORDED] = miss_reason(prev, req, outcome, by_tokens)
            out.append(record)
            if pending[i] and state is not None:
                kept[i] = state
            if p is not None:
                pending[p] -= 1
                if pending[p] == 0:
                    kept.pop(p, None)
        flagged = unexplained([r.recorded for r in out], [r.time_s for r in out])
        for record, found in zip(out, flagged, strict=True):
            if found is not None:
                record.unexplained_read, record.unread_write = found.read_tokens, found.unread_write_tokens
        for i, req, prompt, ends in last.values():  # for the token strip
            out[i].regions = [(r.label, r.start, r.end) for r in self.renderer.regions(req, prompt, ends)]
        return out

    def _analyze(
        self,
        req: TraceRequest,
        reply: Message | None,
        when: float,
        turn: int,
        prev: TraceRequest | None,
        before: _Kept | None,
        keep_ids: bool,
    ) -> tuple[AnalyzedRequest, _Kept, tuple[Any, list[int]]]:
        prompt = self.renderer.prompt(req)
        ids, ends = prompt.ids, self.renderer.message_ends(req, prompt)
        reply_ids = (
            list(req.sampled.ids)  # what the server sampled, and cached
            if req.sampled is not None
            else self.renderer.reply(req, prompt, reply, req.reply_cut)
            if reply is not None
            else []
        )
        rp = self._rule_prompt(req, ids, when, reply_ids)
        prefix = self.hidden.get(req.session)
        hidden = prefix.tokens if prefix is not None else 0
        hosted = with_hidden(rp, hidden) if hidden else rp  # the whole prompt, as far as it is estimated
        if prefix is not None and prefix.cached and req.session not in self.warmed:  # read: cached before
            self.warmed.add(req.session)
            for rule in self.rules:
                rule.serve(
                    with_hidden(replace(rp, token_ids=[], chain=(), breakpoints=(), reply_ids=[]), hidden)
                )
        served = {"local": self.local.serve(rp)} | {
            r.name: _whole(r.serve(hosted), len(hosted.token_ids)) for r in self.rules
        }
        lcp = common_prefix(ids, before.before) if before is not None else len(ids)
        change = lcp if before is not None and lcp < len(before.before) else -1
        spans = self.renderer.spans(req, prompt, ends)
        changed = token_span(spans, prompt.offsets, change) if change >= 0 else ("", "")
        tokens = TokenChange(changed_in(changed[1]) if change >= 0 else None)
        decode = self.renderer.tokenizer.decode
        cause = (
            token_hint(before.before, ids, change, changed[1], decode, 1).cause
            if before is not None and change >= 0
            else ""
        )
        if keep_ids and not served["local"].why_none:  # a request the local model refuses is in no sweep
            self.prompts.append((ids, reply_ids))
        cached = served["local"].cached_tokens
        misses: dict[str, Miss | None] = {}
        for rule in [self.local, *self.rules]:
            shared = (
                None
                if before is None
                else shared_blocks(hosted.chain, before.prompt.chain)
                if rule.name == "anthropic"
                else lcp + (hidden if rule is not self.local else 0)
            )
            prior = before.served.get(rule.name) if before is not None else None
            outcome = rule_outcome(served[rule.name], prior, len(ids), shared, rule.unit)
            refused = rule is self.local and served["local"].why_none  # never served: no miss to explain
            by_tokens = tokens if rule is self.local else None  # the engine's cache holds rendered tokens
            misses[rule.name] = (
                None
                if refused
                else miss_reason(prev if before is not None else None, req, outcome, by_tokens)
            )
        record = AnalyzedRequest(
            conversation=req.session,
            turn=turn,
            time_s=when,
            prompt_tokens=len(ids),
            cached_tokens=cached,
            computed_tokens=len(ids) - cached,
            cached_share=cached / len(ids),
            first_divergence=cached,
            divergence_region=token_span(spans, prompt.offsets, cached)[0],
            divergence_context=marked_text(self.renderer.tokenizer, ids, cached, 24),
            first_change=change,
            change_region=changed[0],
            change_context=marked_text(self.renderer.tokenizer, ids, change, 16) if change >= 0 else "",
            lost_tokens=len(before.before) - change if before is not None and change >= 0 else 0,
            served=served,
            misses=misses,
            recorded=req.recorded,
            missing=req.missing,
            cache_key=req.cache_key,
            cache_retention=req.cache_retention,
            token_change=tokens,
            change_cause=cause,
            unanswered=req.unanswered,
        )
        return record, _Kept(ids + reply_ids[:-1], hosted, served), (prompt, ends)


def _whole(served: Served, prompt_tokens: int) -> Served:
    """A hosted rule's answer with the prompt size it saw (hidden prefix included) where it gives none."""
    return served if served.prompt_tokens is not None else replace(served, prompt_tokens=prompt_tokens)


def _usage_only(req: TraceRequest, when: float, turn: int) -> AnalyzedRequest:
    """A request the trace holds no content for: only what the provider recorded."""
    return AnalyzedRequest(
        req.session,
        turn,
        when,
        0,
        0,
        0,
        0.0,
        0,
        "",
        "",
        -1,
        "",
        "",
        0,
        recorded=req.recorded,
        missing=("content",),
        cache_key=req.cache_key,
        cache_retention=req.cache_retention,
    )
