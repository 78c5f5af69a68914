"""Pictures of attention: token × token heatmaps (`heatmap`), and per-layer curves and layer × head
matrices of bench results (`charts`). All drawn with matplotlib's Agg backend (each drawing module sets it
before pyplot loads), straight to PNG files. `python -m engine.viz heatmap ...` is the command-line entry
point: its flags (`flags`) load neither torch nor matplotlib; the run (`command`) is imported once they are
parsed."""
