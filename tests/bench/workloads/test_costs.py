"""The cost model's measured inputs are marginal: on a synthetic engine whose TTFT has a fixed part per
forward, the measured c and alpha are the per-token costs, not TTFT / tokens."""

from __future__ import annotations

import math
from types import SimpleNamespace

from engine.bench.workloads.costs import measure_token_costs

FIXED, C, ALPHA, BLOCK = 0.050, 0.002, 0.2, 16  # seconds per forward, per computed token; cached / computed


class FixedCostEngine:
    """TTFT = FIXED + C x computed + ALPHA x C x cached, with a block-aligned prefix cache per salt."""

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
        ttft = FIXED + C * (len(ids) - cached) + ALPHA * C * cached
        return SimpleNamespace(
            timing=SimpleNamespace(ttft_s=ttft), usage=SimpleNamespace(cached_tokens=cached)
        )

    def reset_cache(self) -> None:
        self.published.clear()


def test_c_and_alpha_are_marginal_costs_not_averages() -> None:
    fake = FixedCostEngine()
    costs = measure_token_costs(fake, context=200, new=64, repeats=4)  # 192 tokens reused, 8 recomputed
    assert math.isclose(costs.c, C, rel_tol=1e-9)  # TTFT / new tokens would be C + FIXED / 64 = 14.7 x C
    assert all(math.isclose(a, ALPHA, rel_tol=1e-9) for a in costs.alphas)


def test_the_arms_order_alternates_from_repeat_to_repeat() -> None:
    fake = FixedCostEngine()
    measure_token_costs(fake, context=64, new=32, repeats=4)
    # after the warm-up: per repeat two cold arms and the warm arm (a publishing call, then the timed one)
    repeats = [fake.order[1 + 4 * i : 5 + 4 * i] for i in range(4)]
    assert repeats[0] == repeats[2] == ["cold", "cold", "warm", "warm"]
    assert repeats[1] == repeats[3] == ["warm", "warm", "cold", "cold"]
