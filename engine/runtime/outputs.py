"""What a request returns: tokens and text, token usage (what the cache served), and timings."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch


@dataclass
class Usage:
    prompt_tokens: int
    cached_tokens: int  # served from the prefix cache (whole blocks)
    computed_tokens: int  # prompt_tokens - cached_tokens - approximate_tokens: what prefill computed
    completion_tokens: int = 0
    # Index of the first prompt token not served from cache (== cached_tokens), with the text around it.
    first_divergence: int = 0
    divergence_context: str = ""
    # Reused from relocated or stale K/V (the opt-in approximate modes of engine/approx); never exact,
    # never counted in cached_tokens. 0 on the default, exact path.
    approximate_tokens: int = 0
    # Prompt tokens in the full blocks this request entered in the cache (none an equal cached block held
    # already: a block-aligned prompt's last block, recomputed for its logits, is no write when cached).
    written_tokens: int = 0


@dataclass
class Timing:
    """TTFT is arrival (the request added, its token ids known) to the first sampled token: the wait for a
    step with room for it, the block lookup, the prefill (in one or more steps, beside other requests' work)
    and the first sample, device synchronized. Rendering the chat template and tokenizing come before
    arrival and are timed apart, so the whole request is render_s + tokenize_s + ttft_s (+ decode_s)."""

    ttft_s: float  # arrival -> first token sampled, device synchronized
    lookup_s: float  # hashing and matching the prompt's blocks at admission
    prefill_s: float  # end of the lookup -> end of the forward that gave the first token's logits
    decode_s: float = 0.0  # first token -> last token
    decode_tokens_per_s: float = 0.0
    render_s: float = 0.0  # chat template -> text (host; 0 for text or token-id prompts)
    tokenize_s: float = 0.0  # text -> token ids (host; 0 for token-id prompts)
    queue_s: float = 0.0  # arrival -> admission (first scheduled)
    # K/V copied per request (an approximate assembly's window into the pool's blocks); 0 on exact paths,
    # which read the cached prefix in place
    copy_s: float = 0.0
    time_per_output_token_s: float = (
        0.0  # decode_s / (completion tokens - 1), as serving benchmarks define it
    )
    inter_token_s: list[float] = field(default_factory=list)  # gaps between consecutive tokens


@dataclass
class CacheSteps:
    """When a request met the prefix cache, in its engine's step numbers (`EngineCore.steps`, from 1): the
    step whose lookup served its prompt (`admitted`), and after each step whose forward published more of its
    full blocks, the tokens (its prompt, then its reply) those blocks then held (`published`: (step, tokens)).
    Requests admitted in one step read only what was published before it, never each other's blocks."""

    admitted: int
    published: list[tuple[int, int]] = field(default_factory=list)

    def note(self, step: int, tokens: int) -> None:
        """After `step`'s forward published more of its blocks: `tokens` in its published blocks."""
        self.published.append((step, tokens))


@dataclass
class Generation:
    token_ids: list[int]
    text: str
    usage: Usage
    timing: Timing
    prompt_ids: list[int] = field(default_factory=list, repr=False)
    finish_reason: str = "length"  # "length" | "stop" (EOS or a stop string) | "abort" | "error"
    logits: torch.Tensor | None = field(default=None, repr=False)  # [steps, vocab] with return_logits=True
    stop_string: str | None = (
        None  # the stop string `text` ends before (token_ids hold the token completing it)
    )
    preemptions: int = 0  # times the request was preempted and recomputed under memory pressure
    steps: CacheSteps | None = None  # when it met the prefix cache (None: never admitted to a step)

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "token_ids": self.token_ids,
            "finish_reason": self.finish_reason,
            "stop_string": self.stop_string,
            "preemptions": self.preemptions,
            "usage": asdict(self.usage),
            "timing": asdict(self.timing),
        }


@dataclass
class StepOutput:
    """What one step did for one request: the token it sampled, the text that token adds (whole characters,
    never past a stop string) and, once finished, the whole `Generation`; or, where the request failed alone
    in the step (its forward, its logits), `error` (finished, no token: -1, no generation)."""

    request_id: str
    token_id: int
    text: str
    finished: bool
    generation: Generation | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0  # what its prompt got from the prefix cache at admission
    error: Exception | None = None
