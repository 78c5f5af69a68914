"""Replay conversations turn by turn through one engine and record what the prefix cache did.

Each conversation gets its own cache salt, so conversations never share blocks, yet they run
interleaved turn by turn in one engine (a fair, side-by-side comparison on a noisy machine).
Repeats are whole passes: the cache is emptied, then every turn is replayed again, so each timed
request meets exactly the cache state a real agent would leave at that turn. Pass 0 produces the
replies (model or scripted); later passes teacher-force them, which writes the same K/V blocks that
decoding them wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tqdm import tqdm

from engine.bench.machinery.stats import spread
from engine.chat import Message
from engine.engine import Engine
from engine.errors import CompactionError
from engine.regions import common_prefix, marked_text, render_prompt
from engine.traces.rendering import reply_tail


@dataclass(frozen=True)
class Request:
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # facts the turn's record carries (e.g. compaction)


@dataclass
class Conversation:
    name: str
    request: Callable[[int, list[str]], Request]  # (turn, replies so far) -> the request of that turn
    # None: the model writes the replies. A script returns the reply (text or an assistant message),
    # or None for "no reply follows this turn".
    scripted_reply: Callable[[int], str | Message | None] | None = None


@dataclass
class TurnRecord:
    conversation: str
    turn: int
    prompt_tokens: int
    cached_tokens: int
    computed_tokens: int
    cached_share: float
    first_divergence: int  # first token not served from cache (block-aligned)
    divergence_region: str
    divergence_context: str
    first_change: int  # first token differing from the previous turn's prompt + reply (-1: none)
    change_region: str
    change_context: str
    ttft_s: float
    ttft_min_s: float
    ttft_max_s: float
    cold_ttft_s: float
    cold_ttft_min_s: float
    cold_ttft_max_s: float
    prefill_s: float
    lookup_s: float
    reply: str
    regions: list[tuple[str, int, int]] = field(default_factory=list)  # (label, start, end) of the prompt
    meta: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """Flat dict for CSV (meta keys inlined, regions left out)."""
        d = asdict(self)
        return {k: v for k, v in d.items() if k not in ("meta", "regions")} | d["meta"]


def reply_tokens(engine: Engine, request: Request, reply: str | Message) -> list[int]:
    """The tokens a model emits for `reply` (`engine.traces.rendering.reply_tail`), or where the template
    rewrites the prompt when the reply follows it, the reply's text and an end-of-turn token."""
    message = reply if isinstance(reply, dict) else {"role": "assistant", "content": reply}
    prompt = engine.render(request.messages, request.tools)
    full = engine.render([*request.messages, message], request.tools, add_generation_prompt=False)
    tail = reply_tail(prompt, full, engine.source.eos_ids)
    if tail is not None:
        return tail
    text = str(message.get("content") or "")
    return engine.tokenizer(text, add_special_tokens=False).input_ids + list(engine.source.eos_ids[:1])


class Replayer:
    def __init__(
        self, engine: Engine, repeats: int = 3, reply_tokens_max: int = 24, cold: bool = True
    ) -> None:
        self.engine, self.repeats, self.max_reply, self.cold = engine, max(1, repeats), reply_tokens_max, cold

    def run(self, conversations: list[Conversation], turns: int, desc: str = "replay") -> list[TurnRecord]:
        e = self.engine
        replies: dict[str, list[str]] = {c.name: [] for c in conversations}
        forced: dict[tuple[str, int], list[int]] = {}  # tokens of each reply, teacher-forced in later passes
        warm: dict[tuple[str, int], list[Any]] = {}
        cold: dict[tuple[str, int], list[float]] = {}
        # (conversation, turn) -> the request and its token ids, kept for inspection after the run
        self.requests: dict[tuple[str, int], tuple[Request, list[int]]] = {}
        requests = self.requests
        # conversation -> (turn, why) when its request was refused
        self.refused: dict[str, tuple[int, str]] = {}
        bar = tqdm(total=self.repeats * turns * len(conversations), desc=desc, unit="req", leave=False)
        warmup = [(100 + i) % e.config.vocab_size for i in range(64)]
        e.generate(warmup, max_new_tokens=2, cache=False)  # untimed: first calls pay one-off allocation costs
        for p in range(self.repeats):
            e.reset_cache()
            for t in range(turns):
                for conv in conversations:
                    key = (conv.name, t)
                    if p == 0 and conv.name not in self.refused:
                        try:
                            req = conv.request(t, replies[conv.name])
                            requests[key] = (req, e.render(req.messages, req.tools))
                        except CompactionError as refusal:  # the conversation cannot go on: say why, stop
                            self.refused[conv.name] = (t + 1, str(refusal))
                    if key not in requests:
                        bar.update()
                        continue
                    req, ids = requests[key]
                    if p == 0 and conv.scripted_reply is None:
                        gen = e.generate(ids, max_new_tokens=self.max_reply, cache_salt=conv.name)
                        replies[conv.name].append(gen.text)
                        forced[key] = gen.token_ids
                    else:
                        gen = e.generate(ids, max_new_tokens=1, cache_salt=conv.name)
                        if p == 0:
                            reply = conv.scripted_reply(t)  # type: ignore[misc]
                            replies[conv.name].append(
                                str(reply.get("content") or "") if isinstance(reply, dict) else reply or ""
                            )
                            forced[key] = reply_tokens(e, req, reply) if reply is not None else []
                        # publish the reply's blocks as decoding it would have, untimed
                        if len(forced[key]) > 1:
                            e.generate(ids + forced[key][:-1], max_new_tokens=1, cache_salt=conv.name)
                    warm.setdefault(key, []).append(gen)
                    if self.cold:
                        cold.setdefault(key, []).append(
                            e.generate(ids, max_new_tokens=1, cache=False).timing.ttft_s
                        )
                    bar.update()
        bar.close()
        return [
            self._record(c.name, t, requests, forced, warm, cold, replies)
            for c in conversations
            for t in range(turns)
            if (c.name, t) in requests
        ]

    def _record(
        self, name: str, t: int, requests: dict, forced: dict, warm: dict, cold: dict, replies: dict
    ) -> TurnRecord:
        req, ids = requests[(name, t)]
        gens = warm[(name, t)]
        u = gens[0].usage
        assert all(g.usage.cached_tokens == u.cached_tokens for g in gens), (
            "cache state differed between passes"
        )
        rendered = render_prompt(self.engine.tokenizer, req.messages, req.tools)
        first_change = -1
        if t > 0:
            prev_req, prev_ids = requests[(name, t - 1)]
            before = prev_ids + forced[(name, t - 1)][:-1]
            lcp = common_prefix(ids, before)
            first_change = lcp if lcp < len(before) else -1
        ttft = spread(g.timing.ttft_s for g in gens)
        cold_ttft = spread(cold[(name, t)]) if self.cold else {"median": 0.0, "min": 0.0, "max": 0.0}
        return TurnRecord(
            conversation=name,
            turn=t + 1,
            prompt_tokens=u.prompt_tokens,
            cached_tokens=u.cached_tokens,
            computed_tokens=u.computed_tokens,
            cached_share=u.cached_tokens / u.prompt_tokens,
            first_divergence=u.first_divergence,
            divergence_region=rendered.region_at(u.first_divergence).label,
            divergence_context=u.divergence_context,
            first_change=first_change,
            change_region=rendered.region_at(first_change).label if first_change >= 0 else "",
            change_context=marked_text(self.engine.tokenizer, ids, first_change, 16)
            if first_change >= 0
            else "",
            ttft_s=ttft["median"],
            ttft_min_s=ttft["min"],
            ttft_max_s=ttft["max"],
            cold_ttft_s=cold_ttft["median"],
            cold_ttft_min_s=cold_ttft["min"],
            cold_ttft_max_s=cold_ttft["max"],
            prefill_s=spread(g.timing.prefill_s for g in gens)["median"],
            lookup_s=spread(g.timing.lookup_s for g in gens)["median"],
            reply=replies[name][t],
            regions=[(r.label, r.start, r.end) for r in rendered.regions],
            meta=dict(req.meta),
        )
