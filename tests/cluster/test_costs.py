"""The cost model: the fit recovers known coefficients from synthetic points and never goes negative; the
shipped H100 figures give the roofline's numbers; bad cost files are refused by name."""

from __future__ import annotations

import json
import random

import pytest

from engine.cluster.costs import fit, from_figures, load_cost, nonnegative_fit
from engine.errors import InvalidArgumentError


def test_fit_recovers_the_coefficients_of_synthetic_points() -> None:
    rng = random.Random(0)
    p, d = (0.004, 2e-4, 3e-8), (0.01, 0.002, 1e-6)
    prefills = [
        (n, c, (p[0] + p[1] * n + p[2] * n * (c + n / 2)) * (1 + rng.uniform(-0.01, 0.01)))
        for n in (64, 256, 1024)
        for c in (0, 512, 2048)
    ]
    steps = [
        (b, x, (d[0] + d[1] * b + d[2] * x) * (1 + rng.uniform(-0.01, 0.01)))
        for b in (1, 4, 16)
        for x in (512, 8192)
    ]
    model = fit("toy", prefills, steps, 1024, 1e9, {})
    assert (model.p0, model.p1, model.p2) == pytest.approx(p, rel=0.1)
    assert (model.d0, model.d1, model.d2) == pytest.approx(d, rel=0.1)
    assert model.source["measured"]["prefills"][0] == {"new": 64, "cached": 0, "seconds": prefills[0][2]}


def test_a_term_the_points_do_not_support_is_zero_not_negative() -> None:
    rows = [[1.0, x] for x in (1, 2, 3, 4)]
    assert nonnegative_fit(rows, [5.0, 4.0, 3.0, 2.0])[1] == 0.0  # falling: the slope clamps to 0


def test_the_shipped_h100_file_is_its_figures_roofline(tmp_path) -> None:
    model = load_cost("h100-llama-3.1-8b")
    figures = model.source["figures"]
    flops = figures["accelerator"]["peak_flops"] * figures["efficiency"]["compute"]
    assert model.p1 == pytest.approx(2 * 8.03e9 / flops)
    assert model.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # 128 KiB
    assert 15_000 < 8192 / model.prefill(8192, 0) < 40_000  # tokens/s of a cold 8k prefill
    saved = tmp_path / "fit.json"
    model.save(saved)
    assert load_cost(str(saved)).prefill(100, 50) == model.prefill(100, 50)


@pytest.mark.parametrize(
    "content, message",
    [
        ("[1]", "JSON object"),
        ('{"name": "x"}', "missing"),
        ("{", "not a JSON cost file"),
        ('{"figures": {}}', "figures"),
    ],
)
def test_bad_cost_files_are_refused(tmp_path, content: str, message: str) -> None:
    bad = tmp_path / "cost.json"
    bad.write_text(content)
    with pytest.raises(InvalidArgumentError, match=message):
        load_cost(str(bad))
    with pytest.raises(InvalidArgumentError, match="shipped cost"):
        load_cost("a100-nothing")


def test_figures_need_every_field() -> None:
    with pytest.raises(InvalidArgumentError, match="model"):
        from_figures("x", json.loads('{"accelerator": {}, "efficiency": {}}'))
