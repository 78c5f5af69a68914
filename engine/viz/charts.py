"""Bench charts: curves over layers (or prompt lengths) and layer × head matrices, written to PNG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def line_chart(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    out: Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    hline: float | None = None,
    logx: bool = False,
) -> None:
    """One line per named (x, y) series; `hline` marks a threshold."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    styles = ["-", "--", ":", "-."]
    for i, (name, (xs, ys)) in enumerate(series.items()):
        ax.plot(xs, ys, styles[i // 10 % len(styles)], marker="o", markersize=3, label=name)
    if hline is not None:
        ax.axhline(hline, color="grey", linewidth=0.8, linestyle="--")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, out)


def grouped_bars(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    out: Path,
    *,
    title: str,
    ylabel: str,
    hline: float | None = None,
    hline_label: str = "",
) -> None:
    """One bar per named series in each group (series values in `groups` order), each bar labelled."""
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups) * max(1, len(series)) / 2), 4.5))
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, values, width, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    if hline is not None:
        ax.axhline(hline, color="grey", linewidth=0.8, linestyle="--", label=hline_label or None)
    ax.set_xticks(range(len(groups)), groups)
    ax.set(title=title, ylabel=ylabel)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    _save(fig, out)


def layer_head_matrices(matrices: Mapping[str, torch.Tensor], out: Path, *, title: str, label: str) -> None:
    """Side-by-side [layers, heads] heatmaps on one colour scale, layer 0 at the top."""
    matrix_grid(matrices, out, title=title, label=label, xlabel="head", ylabel="layer")


def matrix_grid(
    matrices: Mapping[str, torch.Tensor],
    out: Path,
    *,
    title: str,
    label: str,
    xlabel: str,
    ylabel: str,
    yticklabels: Sequence[str] | None = None,
) -> None:
    """Side-by-side [rows, columns] heatmaps on one colour scale, row 0 at the top; `yticklabels` names
    every row (default: every other row's index)."""
    vmax = max(float(m.max()) for m in matrices.values())
    tall = 7 if yticklabels is None else 2.6 + 0.45 * len(yticklabels)
    fig, axes = plt.subplots(1, len(matrices), figsize=(2.2 + 2.6 * len(matrices), tall), squeeze=False)
    for i, (ax, (name, m)) in enumerate(zip(axes[0], matrices.items(), strict=True)):
        im = ax.imshow(m.numpy(), aspect="auto", cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest")
        ax.set(title=name, xlabel=xlabel)
        ax.set_xticks(range(0, m.shape[1], 1 if m.shape[1] <= 16 else 4))
        if yticklabels is None:
            ax.set_yticks(range(0, m.shape[0], 2))
            ax.set_ylabel(ylabel)
        else:
            ax.set_yticks(range(len(yticklabels)), yticklabels if i == 0 else [""] * len(yticklabels))
            if i == 0:
                ax.set_ylabel(ylabel)
    fig.colorbar(im, ax=axes[0].tolist(), label=label)
    fig.suptitle(title, y=0.98 if yticklabels is None else 1.0)  # above the panels' own titles
    _save(fig, out)


def _save(fig: plt.Figure, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
