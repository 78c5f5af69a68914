"""Approximate runs: medians, worst cases, rates and per-layer medians per variant, the sign-test verdict
on the per-prompt TTFT ratios, arms in rotated order with their position recorded, and hidden states
recorded outside the timed assembly."""

from __future__ import annotations

import pytest

import engine
from engine.approx.assembly import Compute, Reuse
from engine.approx.plans import plan_edit
from engine.approx.snapshot import snapshot
from engine.bench.harness import approx_runs
from engine.bench.harness.approx_runs import flat, run_arms, shown, summarize_variants
from engine.bench.reporting.replay_report import table
from tests.conftest import random_ids


def row(variant: str, cosine: float, kl: float, ttft: float, agree: bool) -> dict:
    return {
        "variant": variant,
        "ttft_ms": ttft,
        "ttft_ratio": ttft / 100,
        "computed_tokens": 10,
        "approximate_tokens": 90,
        "cached_tokens": 0,
        "forwards": 1,
        "forward_rows": [10],
        "centred_cosine": cosine,
        "kl": kl,
        "top1_agree": agree,
        "topk_agree": 0.9 if agree else 0.5,
        "continuation_agree": agree,
        "first_difference": 8 if agree else 0,
        "contended": not agree,
        "layer_cosine": [1.0, cosine],
    }


def test_summary_per_variant() -> None:
    rows = [
        row("splice", 0.99, 0.2, 30, True),
        row("splice", 0.97, 0.5, 10, False),
        row("splice", 0.98, 0.1, 20, True),
    ]
    (s,) = summarize_variants([*rows, row("unlisted", 1.0, 0.0, 1, True)], ["splice", "absent"])
    assert (s["variant"], s["n"], s["centred_cosine"], s["centred_cosine_min"], s["kl"], s["kl_max"]) == (
        "splice",
        3,
        0.98,
        0.97,
        0.2,
        0.5,
    )
    assert (s["ttft_ms"], s["ttft_ms_min"], s["ttft_ms_max"], s["ttft_ratio"]) == (20, 10, 30, 0.2)
    assert (s["ttft_ratio_min"], s["ttft_ratio_max"]) == (0.1, 0.3)
    assert (s["vs_exact"], s["p"]) == ("too few prompts", 0.25)  # 3 prompts, all faster: 2/8
    printed = table([s], ["variant", "ttft_ms", "ttft_ratio"]).splitlines()
    assert "ttft_ms [min–max]" in printed[0] and "20 [10–30]" in printed[2]
    assert "0.200 [0.100–0.300]" in printed[2]
    assert s["top1"] == s["greedy_same"] == 2 / 3 and s["topk"] == pytest.approx(2.3 / 3)
    assert s["layer_cosine"] == [1.0, 0.98] and s["contended"] == 1


def test_the_verdict_on_ttft_ratios_is_a_sign_test() -> None:
    faster = [row("edit", 1.0, 0.0, t, True) for t in (30, 31, 32, 33, 34, 35, 36)]
    noisy = [row("stale", 1.0, 0.0, t, True) for t in (90, 110, 95, 105, 99, 101, 98, 102)]
    exact = [row("exact", 1.0, 0.0, 100, True) for _ in range(7)]
    edit, stale, ref = summarize_variants([*faster, *noisy, *exact], ["edit", "stale", "exact"], "exact")
    assert (edit["vs_exact"], edit["p"]) == ("lower", 2 / 2**7)
    assert stale["vs_exact"] == "within noise" and stale["p"] == 1.0
    assert (ref["vs_exact"], ref["p"]) == ("reference", None)


def test_flat_and_shown_rows() -> None:
    r = row("edit", 0.999771, 0.0, 5, True) | {"forward_rows": [12, 3]}
    assert "layer_cosine" not in flat([r])[0] and flat([r])[0]["centred_cosine"] == 0.999771
    assert flat([r])[0]["forward_rows"] == "12+3" and r["forward_rows"] == [12, 3]
    assert shown([r])[0]["centred_cosine"] == "0.99977" and r["centred_cosine"] == 0.999771  # unchanged


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=1024)


def test_arms_rotate_record_their_position_and_time_no_hook(tiny, monkeypatch) -> None:
    ids = random_ids(24, 50)
    plans = {name: (ids, [Compute(24)]) for name in ("a", "b", "c")}
    hooks: list[int] = []  # forward hooks on the model's first layer at each assembly
    real = approx_runs.assemble

    def assemble(engine, *args, **kwargs):
        hooks.append(len(engine.model.layers[0]._forward_hooks))
        return real(engine, *args, **kwargs)

    monkeypatch.setattr(approx_runs, "assemble", assemble)
    positions = []
    for turn in range(3):
        runs, load = run_arms(tiny, plans, turn, max_new_tokens=2)
        positions.append([runs[n].position for n in ("a", "b", "c")])
        assert load.wall_s > 0 and load.cpu_s > 0 and load.threads >= 1
    assert positions == [[0, 1, 2], [2, 0, 1], [1, 2, 0]]
    assert hooks[0::2] == [0] * 9 and all(h > 0 for h in hooks[1::2])  # timed: no hook; then recorded
    run = runs["a"]
    assert len(run.hidden.last) == tiny.config.num_layers and len(run.tokens) == 2


def test_every_plan_is_one_forward_of_the_rows_it_computes(tiny) -> None:
    """An edit in place computes two separate spans between reused runs: still one forward, whose rows are
    exactly the computed tokens (counted off the model's first layer: see test_fidelity)."""
    old = random_ids(40, 51)
    new = old[:12] + [(t + 1) % 50 for t in old[12:15]] + old[15:30] + [(old[30] + 1) % 50] + old[31:]
    plan = plan_edit(snapshot(tiny, old), new)
    assert sum(isinstance(s, Reuse) for s in plan) >= 2 and sum(isinstance(s, Compute) for s in plan) >= 2
    run = approx_runs.run_plan(tiny, new, plan, max_new_tokens=2)
    assert run.forward_rows == [run.computed_tokens] and run.computed_tokens < len(new)
    scored = approx_runs.score(run, run, run_arms(tiny, {"a": (new, [Compute(40)])}, 0, 1)[1])
    assert (scored["forwards"], scored["forward_rows"]) == (1, [run.computed_tokens])
