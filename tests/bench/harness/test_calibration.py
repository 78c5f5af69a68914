"""`bench cluster --calibrate` end to end on a tiny random Qwen2, its grid shrunk: every prefill point is
measured with exactly the cached tokens it asks for (the calibration checks it), the fit is saved as
cost.json with its measurements, non-negative, and `--cost cost.json` reproduces the calibrated run."""

from __future__ import annotations

import json

import pytest

from engine.bench.__main__ import main
from engine.bench.harness import calibration
from engine.cluster.costs import DECODE_TERMS, PREFILL_TERMS, load_cost


def test_calibrate_measures_fits_saves_and_reloads(tiny_dir, tmp_path, monkeypatch) -> None:
    for name, value in (("NEW", (16, 48)), ("CACHED", (0, 32)), ("BATCHES", (1, 2)), ("CONTEXTS", (32,))):
        monkeypatch.setattr(calibration, name, value)
    monkeypatch.setattr(calibration, "STEPS", 4)
    monkeypatch.setattr(calibration, "REPEATS", 1)
    model = str(tiny_dir("qwen2", tokenizer=True))
    base = ["cluster", "example:mooncake", "--replicas", "1", "2", "--routers", "round-robin"]
    base += ["--model", model, "--device", "cpu"]
    out = tmp_path / "calibrated"
    assert main([*base, "--calibrate", "--out", str(out)]) == 0
    cost = load_cost(str(out / "cost.json"))
    measured = cost.source["measured"]
    points = {(p["new"], p["cached"]) for p in measured["prefills"]}
    assert points == {
        (16, 0),
        (48, 0),
        (16, 32),
        (48, 32),
    }  # block size 16: the cached prefix is whole blocks
    assert {(s["batch"], s["context"]) for s in measured["decode_steps"]} == {(1, 34), (2, 68)}
    assert all(p["seconds"] > 0 for p in measured["prefills"] + measured["decode_steps"])
    assert all(getattr(cost, t) >= 0 for t in PREFILL_TERMS + DECODE_TERMS) and cost.host_bytes_per_s > 0
    assert cost.source["measured_on"]["device"] == "cpu" and cost.name.endswith("-cpu")
    env = json.loads((out / "cluster.json").read_text())["environment"]
    assert env["cost"]["p1"] == pytest.approx(cost.p1)
    again = tmp_path / "again"
    assert main([*base, "--cost", str(out / "cost.json"), "--out", str(again)]) == 0
    runs = [json.loads((d / "cluster.json").read_text())["runs"] for d in (out, again)]
    assert [r["ttft_p99_s"] for r in runs[0]] == [r["ttft_p99_s"] for r in runs[1]]
