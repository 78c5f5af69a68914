"""`Request`: one generation request as the scheduler and the engine step see it: its tokens and blocks, how it
samples and stops, where its K/V live, and when each thing happened to it.

Invariants:
- `seq.token_ids` is the prompt and the tokens generated so far; positions [0, seq.num_kv) have K/V, so the
  next step computes `pending` tokens (the rest of the prompt, or the last sampled token) and samples when it
  reaches the end;
- every request's K/V live in pool blocks, held only while RUNNING; a private one (cache off) runs under a
  salt of its own and publishes nothing; a prefilled one (an approximate assembly) brings its prompt's K/V
  in a `window`, copied into its blocks at admission (`copy_s`), and is never preempted;
- `text` is what the request has given out: whole characters, never past the start of a stop string; its
  detokenizer and stop matcher see each token once (constant work per token, however long the reply).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from engine.arguments import boolean, integer, random_seed, stop_strings
from engine.kv.sequence import SequenceState
from engine.kv.window import KVWindow
from engine.model.sampling import check_sampling
from engine.runtime.detokenizer import IncrementalDetokenizer
from engine.runtime.outputs import CacheSteps, Generation, Timing, Usage
from engine.runtime.stop_strings import StopMatcher


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    return_logits: bool = False
    ignore_eos: bool = False  # decode exactly max_new_tokens (serving benchmarks fix output lengths so)

    @classmethod
    def checked(
        cls,
        max_new_tokens: object,
        temperature: object,
        top_p: object,
        seed: object,
        stop: object,
        logits: object,
        ignore_eos: object = False,
    ) -> SamplingParams:
        """Parameters as a user hands them in, each checked (one InvalidArgumentError line naming it)."""
        temperature, top_p = check_sampling(temperature, top_p)
        return cls(
            integer("max_new_tokens", max_new_tokens, minimum=1),
            temperature,
            top_p,
            None if seed is None else random_seed("seed", seed),
            stop_strings(stop),
            boolean("return_logits", logits),
            boolean("ignore_eos", ignore_eos),
        )


@dataclass
class Request:
    id: str
    seq: SequenceState
    params: SamplingParams
    arrival: float  # when it was added (token ids known), synchronized clock
    private: bool = False  # cache off: its lookup always misses (own salt), nothing published
    render_s: float = 0.0
    tokenize_s: float = 0.0
    generator: torch.Generator | None = None
    status: Status = Status.WAITING
    prefilled: bool = False  # its prompt's K/V come from `window` (approximate), not from a forward
    window: KVWindow | None = None  # a prefilled request's K/V until they are copied into its blocks
    copy_s: float = 0.0  # that copy, at admission
    cached_tokens: int = 0  # prompt tokens served from the prefix cache at its first admission
    approximate_tokens: int = 0
    admitted: float | None = None  # first admission
    lookup_s: float = 0.0
    prefill_done: float | None = None  # end of the forward that gave the first token's logits
    token_times: list[float] = field(default_factory=list)  # when each generated token was sampled
    steps: CacheSteps | None = None  # when it met the prefix cache, from its first admission
    preemptions: int = 0
    deferred: bool = False  # a long prompt whose first chunk waited once for the others (prefill_share.py)
    finish_reason: str | None = None  # "stop" (EOS or a stop string), "length" or "abort"
    stop_string: str | None = None
    logits: list[torch.Tensor] = field(default_factory=list)
    decode: Callable[[list[int]], str] | None = None  # generated ids -> text (None: no tokenizer)
    error: Exception | None = None  # why the request failed alone (finish_reason "error")
    # Scripted tokens: the i-th generated token is forced[i] whatever was sampled (every step's forward still
    # runs, so its timings and K/V are the engine's); it ends, as a reply does, at EOS or its last token.
    forced: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        self.detokenizer = IncrementalDetokenizer(self.decode)
        self.stops = StopMatcher(self.params.stop)
        self.given: list[str] = []  # the text given out so far, as the pieces it went in (joined at the end)
        self.given_chars = 0
        self.held = ""  # decoded characters not given out yet: at most a tail that may become a stop string

    @property
    def text(self) -> str:
        """The text given out so far (the reply, stop strings cut)."""
        if len(self.given) > 1:
            self.given = ["".join(self.given)]
        return self.given[0] if self.given else ""

    @property
    def pending(self) -> int:
        return len(self.seq) - self.seq.num_kv

    @property
    def capacity(self) -> int:
        """Positions the request can reach: its prompt plus every new token it may generate."""
        return self.seq.num_prompt + self.params.max_new_tokens

    @property
    def num_generated(self) -> int:
        return len(self.seq) - self.seq.num_prompt

    def next_token(self, sampled: int) -> int:
        """The token this step appends: the sampled one, or the script's."""
        return sampled if self.forced is None else self.forced[self.num_generated]

    def accept(self, token: int, is_eos: bool, logits: torch.Tensor, t_forward: float, t: float) -> str:
        """Record a sampled token and finish the request at EOS, a stop string or its length limit; the text
        the token adds to what may be given out."""
        if self.prefill_done is None:
            self.prefill_done = t_forward
        if self.params.return_logits:
            self.logits.append(logits.cpu())
        self.seq.token_ids.append(token)
        self.token_times.append(t)
        piece = self.detokenizer.push(token)
        hit = self.stops.feed(piece) if piece else None
        self.held += piece  # short: what was held back, then this token's characters
        if hit is not None:
            self.finish_reason, self.stop_string = "stop", hit[1]
            end = hit[0]
        else:
            if is_eos and not self.params.ignore_eos:
                self.finish_reason = "stop"
            elif self.num_generated >= self.params.max_new_tokens:
                self.finish_reason = "length"
            elif self.forced is not None and self.num_generated >= len(self.forced):
                self.finish_reason = "stop"
            end = self.stops.length - (0 if self.finish_reason is not None else self.stops.partial)
        delta = self.held[: end - self.given_chars]  # no copy of the whole reply: linear in its length
        self.held = self.held[len(delta) :]
        self.given.append(delta)
        self.given_chars += len(delta)
        return delta

    def generation(self, divergence_context: str) -> Generation:
        """The finished request's result (`divergence_context`: the prompt text around its first uncached
        token)."""
        n_prompt, n_out, times = self.seq.num_prompt, self.num_generated, self.token_times
        computed = n_prompt - self.cached_tokens - self.approximate_tokens
        usage = Usage(
            n_prompt,
            self.cached_tokens,
            computed,
            n_out,
            self.cached_tokens,
            divergence_context,
            self.approximate_tokens,
            self.seq.num_written,
        )
        decode_s = times[-1] - times[0]
        admitted = self.admitted if self.admitted is not None else self.arrival
        timing = Timing(
            ttft_s=times[0] - self.arrival,
            lookup_s=self.lookup_s,
            prefill_s=(self.prefill_done or times[0]) - admitted - self.lookup_s,
            decode_s=decode_s,
            decode_tokens_per_s=(n_out - 1) / decode_s if n_out > 1 and decode_s > 0 else 0.0,
            render_s=self.render_s,
            tokenize_s=self.tokenize_s,
            queue_s=admitted - self.arrival,
            copy_s=self.copy_s,
            time_per_output_token_s=decode_s / (n_out - 1) if n_out > 1 else 0.0,
            inter_token_s=[b - a for a, b in zip(times, times[1:], strict=False)],
        )
        logits = torch.stack(self.logits) if self.params.return_logits else None
        return Generation(
            self.seq.generated,
            self.text,
            usage,
            timing,
            self.seq.token_ids[:n_prompt],
            self.finish_reason or "length",
            logits,
            self.stop_string,
            self.preemptions,
            self.steps,
        )
