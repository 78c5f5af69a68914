"""Bench charts: curves over layers (or prompt lengths) and layer × head matrices, written to PNG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import torch


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


def layer_head_matrices(matrices: Mapping[str, torch.Tensor], out: Path, *, title: str, label: str) -> None:
    """Side-by-side [layers, heads] heatmaps on one colour scale, layer 0 at the top."""
    vmax = max(float(m.max()) for m in matrices.values())
    fig, axes = plt.subplots(1, len(matrices), figsize=(2.2 + 2.6 * len(matrices), 7), squeeze=False)
    for ax, (name, m) in zip(axes[0], matrices.items(), strict=True):
        im = ax.imshow(m.numpy(), aspect="auto", cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest")
        ax.set(title=name, xlabel="head", ylabel="layer")
        ax.set_xticks(range(m.shape[1]))
        ax.set_yticks(range(0, m.shape[0], 2))
    fig.colorbar(im, ax=axes[0].tolist(), label=label)
    fig.suptitle(title)
    _save(fig, out)


def _save(fig: plt.Figure, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
