"""Pictures of attention: token × token heatmaps (`heatmap`), and per-layer curves and layer × head
matrices of bench results (`charts`). All drawn with matplotlib's Agg backend, straight to PNG files.
`python -m engine.viz heatmap ...` is the command-line entry point."""

import matplotlib

matplotlib.use("Agg")
