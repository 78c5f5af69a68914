"""The fleet report's paired comparison: per load, the median of per-repeat p50 ratios with a sign test."""

from __future__ import annotations

from engine.bench.harness.fleet import FleetRequest, FleetRun
from engine.bench.reporting.fleet_report import paired_ttft


def fleet_run(arm: str, rate: float | None, repeat: int, ttft_s: float) -> FleetRun:
    request = FleetRequest(0, 1, 0.0, 100, 0, 4, ttft_s, 0.0, 0.01, ttft_s, 0)
    return FleetRun(arm, rate, repeat, 1.0, [request])


def test_arms_are_compared_repeat_by_repeat_with_a_sign_test() -> None:
    base = [1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.95]
    runs = [fleet_run("stable", 2.0, k, t) for k, t in enumerate(base)]
    runs += [fleet_run("stamped", 2.0, k, 3 * t) for k, t in enumerate(base)]  # 3x in every repeat
    runs += [fleet_run("stable", None, k, t) for k, t in enumerate(base[:2])]
    runs += [fleet_run("stamped", None, k, t * (1.1 if k else 0.9)) for k, t in enumerate(base[:2])]
    loaded, closed = paired_ttft(runs, ["stable", "stamped"])
    assert (
        loaded
        == "- `stamped` / `stable`, p50 TTFT at 2.0 req/s: 3.00x [3.00–3.00] over n = 7 repeats, "
        + ("p = 0.016: higher")
    )
    assert closed.startswith("- `stamped` / `stable`, p50 TTFT at closed loop: 1.00x [0.90–1.10] over n = 2")
    assert closed.endswith("too few repeats")
