"""Composing a prompt from a precomputed block: relocate + splice it (only the fresh tokens around it are
computed) against recomputing the whole prompt. TTFT at 1k, 4k and 8k tokens; the FLOPs of what each arm
computes go to the record (splice: O(L) copying and rotating, plus the fresh tokens over L keys)."""

from __future__ import annotations

import pytest

from benchmarks.harness import Pair, Shapes, measure
from engine.approx.assembly import Compute, assemble
from engine.approx.plans import plan_splice
from engine.approx.snapshot import snapshot
from engine.inspect.flops import forward_flops

FRESH = 16  # fresh tokens before and after the block


@pytest.mark.parametrize("total", [1024, 4096, 8192])
@pytest.mark.parametrize("arm", ["splice", "recompute"])
def test_splice_vs_recompute(benchmark, pair: Pair, shapes: Shapes, total: int, arm: str) -> None:
    block = pair.tokens(total - 2 * FRESH, seed=7)
    snap = snapshot(pair.ours, block)  # computed once at position 0, untimed: what a composing cache holds
    ids, plan = plan_splice([pair.tokens(FRESH, 8), (snap, 0, len(block)), pair.tokens(FRESH, 9)])
    if arm == "recompute":
        plan = [Compute(total)]
    benchmark.group = f"splice {total} {pair.device.type}"
    cfg = pair.config
    flops = (
        forward_flops(cfg, 0, total)
        if arm == "recompute"
        else (forward_flops(cfg, 0, FRESH) + forward_flops(cfg, total - FRESH, total))
    )
    got = measure(
        benchmark,
        pair,
        lambda: assemble(pair.ours, ids, plan),
        shapes.budget_s,
        case="splice",
        impl="ours",
        arm=arm,
        tokens=total,
        computed=total if arm == "recompute" else 2 * FRESH,
        flops=flops,
    )
    assert got.computed_tokens == (total if arm == "recompute" else 2 * FRESH)
    assert got.relocated_tokens == (0 if arm == "recompute" else len(block))
