"""What the benchmarks share: the shapes of a run, our engine and `transformers` on identical weights, and
timed calls that synchronize the device and fit a time budget.

pytest-benchmark's timer reads the wall clock and does not wait for queued GPU kernels, so every timed
callable here ends with `engine.devices.synchronize`.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, Cache, DynamicCache, PreTrainedModel, StaticCache
from transformers.initialization import no_init_weights

import engine
from benchmarks.peak_rss import peak_rss_bytes, reset_peak_rss
from engine.devices import dtype_name, now, synchronize
from engine.kv.sequence import SequenceState
from engine.runtime.engine import Engine
from engine.runtime.request import Request, SamplingParams


@dataclass(frozen=True)
class Shapes:
    prefill: tuple[int, ...]  # cold prefill lengths (full prefills of cached + new are added)
    contexts: tuple[int, ...]  # cached prefix lengths S: decode steps and cached prefills start there
    new: tuple[int, ...]  # new tokens V after a cached prefix
    block_sizes: tuple[int, ...]
    diverging: tuple[int, int]  # (prompt length, first differing token) for the block-size case
    budget_s: float  # time per benchmark: rounds = budget / time of one call, within [2, MAX_ROUNDS]
    warm: tuple[int, ...] = ()  # prompt lengths L prefilled with one block and with L/2 tokens cached
    trace: tuple[int, int] = (200, 50_000)  # (requests, first prompt's tokens) of the analysis case
    batch: tuple[int, ...] = (1, 4, 8, 16)  # concurrent sequences of the batched decode case
    batch_context: int = 1024  # their shared cached context
    step_batch: tuple[int, ...] = (
        1,
        8,
        32,
    )  # sequences of one decode step (ModelRunner.run), at batch_context
    warm_peer: tuple[int, ...] = ()  # cached S of the warm TTFT (S + WARM_NEW) against a contiguous cache
    scattered_context: int = 2048  # prompts of the decode step over scattered block tables
    hash_requests: int = 100_000  # requests of the hash-id (Mooncake) replay case
    long: tuple[int, ...] = ()  # long-context cold prefills on `--long-model`; the longest also warm/cold
    long_new: int = 1024  # new tokens of that warm case: all of the prompt but these is cached

    @property
    def cached_new(self) -> list[tuple[int, int]]:
        """(S cached, V new) of every cached-prefill case: S x V, then the warm cases (BLOCK, L - BLOCK) and
        (L/2, L/2), whose cold prefill of L is a case too."""
        warm = [(s, n - s) for n in self.warm for s in (BLOCK, n // 2)]
        return list(itertools.product(self.contexts, self.new)) + warm

    @property
    def prefill_lengths(self) -> list[int]:
        return sorted(set(self.prefill) | {s + v for s, v in self.cached_new})

    @property
    def alternating_lengths(self) -> list[int]:
        """Cold prefills timed alternating with `transformers`: the prefill and warm lengths."""
        return sorted(set(self.prefill) | set(self.warm))

    @property
    def max_cached(self) -> int:
        return max([s for s, _ in self.cached_new] + list(self.warm_peer))

    @property
    def base_length(self) -> int:
        """A prompt whose prefixes serve every cached and lookup case (+1: a prompt's last token is never
        served from cache)."""
        return (
            max(
                max(s + v for s, v in self.cached_new),
                self.diverging[0],
                self.batch_context + max(*self.batch, *self.step_batch),
                max(self.warm_peer, default=0) + WARM_NEW,
            )
            + 1
        )

    def within(self, context: int) -> tuple[Shapes, list[str]]:
        """These shapes for a model of `context` tokens: every length whose prompt (with the token it
        generates, and the base prompt's one more) does not fit left out, and what was left out, one entry
        per field. The long cases are not touched: they run on `--long-model`, of its own context. Raises
        ValueError where a case every run needs cannot fit (no prefill or decode context left)."""
        room = context - 2

        def fits(values: tuple[int, ...], extra: int = 0) -> tuple[int, ...]:
            return tuple(n for n in values if n + extra <= room)

        kept = replace(
            self,
            prefill=fits(self.prefill),
            contexts=fits(self.contexts, max(self.new)),
            warm=fits(self.warm),
            warm_peer=fits(self.warm_peer, WARM_NEW),
        )
        left_out = [
            f"{name} {', '.join(f'{n:,}' for n in getattr(self, name) if n not in getattr(kept, name))}"
            for name in ("prefill", "contexts", "warm", "warm_peer")
            if getattr(kept, name) != getattr(self, name)
        ]
        fixed = max(
            self.diverging[0],
            self.batch_context + max(*self.batch, *self.step_batch),
            2 * self.scattered_context + MAX_ROUNDS + 16,
        )
        if not kept.prefill or not kept.contexts or fixed > room:
            raise ValueError(
                f"a {context:,}-token context is too short for these shapes (cold prefills of "
                f"{min(self.prefill):,}, decode after {min(self.contexts):,} + {max(self.new)} new, "
                f"prompts of {fixed:,}): choose smaller --shapes"
            )
        return kept, left_out


BLOCK = 16  # the engine's default block size, which `Pair` runs with
WARM_NEW = 64  # new tokens after the cached prefix in the warm-against-contiguous case
FULL = Shapes(
    (512, 2048),
    (512, 2048, 4096),
    (32, 128),
    (16, 64, 256),
    (1024, 760),
    8.0,
    warm=(1024, 4096),
    batch=(1, 4, 8, 16, 32),
    warm_peer=(2048, 8192, 16384),
)
QUICK = Shapes(
    (128,),
    (256, 512),
    (32,),
    (16, 64, 256),
    (512, 360),
    2.0,
    warm=(512,),
    trace=(20, 8000),
    batch=(1, 4),
    batch_context=256,
    step_batch=(1, 8),
    warm_peer=(512,),
    hash_requests=10_000,
    scattered_context=512,
)
# A GPU's check (scripts/device_check.py): the long contexts that GPU targets are stated at, a short budget
DEVICE = Shapes(
    (512, 2048, 8192),
    (2048, 8192),
    (128,),
    (16, 64, 256),
    (1024, 760),
    0.5,
    warm=(2048, 8192),
    trace=(20, 8000),
    hash_requests=10_000,
    warm_peer=(2048, 8192),
)
# The CPU run of that check: every case once, at sizes a loaded CPU gets through in minutes
SMOKE = Shapes(
    (64,),
    (128,),
    (16,),
    (16, 64),
    (128, 90),
    0.1,
    warm=(128,),
    trace=(5, 8000),
    batch=(1, 2),
    batch_context=64,
    step_batch=(1, 8),
    warm_peer=(128,),
    hash_requests=2_000,
    scattered_context=128,
    long=(512,),
    long_new=128,
)
# The full suite plus the long agent contexts: prefills of 8k / 16k / 32k tokens, warm/cold at 32k, and the
# analysis of a session of 128k-token prompts (hours on 2 CPU cores: run the long files alone, see
# docs/benchmarks.md). The synthetic listing asked for 108,000 tokens tokenizes to ~127.5k (its estimate, from
# short lines, runs low at this size): prompts of 127,503 to 130,865 tokens, within the YaRN presets' 131,072.
LONG = replace(FULL, long=(8192, 16384, 32768), trace=(64, 108_000))
SHAPES = {"full": FULL, "quick": QUICK, "device": DEVICE, "smoke": SMOKE, "long": LONG}
MAX_ROUNDS = 200
SCATTERED_ROWS = 8  # requests of the decode step over scattered block tables


def available_devices() -> list[str]:
    found = ["cpu"]
    if torch.cuda.is_available():
        found.append("cuda")
    if torch.backends.mps.is_available():
        found.append("mps")
    return found


def random_tokens(n: int, seed: int, vocab: int) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def transformers_twin(ours: Engine) -> PreTrainedModel:
    """`transformers`' own model class with the weights our engine holds (sdpa attention, same dtype)."""
    hf = {k: v for k, v in ours.config.to_hf().items() if k != "architectures"}
    config = AutoConfig.for_model(hf.pop("model_type"), **hf)
    with no_init_weights(), ours.device:  # every weight is loaded below: skip the random init
        model = AutoModelForCausalLM.from_config(config, dtype=ours.dtype, attn_implementation="sdpa")
    model.tie_weights()
    reader = ours.source.reader(ours.device)
    missing = model.load_state_dict({name: reader.get(name) for name in reader.names()}, strict=False)
    if set(missing.missing_keys) - {"lm_head.weight"} or missing.unexpected_keys:
        raise RuntimeError(f"transformers model does not take our weights: {missing}")
    return model.eval()


class Solo:
    """Our engine alone, with a KV pool of `cache_tokens`: the cases `transformers` has no counterpart to."""

    def __init__(self, model: str, device: str, dtype: str | None, cache_tokens: int) -> None:
        self.ours = engine.load(model, device, dtype, cache_tokens=cache_tokens)
        self.device, self.config = self.ours.device, self.ours.config

    @property
    def info(self) -> dict[str, Any]:
        return {
            "device": self.device.type,
            "dtype": dtype_name(self.ours.dtype),
            "model": self.ours.source.model_id,
            "attention": self.ours.info.get("attention"),  # the backend that ran (absent before it was named)
        }

    def tokens(self, n: int, seed: int) -> list[int]:
        return random_tokens(n, seed, self.config.vocab_size)


class Pair(Solo):
    """Our engine and its `transformers` twin, and a long random prompt `base` whose prefixes are cached in
    both: published blocks in ours, a DynamicCache of the first `max_cached` tokens in theirs."""

    def __init__(self, model: str, device: str, dtype: str | None, shapes: Shapes) -> None:
        # the base + the rounds' blocks + the scattered decode's requests
        scattered = SCATTERED_ROWS * (2 * shapes.scattered_context + MAX_ROUNDS + 16 + BLOCK)
        super().__init__(model, device, dtype, 4 * shapes.base_length + 4096 + scattered)
        self.theirs = transformers_twin(self.ours)
        self.base = random_tokens(shapes.base_length, seed=0, vocab=self.config.vocab_size)
        self._check_same_model()
        self.ours.generate(self.base, max_new_tokens=1)  # publishes every full block of the base
        self._their_base = DynamicCache(config=self.theirs.config)
        self.theirs_forward(self.base[: shapes.max_cached], self._their_base)

    @torch.inference_mode()
    def theirs_logits(self, ids: list[int], cache: Cache | None = None) -> torch.Tensor:
        """transformers' prefill (continuing `cache` when given): the last position's logits."""
        out = self.theirs(torch.tensor([ids], device=self.device), cache=cache, logits_to_keep=1)
        return out.logits[0, -1]

    def theirs_forward(self, ids: list[int], cache: Cache | None = None) -> int:
        """transformers' prefill (continuing `cache` when given): the greedy next token, as ours returns."""
        return int(self.theirs_logits(ids, cache).argmax())

    def their_cache(self, length: int, room: int | None = None) -> Cache:
        """A new cache holding the K/V of base[:length] (copied from the base run, no recompute): a
        DynamicCache (concatenated to on every call), or with `room` a StaticCache of length + room slots
        allocated once and written in place (transformers' cache for compiled decoding; its write position
        is its own count of the tokens it holds, so `rewind` moves it back)."""
        config = self.theirs.config
        cache = DynamicCache(config=config) if room is None else StaticCache(config, length + room)
        for i, layer in enumerate(self._their_base.layers):
            cache.update(layer.keys[..., :length, :], layer.values[..., :length, :], i)
        return cache

    def _check_same_model(self) -> None:
        ids = self.base[:32]
        self.check_same_logits(self.ours.logits(ids)[-1], self.theirs_logits(ids), "a 32-token prefill")

    def check_same_logits(self, ours: torch.Tensor, theirs: torch.Tensor, what: str) -> None:
        """Both sides must compute the same function, else the ratios compare different work: logits within
        1e-3 in float32, else 5% of transformers' largest logit."""
        theirs = theirs.float()
        tolerance = 1e-3 if self.ours.dtype == torch.float32 else 0.05 * float(theirs.abs().max())
        diff = float((ours.float() - theirs).abs().max())
        if diff > tolerance:
            raise RuntimeError(
                f"{what}: our logits differ from transformers' by {diff:.3g} (> {tolerance:.3g})"
            )


@contextmanager
def decode_request(ours: Engine, token_ids: list[int], room: int = 0) -> Iterator[Request]:
    """A running request of `token_ids` whose every token but the last is served from the prefix cache (which
    must hold them), its blocks covering `room` more positions: one `ModelRunner.run` of `(req, 1)` is then
    the engine's decode step at that context, reading the context in the pool. Its blocks are released
    after."""
    seq = SequenceState(list(token_ids))
    ours.blocks.admit(seq)
    context = len(token_ids) - 1
    assert seq.num_kv == context, f"{seq.num_kv} of {context} context tokens are cached"
    ours.blocks.grow(seq, len(token_ids) + room)
    try:
        yield Request("bench", seq, SamplingParams(1 + room), 0.0)
    finally:
        ours.blocks.release(seq)


def memory_added(device: torch.device, fn: Callable[[], Any]) -> int:
    """Bytes `fn` adds at its peak over what the process held before: on CUDA the allocator's peak; on a CPU
    the resident set's high-water mark, after glibc returns its free memory (so that what `fn` allocates
    shows as new pages), which also counts pages of the pool `fn` writes for the first time."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: the high-water mark still bounds it
        pass
    before = resident_bytes()
    reset_peak_rss()
    fn()
    return peak_rss_bytes() - before


def resident_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def rewind(cache: Cache, length: int) -> None:
    """Drop the tokens a timed call appended to a transformers cache."""
    extra = int(cache.get_seq_length()) - length
    if extra:
        cache.crop(-extra)


def measure(
    benchmark: Any,
    pair: Solo,
    fn: Callable[[], Any],
    budget_s: float,
    setup: Callable[[], None] | None = None,
    min_rounds: int = 2,
    **info: Any,
) -> Any:
    """Time `fn` (device-synchronized) for about `budget_s`, at least `min_rounds` times; one untimed warm-up
    call sets the round count.

    `setup` runs before every call, untimed. `info` and the pair's device, dtype and model go to the JSON
    record (`extra_info`).
    """
    if setup is not None:
        setup()
    start = now(pair.device)
    fn()
    once = now(pair.device) - start
    rounds = max(min_rounds, min(MAX_ROUNDS, int(budget_s / max(once, 1e-9))))

    def timed() -> Any:
        out = fn()
        synchronize(pair.device)
        return out

    benchmark.extra_info.update(info | pair.info)
    result = benchmark.pedantic(timed, setup=setup, rounds=rounds, iterations=1)
    benchmark.extra_info["load_1min"] = os.getloadavg()[0]  # others' work on the machine skews timings
    return result


def alternating_times(
    sides: dict[str, Callable[[], object]], rounds: int, device: torch.device
) -> dict[str, list[float]]:
    """Seconds of each call of each side over `rounds` rounds, every side once a round, device-synchronized;
    the sides' order reverses every other round (two sides: which goes first alternates)."""
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            start = now(device)
            sides[name]()
            times[name].append(now(device) - start)
    return times


def measure_alternating(
    benchmark: Any,
    pair: Solo,
    sides: dict[str, Callable[[], Any]],
    budget_s: float,
    rounds: int,
    setup: Callable[[], None] | None = None,
    **info: Any,
) -> list[float]:
    """One round runs every side back to back, in each order in turn round by round (two sides: which goes
    first alternating), so that a neighbour's burst on a shared machine meets each side in each place. The
    record keeps the median of the per-round ratios first side / second side and their min-max (`ratio`,
    `ratio_min`, `ratio_max`, `pairs`), and the first side's against every further side under that side's
    name (`ratios`); the timed round is all the calls. `setup` runs before every round, untimed.
    Returns the per-round ratios first side / second side."""
    names = list(sides)
    first, second, *others = names
    orders, times = itertools.cycle(itertools.permutations(names)), []

    def every() -> None:
        took = {}
        for name in next(orders):
            start = now(pair.device)
            sides[name]()
            synchronize(pair.device)
            took[name] = now(pair.device) - start
        times.append(took)

    measure(benchmark, pair, every, budget_s, setup, min_rounds=rounds, impl="/".join(names), **info)

    def against(other: str) -> list[float]:
        return [t[first] / t[other] for t in times[1:]]  # the first round is the untimed warm-up

    def spread(ratios: list[float]) -> dict[str, float]:
        return dict(ratio=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios))

    ratios = against(second)
    benchmark.extra_info.update(spread(ratios), pairs=len(ratios))
    if others:
        benchmark.extra_info["ratios"] = {name: spread(against(name)) for name in others}
    return ratios


def cpu_benchmark(
    benchmark: Any, fn: Callable[[], Any], budget_s: float, group: str
) -> tuple[list[Any], list[float]]:
    """Time a device-free `fn` by process CPU time (on a shared machine, wall time measures the others' work
    too): one untimed warm-up fixes the round count (the budget over one call, 2 to 5), then the rounds.
    Returns the timed calls' results and CPU seconds."""
    results: list[Any] = []
    cpu_s: list[float] = []

    def call() -> None:
        start = time.process_time()
        results.append(fn())
        cpu_s.append(time.process_time() - start)

    start = time.perf_counter()
    call()
    benchmark.group = group
    benchmark.pedantic(
        call, rounds=max(2, min(5, int(budget_s / (time.perf_counter() - start)))), iterations=1
    )
    return results[1:], cpu_s[1:]
