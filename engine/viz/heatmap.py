"""Token × token attention heatmaps, from `AttentionMaps`.

One map: a large panel with token labels on both axes (subsampled past MAX_TICKS), region boundaries drawn
and named (top and right), and a colour bar named after its transform. Several maps: a grid of small
panels (layer × head, or one panel per layer with heads aggregated) on one colour scale. Keys after a
query row (the causal upper triangle) are masked, never drawn as zero. Rows may be any subset of
positions, so the last rows of a long prompt make a wide, short "last rows" view.
"""

from __future__ import annotations

import bisect
import functools
import math
from pathlib import Path

import matplotlib
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.ft2font import FT2Font  # noqa: E402

from engine.inspect.attention import AttentionMaps  # noqa: E402
from engine.prompts.regions import Region  # noqa: E402
from engine.viz.transforms import TRANSFORMS  # noqa: E402

MAX_TICKS = 60


def head_view(maps: AttentionMaps, head: str) -> tuple[torch.Tensor, list[str]]:
    """[layers, panels, rows, length] and panel names: every captured head ("all"), or their mean or max."""
    if head == "all":
        return maps.probs, [f"head {h}" for h in maps.heads]
    if head in ("mean", "max"):
        values = maps.probs.mean(1, keepdim=True) if head == "mean" else maps.probs.amax(1, keepdim=True)
        return values, [f"{head} of {len(maps.heads)} heads"]
    raise ValueError(f"head view {head!r}")


def transformed(maps: AttentionMaps, values: torch.Tensor, transform: str) -> torch.Tensor:
    """The transform applied, then NaN on every key after its row."""
    out = TRANSFORMS[transform][0](values)
    after = torch.arange(values.shape[-1])[None, :] > torch.tensor(maps.rows)[:, None]
    return out.masked_fill(after, float("nan"))


def draw(maps: AttentionMaps, head: str, transform: str, out: Path, title: str) -> None:
    """One large panel when a single layer and head view is asked for, else a grid of small ones."""
    values, names = head_view(maps, head)
    data = transformed(maps, values, transform)
    vmax = float(torch.nan_to_num(data, nan=0.0).max()) or 1.0
    cmap = plt.get_cmap("magma").with_extremes(bad="#e8e8e8")  # masked keys: light grey
    n_layers, n_panels = data.shape[:2]
    if n_layers * n_panels == 1:
        rows, length = data.shape[2:]
        fig, ax = plt.subplots(
            figsize=(
                min(22, max(7, 3 + 0.13 * min(length, 170))),
                min(22, max(3.5, 2.5 + 0.13 * min(rows, 170))),
            ),
            layout="constrained",  # the colour bar goes right of the region names, whatever their length
        )
        im = ax.imshow(
            data[0, 0].numpy(), cmap=cmap, vmin=0, vmax=vmax, aspect="auto", interpolation="nearest"
        )
        _label_tokens(ax, maps)
        _draw_regions(ax, maps, names=True)
        ax.set_title(f"{title}, layer {maps.layers[0]}, {names[0]}")
        axes = [ax]
    else:
        grid = [(layer, p) for layer in range(n_layers) for p in range(n_panels)]
        cols = n_panels if n_panels > 1 else math.ceil(math.sqrt(n_layers))
        nrows = math.ceil(len(grid) / cols)
        height = 1.6 * nrows + 1
        fig, panel_axes = plt.subplots(nrows, cols, figsize=(1.6 * cols + 1.5, height), squeeze=False)
        fig.subplots_adjust(top=1 - 0.7 / height, bottom=0.2 / height, hspace=0.25, wspace=0.1)
        axes = list(panel_axes.ravel())
        for ax in axes[len(grid) :]:
            ax.axis("off")
        for ax, (layer, p) in zip(axes, grid, strict=False):
            im = ax.imshow(
                data[layer, p].numpy(), cmap=cmap, vmin=0, vmax=vmax, aspect="auto", interpolation="nearest"
            )
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(
                f"L{maps.layers[layer]} {names[p] if n_panels > 1 else ''}".strip(), fontsize=7, pad=2
            )
            _draw_regions(ax, maps, names=False)
        fig.suptitle(
            f"{title} ({names[0] if n_panels == 1 else 'layer × head'}; regions: "
            f"{', '.join(maps.region_labels)})",
            fontsize=9,
        )
        axes = axes[: len(grid)]
    fig.colorbar(im, ax=axes, label=TRANSFORMS[transform][1], fraction=0.03, pad=0.03)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110 if len(axes) < 50 else 72, bbox_inches="tight")  # big grids: smaller files
    plt.close(fig)


@functools.cache
def _glyphs() -> frozenset[int]:
    """The code points the default matplotlib font can draw (DejaVu Sans: Latin, Greek, Cyrillic, symbols,
    some emoji; no CJK)."""
    return frozenset(FT2Font(font_manager.findfont(font_manager.FontProperties())).get_charmap())


def drawable(label: str) -> str:
    """`label` with each character the font has no glyph for written as an escape (你 -> \\u4f60), so that
    a label is never a row of empty boxes and matplotlib warns of no missing glyph."""
    return "".join(
        c if ord(c) in _glyphs() or c.isspace() else c.encode("unicode_escape").decode() for c in label
    )


def _label_tokens(ax: plt.Axes, maps: AttentionMaps) -> None:
    """Token labels on both axes; past MAX_TICKS every step-th token, prefixed with its position."""
    for axis, positions in ((ax.xaxis, list(range(len(maps.tokens)))), (ax.yaxis, maps.rows)):
        step = math.ceil(len(positions) / MAX_TICKS)
        shown = range(0, len(positions), step)
        labels = [
            drawable(
                maps.tokens[positions[i]] if step == 1 else f"{positions[i]} {maps.tokens[positions[i]]}"
            )
            for i in shown
        ]
        axis.set_ticks(list(shown), labels, fontsize=6)
    plt.setp(ax.get_xticklabels(), rotation=90)


def _draw_regions(ax: plt.Axes, maps: AttentionMaps, names: bool) -> None:
    """Lines where a region starts, across keys and across the chosen rows; names on the top and right."""
    starts = [r.start for r in maps.regions]
    which = [maps.regions[bisect.bisect_right(starts, row) - 1] for row in maps.rows]
    row_runs: list[tuple[Region, int, int]] = []  # (region, first row index, last row index)
    for i, region in enumerate(which):
        if row_runs and row_runs[-1][0] == region:
            row_runs[-1] = (region, row_runs[-1][1], i)
        else:
            row_runs.append((region, i, i))
    style = {"color": "#4fc3f7", "linewidth": 0.8 if names else 0.4}
    for region in maps.regions[1:]:
        ax.axvline(region.start - 0.5, **style)
    for _, first, _ in row_runs[1:]:
        ax.axhline(first - 0.5, **style)
    if not names:
        return
    top = ax.secondary_xaxis("top")
    top.set_xticks(
        [(r.start + r.end - 1) / 2 for r in maps.regions], [r.label for r in maps.regions], fontsize=7
    )
    plt.setp(top.get_xticklabels(), rotation=40, ha="left")
    right = ax.secondary_yaxis("right")
    right.set_yticks([(a + b) / 2 for _, a, b in row_runs], [r.label for r, _, _ in row_runs], fontsize=7)
