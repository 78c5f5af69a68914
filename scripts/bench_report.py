"""A benchmark run as a markdown summary and one figure, written next to the JSON file.

python scripts/bench_report.py results/bench/cpu/baseline.json   # -> baseline.md, baseline.png
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import matplotlib.pyplot as plt
from bench_compare import BenchError, Run, load_run, measured, metrics


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1e3:.2f} ms" if value < 0.1 else f"{value:.3f} s"


def paired(run: Run, ratios: dict[str, float]) -> list[str]:
    """Every case both implementations ran: medians, ratio, our achieved GFLOP/s."""
    rows = []
    for (case, impl), ours in run.medians.items():
        theirs = run.medians.get((case, "transformers"))
        if impl == "ours" and theirs:
            flops = run.info[(case, impl)].get("flops")
            rate = f"{flops / ours / 1e9:.0f}" if flops else "–"
            rows.append(
                [case, seconds(ours), seconds(theirs), f"{ratios[f'ours/transformers {case}']:.3f}", rate]
            )
    return table(["case", "ours", "transformers", "ours / transformers", "ours GFLOP/s"], rows)


def cached(run: Run, ratios: dict[str, float]) -> list[str]:
    """Cached TTFT against the full prefill of S+V, ours and theirs, with the FLOP-model ideal and lookup share."""
    rows = []
    for (case, impl), ttft in run.medians.items():
        info = run.info[(case, impl)]
        if impl != "ours" or info["case"] != "cached":
            continue
        s, v = info["cached"], info["new"]
        full = run.medians.get((f"prefill {s + v}", "ours"))
        their_ttft, their_full = (run.medians.get((k, "transformers")) for k in (case, f"prefill {s + v}"))
        their_ratio = f"{their_ttft / their_full:.4f}" if their_ttft and their_full else "–"
        share = ratios.get(f"lookup share {s}+{v}")
        rows.append(
            [
                str(s),
                str(v),
                seconds(ttft),
                seconds(full),
                f"{ttft / full:.4f}" if full else "–",
                their_ratio,
                f"{info['ideal_ratio']:.4f}",
                f"{ratios.get(f'achieved/ideal {case}', 0):.2f}",
                seconds(run.medians.get((f"decode @{s}", "ours"))),
                seconds(run.medians.get((f"lookup {s + v}", "ours"))),
                seconds(info.get("lookup_s")),
                f"{share:.3%}" if share is not None else "–",
            ]
        )
    header = [
        "S",
        "V",
        "ours cached TTFT",
        "ours full S+V",
        "ours ratio",
        "transformers ratio",
        "FLOP ideal",
        "achieved / ideal",
        "ours decode step @S",
        "lookup (bench)",
        "lookup (in TTFT)",
        "lookup share",
    ]
    notes = [
        "",
        "A decode step at context S reads every weight once, as any prefill does: where it is a large part "
        "of the cached TTFT, the new tokens are bound by memory traffic, not by the FLOPs the ideal counts.",
    ]
    return table(header, rows) + notes


def decode_weights(run: Run) -> list[str]:
    """Our decode step against the weight stream it reads, alternating."""
    out: list[str] = []
    for key, info in run.info.items():
        if info["case"] == "decode_weights":  # the step against the weights it reads, alternating
            stream = run.medians[key] / (1 + info["ratio"])  # a timed round is one step and one stream
            out += [
                "",
                f"A decode step @{info['context']} over its weight stream alone (one row through every matrix it "
                f"multiplies by, {info['weight_bytes'] / 1e6:,.0f} MB): {info['ratio']:.3f} "
                f"[{info['ratio_min']:.3f}–{info['ratio_max']:.3f}] over {info['pairs']} alternating pairs; the "
                f"stream alone about {stream * 1e3:.0f} ms, {info['weight_bytes'] / stream / 1e9:.1f} GB/s.",
            ]
    return out


def warm_against_contiguous(run: Run) -> list[str]:
    """Our warm TTFT against transformers' forward of the same new tokens over each of its contiguous caches,
    interleaved: the median per-round ratio with its range, and the memory one warm request adds."""
    got, rows = measured(run), []
    warm_cases = [info for info in run.info.values() if info["case"] == "warm_contiguous"]
    for info in sorted(warm_cases, key=lambda info: info["cached"]):
        warm, pairs, share = (
            f"{info['cached']}+{info['new']}",
            str(info["pairs"]),
            f"{info['memory_share']:.3f}",
        )
        for name, m in got.items():
            against, _, at = name.partition(" ")  # warm/StaticCache 2048+64 (not warm/cold cached S+V)
            if against.startswith("warm/") and at == warm:
                spread = f" [{m.spread[0]:.3f}–{m.spread[1]:.3f}]" if m.spread else ""
                rows.append([warm, against.removeprefix("warm/"), f"{m.value:.3f}{spread}", pairs, share])
    header = ["cached + new", "their cache", "ours / theirs [min–max of rounds]", "rounds", "memory share"]
    return table(header, rows) if rows else []


def serve(run: Run) -> list[str]:
    """The streamed TTFT through the server against the direct engine call, alternating: each arm's median
    [min–max] over the rounds, the per-round ratio, and the target's verdict."""
    rows = [
        [
            str(info["tokens"]),
            *(
                f"{seconds(info[arm]['median'])} [{seconds(info[arm]['min'])}–{seconds(info[arm]['max'])}]"
                for arm in ("direct_s", "server_s")
            ),
            f"{info['ratio']['median']:.3f} [{info['ratio']['min']:.3f}–{info['ratio']['max']:.3f}]",
            str(info["ratio"]["n"]),
            f"{info['verdict']} ({info['target']})",
        ]
        for info in sorted(run.info.values(), key=lambda info: info.get("tokens", 0))
        if info["case"] == "serve_ttft"
    ]
    header = ["prompt tokens", "direct", "server", "server / direct [min–max of rounds]", "rounds", "target"]
    return table(header, rows) if rows else []


def alternating(run: Run) -> list[str]:
    """Cold prefill, ours and theirs alternating call by call: the median per-pair ratio with its range."""
    rows = [
        [
            str(info["tokens"]),
            f"{info['ratio']:.3f} [{info['ratio_min']:.3f}–{info['ratio_max']:.3f}]",
            str(info["pairs"]),
            seconds(run.medians[key]),
        ]
        for key, info in sorted(run.info.items(), key=lambda kv: kv[1].get("tokens", 0))
        if info["case"] == "prefill_alternating"
    ]
    header = ["tokens", "ours / transformers [min–max of pairs]", "pairs", "one pair (both sides)"]
    return table(header, rows) if rows else []


def batches(run: Run, ratios: dict[str, float]) -> list[str]:
    """N requests decoding together: output tokens/s and the gain over one; four prompts prefilled in one
    batch against one by one."""
    rows = [
        [
            str(info["batch"]),
            seconds(run.medians[key]),
            f"{info['output_tokens'] / run.medians[key]:.1f}",
            f"{1 / ratios.get('batch cost {batch} @{context}'.format(**info), 1.0):.2f}x",
        ]
        for key, info in sorted(run.info.items(), key=lambda kv: kv[1].get("batch", 0))
        if info["case"] == "decode_batch"
    ]
    out = table(["requests", "generate_many", "output tokens/s", "over one request"], rows) if rows else []
    prefill = [
        [str(info["tokens"]), f"{info['ratio']:.3f} [{info['ratio_min']:.3f}–{info['ratio_max']:.3f}]"]
        for key, info in sorted(run.info.items(), key=lambda kv: kv[1].get("tokens", 0))
        if info["case"] == "prefill_batch"
    ]
    if prefill:
        out += ["", *table(["tokens (4 prompts)", "batched / one by one [min–max of pairs]"], prefill)]
    return out


def splices(run: Run, ratios: dict[str, float]) -> list[str]:
    """A prompt composed of a relocated precomputed block and fresh tokens, against its full recompute."""
    rows = []
    for key, info in sorted(run.info.items(), key=lambda kv: kv[1].get("tokens", 0)):
        if info["case"] == "splice" and info["arm"] == "splice":
            n = info["tokens"]
            rows.append(
                [
                    str(n),
                    str(info["computed"]),
                    seconds(run.medians[key]),
                    seconds(run.medians.get((f"recompute {n}", "ours"))),
                    f"{ratios[f'splice/recompute {n}']:.3f}" if f"splice/recompute {n}" in ratios else "–",
                ]
            )
    header = ["tokens", "computed by the splice", "splice TTFT", "recompute TTFT", "splice / recompute"]
    return table(header, rows) if rows else []


def block_sizes(run: Run) -> list[str]:
    entries = sorted((i["block_size"], k) for k, i in run.info.items() if i["case"] == "block_size")
    if not entries:
        return []
    first = run.info[entries[0][1]]
    smallest = run.medians[entries[0][1]]
    rows = [
        [
            str(bs),
            str(run.info[k]["cached_tokens"]),
            str(run.info[k]["tokens"] - run.info[k]["cached_tokens"]),
            seconds(run.medians[k]),
            f"{run.medians[k] / smallest:.2f}",
        ]
        for bs, k in entries
    ]
    return [
        f"A {first['tokens']}-token prompt, then one that differs from token {first['diverge_at']} on "
        "(only whole blocks before the first difference are reused):",
        "",
        *table(
            ["block size", "cached tokens", "computed tokens", "TTFT", f"TTFT / block {entries[0][0]}"], rows
        ),
    ]


def replay(run: Run) -> list[str]:
    rows = []
    for key, info in run.info.items():
        if info["case"] == "replay":
            rows += [
                [
                    name,
                    str(info["prompt_tokens"][name]),
                    str(info["cached_tokens"][name]),
                    seconds(info["last_turn_ttft_s"][name]),
                ]
                for name in info["cached_tokens"]
            ]
            rows.append(
                [f"whole replay ({info['turns']} turns, both layouts)", "", "", seconds(run.medians[key])]
            )
    return table(["layout", "prompt tokens (last turn)", "cached tokens", "TTFT"], rows) if rows else []


def long_contexts(run: Run) -> list[str]:
    """The long-context cases (benchmarks/test_long_context.py): cold prefill TTFT, and warm (all but the last
    tokens cached) over cold, alternating; each with the process's peak RSS during the case."""
    rows = []
    for key, info in sorted(run.info.items(), key=lambda kv: (kv[1]["case"], kv[1].get("tokens", 0))):
        stats, rss = run.stats[key], f"{info.get('peak_rss_bytes', 0) / 2**30:.2f} GiB"
        if info["case"] == "long_prefill":
            spread = f"{seconds(stats['median'])} [{seconds(stats['min'])}–{seconds(stats['max'])}]"
            rows.append([f"cold prefill of {info['tokens']:,} tokens", spread, str(stats["rounds"]), rss])
        if info["case"] == "long_warm_cold":
            ratio = f"{info['ratio']:.3f} [{info['ratio_min']:.3f}–{info['ratio_max']:.3f}] warm / cold"
            case = f"{info['cached']:,} cached + {info['new']:,} new against cold"
            rows.append([case, ratio, str(info["pairs"]), rss])
    return table(["case", "median [min–max]", "n", "peak RSS"], rows) if rows else []


def noise(run: Run) -> str:
    """How noisy the run was: the machine's load, and each case's interquartile range over its median (with
    two rounds, pytest-benchmark's IQR is their difference)."""
    spreads = [i["iqr"] / i["median"] for i in run.stats.values() if i["median"] > 0]
    start, end = run.machine.get("load_average_start"), run.machine.get("load_average_end")
    text = f"load average (1, 5, 15 min) {start} at the start, {end} at the end; " if start and end else ""
    loads = [i["load_1min"] for i in run.info.values() if "load_1min" in i]
    if loads:
        text += f"1-min load after each case: {min(loads):.1f} to {max(loads):.1f}; "
    if spreads:
        text += f"IQR / median per case: median {statistics.median(spreads):.0%}, worst {max(spreads):.0%}"
    return text


def summary(run: Run) -> str:
    m = run.machine
    ratios = metrics(run)
    lines = [
        f"# Benchmarks: {run.model}, {run.device}, {run.dtype}",
        "",
        f"{m.get('cuda_device') or m.get('cpu', {}).get('brand_raw', '?')}, {m.get('torch_threads', '?')} threads; "
        f"torch {m.get('torch', '?')}, transformers {m.get('transformers', '?')}; "
        f"{m.get('shapes') or ('quick' if m.get('quick') else 'full')} shapes; each case's median.",
        f"Noise: {noise(run)}.",
        "",
        "## Ours against transformers (same weights, device, dtype; sdpa)",
        "",
        *paired(run, ratios),
        "",
        "## Decode: the step against the weight stream it reads",
        "",
        *decode_weights(run),
        "",
        "## Cached prefix: S cached + V new tokens against a full prefill of S+V",
        "",
        *cached(run, ratios),
        "",
        "## Warm TTFT against transformers' contiguous caches, interleaved round by round",
        "",
        *warm_against_contiguous(run),
        "",
        "## Cold prefill, ours and transformers alternating call by call",
        "",
        *alternating(run),
        "",
        "## Serve TTFT: the server's first streamed token against the direct engine call, alternating",
        "",
        *serve(run),
        "",
        "## Many requests at once (generate_many): decode throughput and batched prefill",
        "",
        *batches(run, ratios),
        "",
        "## Splice (a relocated precomputed block) against recomputing the prompt",
        "",
        *splices(run, ratios),
        "",
        "## Block size and reuse",
        "",
        *block_sizes(run),
        "",
        "## One small layout replay (engine.bench.replay; ours only)",
        "",
        *replay(run),
        "",
        "## Long contexts (ours only)",
        "",
        *long_contexts(run),
    ]
    return "\n".join(lines) + "\n"


def figure(run: Run, path: Path) -> None:
    ratios = metrics(run)
    paired_names = [n for n in ratios if n.startswith("ours/transformers")]
    ideal = [n for n in ratios if n.startswith("achieved/ideal")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [2, 1]})
    left.barh([n.removeprefix("ours/transformers ") for n in paired_names], [ratios[n] for n in paired_names])
    left.axvline(1.0, color="black", lw=1)
    left.set_xlabel("our time / transformers' time (lower is better)")
    right.barh(
        [n.removeprefix("achieved/ideal cached ") for n in ideal], [ratios[n] for n in ideal], color="C1"
    )
    right.axvline(1.0, color="black", lw=1)
    right.axvline(1.2, color="gray", lw=1, ls="--", label="target 1.2")
    right.legend(loc="lower right")
    right.set_xlabel("cached/full TTFT over the FLOP-model ideal")
    for axis in (left, right):
        axis.invert_yaxis()  # first case on top
    fig.suptitle(f"{run.model}, {run.device}, {run.dtype}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", type=Path, help="a --benchmark-json file")
    args = parser.parse_args(argv)
    try:
        run = load_run(args.run)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.run.with_suffix(".md").write_text(summary(run))
    figure(run, args.run.with_suffix(".png"))
    print(f"wrote {args.run.with_suffix('.md')} and {args.run.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
