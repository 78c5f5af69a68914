"""Replay conversations turn by turn through one engine and record what the prefix cache did.

Each conversation gets its own cache salt, so conversations never share blocks, yet they run
interleaved turn by turn in one engine (a fair, side-by-side comparison on a noisy machine); pass p
starts each turn at conversation p mod n, so no conversation always runs first.
Repeats are whole passes: the cache is emptied, then every turn is replayed again, so each timed
request meets exactly the cache state a real agent would leave at that turn. Pass 0 produces the
replies (the model's, scripted, or those another conversation's model wrote: `replies_from`); later
passes teacher-force them, which writes the same K/V blocks that decoding them wrote.

TTFT is arrival to the first sampled token (`Timing.ttft_s`); rendering and tokenizing the request
are timed apart (`render_s`, `tokenize_s`). Cold baselines run with `cache=False` on an engine over the same
weights with a pool of its own (`Engine.with_own_pool`, as large as the warm one): the same pool-backed path
under a salt of their own (the lookup misses, nothing is published), so warm and cold differ only in the
cache hit, and the warm cache is never touched. A turn's cold run comes after its warm request in one pass
and before it in the next (turn t of pass p: cold first when p + t is odd), and the order is recorded per
pass. Each pass records the
machine's load and this process's CPU time against wall time (`engine.bench.harness.contention`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tqdm import tqdm

from engine.bench.harness.contention import PassLoad, start_pass
from engine.bench.reporting.stats import spread
from engine.bench.workloads.request import Request
from engine.errors import CompactionError
from engine.prompts.chat import Message
from engine.prompts.regions import common_prefix, marked_text, render_prompt
from engine.runtime.engine import Engine
from engine.traces.rendering import reply_tail


@dataclass
class Conversation:
    name: str
    request: Callable[[int, list[str]], Request]  # (turn, replies so far) -> the request of that turn
    # None: the model writes the replies. A script returns the reply (text or an assistant message),
    # or None for "no reply follows this turn".
    scripted_reply: Callable[[int], str | Message | None] | None = None
    # The name of an earlier conversation whose model-written replies this one teacher-forces, so that the
    # two differ only in their layout (overrides `scripted_reply`).
    replies_from: str | None = None


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
    passes: int  # timed repeats: the n of every median, min and max below
    ttft_s: float  # admission -> first sampled token, median over passes
    ttft_min_s: float
    ttft_max_s: float
    cold_ttft_s: float  # the same prompt with no cache (0: not measured)
    cold_ttft_min_s: float
    cold_ttft_max_s: float
    prefill_s: float
    lookup_s: float
    render_s: float  # chat template -> text (host, median; not in TTFT)
    tokenize_s: float  # text -> token ids (host, median; not in TTFT)
    reply: str
    ttft_passes_s: list[float] = field(default_factory=list)  # TTFT of pass 0, 1, ...
    cold_ttft_passes_s: list[float] = field(default_factory=list)
    cold_first_passes: list[bool] = field(default_factory=list)  # per pass: the cold run came first
    regions: list[tuple[str, int, int]] = field(default_factory=list)  # (label, start, end) of the prompt
    meta: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """Flat dict for CSV (meta keys inlined; regions and per-pass lists left out: they are in JSON)."""
        d = asdict(self)
        skip = ("meta", "regions", "ttft_passes_s", "cold_ttft_passes_s", "cold_first_passes")
        return {k: v for k, v in d.items() if k not in skip} | d["meta"]


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


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a replay: `records` are the turns that finished (each over the passes it completed)."""

    def __init__(self, records: list[TurnRecord]) -> None:
        super().__init__()
        self.records = records


def finished_turns(replay: Callable[[], list[TurnRecord]]) -> tuple[list[TurnRecord], bool]:
    """The records of `replay()` and False, or after a Ctrl-C the turns that finished and True (partial)."""
    try:
        return replay(), False
    except RunInterrupted as stop:
        return stop.records, True


# Called after each finished pass with its index, every turn's record over the passes so far, and the pass's
# wall seconds (outside any timed request: between one pass and the cache reset of the next).
PassDone = Callable[[int, list["TurnRecord"], float], None]


class Replayer:
    def __init__(
        self,
        engine: Engine,
        repeats: int = 3,
        reply_tokens_max: int = 24,
        cold: bool = True,
        on_pass: PassDone | None = None,
    ) -> None:
        self.engine, self.repeats, self.max_reply, self.cold = engine, max(1, repeats), reply_tokens_max, cold
        self.on_pass = on_pass
        self.passes: list[PassLoad] = []  # the machine's load during each finished pass
        # the cold runs' engine: the same weights, its own pool (made at the first cold run)
        self._cold_engine: Engine | None = None

    def run(self, conversations: list[Conversation], turns: int, desc: str = "replay") -> list[TurnRecord]:
        """One record per turn of each conversation; on Ctrl-C, RunInterrupted with the finished turns."""
        # (conversation, turn) in replay order, once its first pass finished
        self.finished: list[tuple[str, int]] = []
        try:
            return self._run(conversations, turns, desc)
        except KeyboardInterrupt:
            order = {c.name: i for i, c in enumerate(conversations)}
            finished = sorted(self.finished, key=lambda key: (order[key[0]], key[1]))
            records = [self._record(name, t, *self._state) for name, t in finished]
            raise RunInterrupted(records) from None

    def _run(self, conversations: list[Conversation], turns: int, desc: str) -> list[TurnRecord]:
        e = self.engine
        names = [c.name for c in conversations]
        for c in conversations:  # pass 0 runs in list order: a reference must come before its followers
            if c.replies_from is not None and names.index(c.replies_from) >= names.index(c.name):
                raise ValueError(f"{c.name} takes its replies from {c.replies_from}, which must come first")
        replies: dict[str, list[str]] = {c.name: [] for c in conversations}
        forced: dict[tuple[str, int], list[int]] = {}  # tokens of each reply, teacher-forced in later passes
        warm: dict[tuple[str, int], list[Any]] = {}
        cold: dict[tuple[str, int], list[tuple[float, bool]]] = {}  # (TTFT, ran before the warm request)
        encode: dict[tuple[str, int], list[Any]] = {}  # the request's render/tokenize timings per pass
        # (conversation, turn) -> the request and its token ids, kept for inspection after the run
        self.requests: dict[tuple[str, int], tuple[Request, list[int]]] = {}
        requests = self.requests
        self._state = (
            requests,
            forced,
            warm,
            cold,
            replies,
            encode,
        )  # what `_record` needs, also after Ctrl-C
        # conversation -> (turn, why) when its request was refused
        self.refused: dict[str, tuple[int, str]] = {}
        bar = tqdm(total=self.repeats * turns * len(conversations), desc=desc, unit="req", leave=False)
        warmup = [(100 + i) % e.config.vocab_size for i in range(64)]
        e.generate(warmup, max_new_tokens=2, cache=False)  # untimed one-off costs
        if self.cold:
            self._cold().generate(warmup, max_new_tokens=2, cache=False)
        self.passes = []
        for p in range(self.repeats):
            e.reset_cache()
            finish_pass = start_pass(e.device)
            start = p % len(conversations)  # rotate who goes first within a turn
            for t in range(turns):
                for conv in conversations[start:] + conversations[:start]:
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
                    cold_first = self.cold and (p + t) % 2 == 1
                    if cold_first:
                        cold.setdefault(key, []).append((self._cold_ttft(ids), True))
                    encoded = e.prompts.render_timed(req.messages, req.tools)
                    assert encoded.ids == ids, "the request rendered differently in a later pass"
                    encode.setdefault(key, []).append(encoded)
                    if p == 0 and conv.scripted_reply is None and conv.replies_from is None:
                        gen = e.generate(ids, max_new_tokens=self.max_reply, cache_salt=conv.name)
                        replies[conv.name].append(gen.text)
                        forced[key] = gen.token_ids
                    else:
                        gen = e.generate(ids, max_new_tokens=1, cache_salt=conv.name)
                        if p == 0:
                            reply = self._given_reply(conv, t, replies)
                            replies[conv.name].append(
                                str(reply.get("content") or "") if isinstance(reply, dict) else reply or ""
                            )
                            if conv.replies_from is not None:  # the very tokens the reference's model emitted
                                forced[key] = forced.get((conv.replies_from, t), [])
                            else:
                                forced[key] = reply_tokens(e, req, reply) if reply is not None else []
                        # publish the reply's blocks as decoding it would have, untimed
                        if len(forced[key]) > 1:
                            e.generate(ids + forced[key][:-1], max_new_tokens=1, cache_salt=conv.name)
                    warm.setdefault(key, []).append(gen)
                    if self.cold and not cold_first:
                        cold.setdefault(key, []).append((self._cold_ttft(ids), False))
                    if p == 0:
                        self.finished.append(key)
                    bar.update()
            self.passes.append(finish_pass())
            if self.on_pass is not None:
                self.on_pass(p, self._records(conversations, turns), self.passes[-1].wall_s)
        bar.close()
        return self._records(conversations, turns)

    def _records(self, conversations: list[Conversation], turns: int) -> list[TurnRecord]:
        """Every turn's record over the passes finished so far, conversation by conversation."""
        return [
            self._record(c.name, t, *self._state)
            for c in conversations
            for t in range(turns)
            if (c.name, t) in self.requests
        ]

    def _cold_ttft(self, ids: list[int]) -> float:
        """TTFT of `ids` with no cache, in the cold engine's own pool (the warm cache is neither read nor
        touched)."""
        return self._cold().generate(ids, max_new_tokens=1, cache=False).timing.ttft_s

    def _cold(self) -> Engine:
        if self._cold_engine is None:
            blocks = self.engine.blocks
            self._cold_engine = self.engine.with_own_pool(blocks.num_blocks * blocks.block_size)
        return self._cold_engine

    @staticmethod
    def _given_reply(conv: Conversation, t: int, replies: dict[str, list[str]]) -> str | Message | None:
        """The reply a conversation does not write itself: another conversation's, or its script's."""
        if conv.replies_from is not None:
            theirs = replies[conv.replies_from]
            return theirs[t] if t < len(theirs) else None
        return conv.scripted_reply(t)  # type: ignore[misc]

    def _record(
        self,
        name: str,
        t: int,
        requests: dict,
        forced: dict,
        warm: dict,
        cold: dict,
        replies: dict,
        encode: dict,
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
        colds = [ttft for ttft, _ in cold.get((name, t), [])]
        cold_ttft = spread(colds) if colds else {"median": 0.0, "min": 0.0, "max": 0.0}
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
            passes=len(gens),
            ttft_s=ttft["median"],
            ttft_min_s=ttft["min"],
            ttft_max_s=ttft["max"],
            cold_ttft_s=cold_ttft["median"],
            cold_ttft_min_s=cold_ttft["min"],
            cold_ttft_max_s=cold_ttft["max"],
            prefill_s=spread(g.timing.prefill_s for g in gens)["median"],
            lookup_s=spread(g.timing.lookup_s for g in gens)["median"],
            render_s=spread(x.render_s for x in encode[(name, t)])["median"],
            tokenize_s=spread(x.tokenize_s for x in encode[(name, t)])["median"],
            reply=replies[name][t],
            ttft_passes_s=[g.timing.ttft_s for g in gens],
            cold_ttft_passes_s=colds,
            cold_first_passes=[first for _, first in cold.get((name, t), [])],
            regions=[(r.label, r.start, r.end) for r in rendered.regions],
            meta=dict(req.meta),
        )
