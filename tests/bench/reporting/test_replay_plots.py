"""The status-bar sweep plot: one colour and one legend entry per number of updates N, whatever N were swept."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.colors import to_hex

from engine.bench.reporting import replay_plots


def sweep_row(status: int, updates: int, predicted: float, measured: float) -> dict:
    return {
        "status_tokens": status,
        "between_tokens": 64,
        "updates": updates,
        "passes": 6,
        "predicted_ms": predicted,
        "predicted_ms_min": predicted - 10,
        "predicted_ms_max": predicted + 10,
        "measured_ms": measured,
        "measured_ms_min": measured - 20,
        "measured_ms_max": measured + 20,
    }


def test_each_swept_n_has_its_own_colour_and_one_legend_entry(tmp_path, monkeypatch) -> None:
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to read it back
    rows = [sweep_row(s, n, 100.0 * n - s, 80.0 * n - s) for s in (128, 320) for n in (2, 4, 10)]
    replay_plots.plot_sweep(rows, tmp_path / "sweep.png", "title")
    assert (tmp_path / "sweep.png").stat().st_size > 0
    handles, labels = figures[0].axes[0].get_legend_handles_labels()
    assert labels == ["measured = predicted", "N = 2 updates", "N = 4 updates", "N = 10 updates"]
    colours = [to_hex(h[0].get_color()) for h in handles[1:]]  # an errorbar's handle: (line, caps, bars)
    assert len(set(colours)) == 3
