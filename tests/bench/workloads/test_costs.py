"""The cost model's measured inputs are marginal: with a TTFT that has a fixed part per forward, the measured c
and alpha are the per-token costs, not TTFT / tokens. No clock: the TTFTs come from a cost model, over a
simulated prefix cache and over the real engine's (its own usage counts), so the fit's answer is known."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest

import engine
from engine.bench.workloads.costs import measure_token_costs

FIXED, C, ALPHA, BLOCK = 0.050, 0.002, 0.2, 16  # seconds per forward, per computed token; cached / computed


def modelled_ttft(computed: int, cached: int) -> float:
    return FIXED + C * computed + ALPHA * C * cached


class FixedCostEngine:
    """TTFT from `modelled_ttft`, with a block-aligned prefix cache per salt."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(vocab_size=1000)
        self.blocks = SimpleNamespace(block_size=BLOCK)
        self.published: dict[str, list[int]] = {}
        self.order: list[str] = []

    def generate(self, ids: list[int], max_new_tokens: int, cache: bool = True, cache_salt: str = ""):
        cached = 0
        if cache:
            before = self.published.get(cache_salt, [])
            common = next(
                (i for i, (a, b) in enumerate(zip(ids, before, strict=False)) if a != b),
                min(len(ids), len(before)),
            )
            cached = min(common, len(ids) - 1) // BLOCK * BLOCK
            self.published[cache_salt] = list(ids)
        self.order.append("warm" if cache else "cold")
        return SimpleNamespace(
            timing=SimpleNamespace(ttft_s=modelled_ttft(len(ids) - cached, cached)),
            usage=SimpleNamespace(cached_tokens=cached),
        )

    def reset_cache(self) -> None:
        self.published.clear()


class ModelledClock:
    """A real engine (its prefix cache, cache salts, resets and usage counts), whose generations report the
    modelled TTFT of what they computed and what they read from the cache instead of the clock's."""

    def __init__(self, inner: engine.Engine) -> None:
        self.inner, self.config, self.blocks = inner, inner.config, inner.blocks
        self.usages: list[engine.Usage] = []

    def generate(self, ids: list[int], **options):  # type: ignore[no-untyped-def]
        gen = self.inner.generate(ids, **options)
        self.usages.append(gen.usage)
        ttft = modelled_ttft(gen.usage.computed_tokens, gen.usage.cached_tokens)
        return dataclasses.replace(gen, timing=dataclasses.replace(gen.timing, ttft_s=ttft))

    def reset_cache(self) -> None:
        self.inner.reset_cache()


def test_c_and_alpha_are_marginal_costs_not_averages() -> None:
    fake = FixedCostEngine()
    costs = measure_token_costs(fake, context=200, new=64, repeats=4)  # 192 tokens reused, 8 recomputed
    assert math.isclose(costs.c, C, rel_tol=1e-9)  # TTFT / new tokens would be C + FIXED / 64 = 14.7 x C
    assert all(math.isclose(a, ALPHA, rel_tol=1e-9) for a in costs.alphas)


@pytest.mark.parametrize("context", [256, 200])  # block-aligned; 192 reused and 8 recomputed
def test_the_real_engines_cache_gives_the_arms_the_tokens_the_fit_assumes(tiny_dir, context: int) -> None:
    """On the engine itself: the cold arms compute all their tokens, the warm arm finds the context's whole
    blocks cached under its salt (published by the call before it) and computes the rest, and the cache is
    empty again for the next repeat, so the fit recovers the modelled costs exactly."""
    inner = engine.load(str(tiny_dir("qwen2")), device="cpu", block_size=BLOCK, cache_tokens=1 << 12)
    clock = ModelledClock(inner)
    costs = measure_token_costs(clock, context=context, new=32, repeats=3)
    assert math.isclose(costs.c, C, rel_tol=1e-9) and len(costs.alphas) == 3
    assert all(math.isclose(a, ALPHA, rel_tol=1e-9) for a in costs.alphas)
    reused = context // BLOCK * BLOCK
    cold, warm = [0, 0], [0, reused]  # (alone, double) computed whole; (publish, warm) after a reset
    assert [u.cached_tokens for u in clock.usages] == [0, *cold, *warm, *warm, *cold, *cold, *warm]
    computed = {u.computed_tokens for u in clock.usages}
    assert computed == {32, 64, context, context + 32 - reused}


def test_the_arms_order_alternates_from_repeat_to_repeat() -> None:
    fake = FixedCostEngine()
    measure_token_costs(fake, context=64, new=32, repeats=4)
    # after the warm-up: per repeat two cold arms and the warm arm (a publishing call, then the timed one)
    repeats = [fake.order[1 + 4 * i : 5 + 4 * i] for i in range(4)]
    assert repeats[0] == repeats[2] == ["cold", "cold", "warm", "warm"]
    assert repeats[1] == repeats[3] == ["warm", "warm", "cold", "cold"]
