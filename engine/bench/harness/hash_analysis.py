"""`bench replay --analyze` of hash-id traces (no text): the requests through the engine's
`BlockManager` at the given capacity (`--cache-tokens`; default: what holds every block of the trace,
nothing evicted), with `--pressure` the hit rate against capacity per eviction policy. No model and no
tokenizer: the trace's hash ids are the blocks (`engine.traces.hash_replay`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.bench.reporting.replay_plots import plot_pressure
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.results import provenance, run_environment, write_csv, write_json
from engine.bench.reporting.run_folder import check_out, named_run_dir, slug, written
from engine.errors import TraceError
from engine.traces import hash_replay
from engine.traces.mooncake import HashTrace
from engine.traces.pressure import PressurePoint

SUMMARY_COLUMNS = [
    "trace",
    "requests",
    "block_size",
    "cache_tokens",
    "prompt_tokens",
    "cached_share",
    "evictions",
]
PRESSURE_COLUMNS = ["policy", "cache_tokens", "hit_rate", "evictions"]


def run_hash_analysis(args: argparse.Namespace, traces: list[tuple[Path, HashTrace]]) -> int:
    if args.rules is not None:
        raise TraceError(
            "hash-id traces hold no text: only the local cache (and --pressure) applies, not --rules"
        )
    check_out(args)
    summary, rows, pressure = [], [], []
    for path, trace in traces:
        sizes = hash_replay.capacities(trace, args.cache_tokens)
        top = args.cache_tokens // trace.block_size * trace.block_size if args.cache_tokens else sizes[-1]
        served = hash_replay.replay(trace, max(top // trace.block_size, 1))
        prompt = sum(r.input_length for r in trace.requests)
        summary.append(
            {
                "trace": str(path),
                "requests": len(trace.requests),
                "block_size": trace.block_size,
                "cache_tokens": top,
                "prompt_tokens": prompt,
                "cached_share": sum(s.cached_tokens for s in served) / prompt,
                "evictions": sum(s.evictions for s in served),
            }
        )
        rows += [
            {
                "trace": str(path),
                "time_s": r.time_s,
                "input_length": r.input_length,
                "output_length": r.output_length,
            }
            | {
                "cached_tokens": s.cached_tokens,
                "cached_share": s.cached_tokens / r.input_length if r.input_length else None,
            }
            for r, s in zip(trace.requests, served, strict=True)
        ]
        if args.pressure:
            pressure += [(str(path), p) for p in hash_replay.sweep(trace, sizes)]
    out = named_run_dir(args, f"replay-analyze-{traces[0][0].stem}-hash-ids")
    _write(out, args, summary, rows, pressure)
    print(table(summary, SUMMARY_COLUMNS))
    if pressure:
        print(table([{"trace": t} | vars(p) for t, p in pressure], ["trace", *PRESSURE_COLUMNS]))
    return written(out)


def _write(
    out: Path,
    args: argparse.Namespace,
    summary: list[dict],
    rows: list[dict],
    pressure: list[tuple[str, PressurePoint]],
) -> None:
    env = run_environment({}, "replay --analyze (hash ids)", args)
    points = [{"trace": t} | vars(p) for t, p in pressure]
    write_json(
        out / "analysis.json", {"environment": env, "summary": summary, "pressure": points, "requests": rows}
    )
    write_csv(out / "requests.csv", rows)
    write_csv(out / "pressure.csv", points)
    lines = [
        "# Hash-id trace analysis",
        "",
        *provenance(env),
        "",
        "Each hash id is one block of the trace; the engine's block manager serves them one request at a time "
        "(the block holding a prompt's last token recomputed, output blocks held while decoding, not published).",
        "",
        table(summary, SUMMARY_COLUMNS),
    ]
    figures: list[str] = []
    for name in dict.fromkeys(t for t, _ in pressure):  # each trace by its path: two of one name are two
        mine = [p for t, p in pressure if t == name]
        figure = f"pressure-{slug(Path(name).stem)}.png"
        if figure in figures:  # two traces of one file name, in two folders
            figure = f"pressure-{slug(Path(name).stem)}-{len(figures)}.png"
        figures.append(figure)
        plot_pressure(mine, out / figure, f"Hit rate against capacity: {Path(name).name}")
        lines += ["", f"## {name} under pressure", "", table([vars(p) for p in mine], PRESSURE_COLUMNS)]
        lines += ["", f"![hit rate against capacity]({figure})"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
