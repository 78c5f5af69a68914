"""The status-bar cost model's inputs measured on the real engine, as `bench statusbar` measures them
(`engine/bench/workloads/costs.py`): the marginal seconds per computed token `c` (the slope of cold TTFT
between NEW and 2 x NEW tokens) must be positive, and a cached token's cost relative to it, alpha, finite.
A timing, so it lives here; the unit tests check the fit on modelled TTFTs, without a clock. Run it on a
quiet machine:

    python -m pytest benchmarks/test_token_costs.py --devices cpu -s
"""

from __future__ import annotations

import math
import os

import pytest

from benchmarks.harness import Shapes, Solo
from engine.bench.workloads.costs import measure_token_costs
from engine.model.layers import WEIGHT_FIRST_ROWS

# Both prefills above the rows a CPU's `linear` takes weight-first: a slope across that switch is not c
NEW = WEIGHT_FIRST_ROWS + 32
REPEATS = 5


def test_a_computed_token_costs_time(pytestconfig: pytest.Config, shapes: Shapes, device: str) -> None:
    context = shapes.batch_context
    options = pytestconfig.getoption
    solo = Solo(options("model"), device, options("dtype"), cache_tokens=4 * (context + 2 * NEW))
    costs = measure_token_costs(solo.ours, context, NEW, REPEATS)
    print(
        f"\n{solo.info['model']} on {device} ({solo.info['dtype']}): c = {1000 * costs.c:.3f} ms per computed "
        f"token (cold {NEW} -> {2 * NEW} tokens), alpha = {costs.alpha:.3f} "
        f"[{min(costs.alphas):.3f}-{max(costs.alphas):.3f}] under {context} cached, {REPEATS} repeats; "
        f"1-minute load {os.getloadavg()[0]:.2f}"
    )
    assert costs.c > 0, f"the slope of cold TTFT over {NEW} -> {2 * NEW} tokens is {costs.c:.3g} s a token"
    assert all(math.isfinite(a) for a in costs.alphas), costs.alphas
