"""What `bench fleet` writes: per arm and offered rate, TTFT percentiles from arrival, time per output token,
throughput, cached share, preemptions and pool occupancy; files fleet.json / requests.csv / summary.csv /
report.md; plots of TTFT against the offered rate and of the pool over time."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from engine.bench.harness.fleet import FleetRun  # noqa: E402
from engine.bench.reporting.replay_report import PARTIAL_NOTE, table  # noqa: E402
from engine.bench.reporting.results import provenance, write_csv, write_json  # noqa: E402
from engine.bench.reporting.stats import paired  # noqa: E402
from engine.bench.reporting.vllm_bench import ServedRequest, vllm_bench_result  # noqa: E402

COLUMNS = [
    "arm",
    "rate",
    "requests",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "tpot_ms",
    "prompt_tok_s",
    "output_tok_s",
    "cached_share",
    "preemptions",
    "peak_pool",
]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between order statistics (numpy's default)."""
    v = sorted(values)
    at = (len(v) - 1) * q / 100
    low = int(at)
    return v[low] + (v[min(low + 1, len(v) - 1)] - v[low]) * (at - low)


def run_row(run: FleetRun, total_blocks: int) -> dict[str, Any]:
    """One run's figures (a row of the summary before repeats are combined)."""
    reqs = run.requests
    ttft = [1000 * r.ttft_s for r in reqs]
    return {
        "arm": run.arm,
        "rate": "closed loop" if run.rate is None else round(run.rate, 3),
        "requests": len(reqs),
        "ttft_p50_ms": percentile(ttft, 50),
        "ttft_p90_ms": percentile(ttft, 90),
        "ttft_p99_ms": percentile(ttft, 99),
        "tpot_ms": statistics.median(1000 * r.tpot_s for r in reqs),
        "prompt_tok_s": sum(r.prompt_tokens for r in reqs) / run.makespan_s,
        "output_tok_s": sum(r.output_tokens for r in reqs) / run.makespan_s,
        "cached_share": sum(r.cached_tokens for r in reqs) / sum(r.prompt_tokens for r in reqs),
        "preemptions": sum(r.preemptions for r in reqs),
        "peak_pool": max((used for _, used, _ in run.occupancy), default=0) / total_blocks,
    }


def summarize_fleet(runs: Sequence[FleetRun], total_blocks: int) -> list[dict[str, Any]]:
    """Per (arm, rate): the median over repeats of each figure, with min and max where there are several."""
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for run in runs:
        row = run_row(run, total_blocks)
        groups.setdefault((row["arm"], row["rate"]), []).append(row)
    for (arm, rate), group in groups.items():
        out: dict[str, Any] = {"arm": arm, "rate": rate, "repeats": len(group)}
        for c in COLUMNS[2:]:
            values = [g[c] for g in group]
            out[c] = statistics.median(values)
            if len(values) > 1:
                out[f"{c}_min"], out[f"{c}_max"] = min(values), max(values)
        rows.append(out)
    return rows


def paired_ttft(runs: Sequence[FleetRun], arms: Sequence[str]) -> list[str]:
    """Per load, each arm's p50 TTFT over the first arm's: the median [min–max] of the ratios of runs of the
    same repeat (the same arrivals), n and the sign test's p and verdict (`engine.bench.reporting.stats`)."""
    p50 = {
        (r.arm, r.rate, r.repeat): percentile([x.ttft_s for x in r.requests], 50) for r in runs if r.requests
    }
    lines = []
    for rate in dict.fromkeys(r.rate for r in runs):
        where = "closed loop" if rate is None else f"{round(rate, 3)} req/s"
        for arm in arms[1:]:
            repeats = [k for (a, at, k) in p50 if (a, at) == (arm, rate) and (arms[0], rate, k) in p50]
            if not repeats:
                continue
            c = paired(
                [p50[(arm, rate, k)] for k in repeats], [p50[(arms[0], rate, k)] for k in repeats], "repeats"
            )
            p = "" if c["p"] is None else f", p = {c['p']:.3f}"
            lines.append(
                f"- `{arm}` / `{arms[0]}`, p50 TTFT at {where}: {c['ratio']:.2f}x "
                f"[{c['ratio_min']:.2f}–{c['ratio_max']:.2f}] over n = {c['n']} repeats{p}: {c['verdict']}"
            )
    return lines


def plot_ttft_vs_rate(summary: Sequence[dict[str, Any]], out: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm in dict.fromkeys(r["arm"] for r in summary):
        rows = sorted(
            (r for r in summary if r["arm"] == arm and r["rate"] != "closed loop"), key=lambda r: r["rate"]
        )
        rates = [r["rate"] for r in rows]
        line = ax.plot(rates, [r["ttft_p50_ms"] for r in rows], marker="o", label=f"{arm} p50")[0]
        ax.plot(
            rates,
            [r["ttft_p90_ms"] for r in rows],
            marker="^",
            ls="--",
            color=line.get_color(),
            label=f"{arm} p90",
        )
    ax.set_xlabel("offered load (requests / s)")
    ax.set_ylabel("TTFT from arrival (ms)")
    ax.set_yscale("log")
    _save(fig, ax, title, out)


def _save(fig: plt.Figure, ax: plt.Axes, title: str, out: Path) -> None:
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_occupancy(runs: Sequence[FleetRun], total_blocks: int, out: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for run in runs:
        t = [o[0] for o in run.occupancy]
        line = ax.plot(t, [o[1] / total_blocks for o in run.occupancy], label=f"{run.arm}: in use")[0]
        ax.plot(
            t,
            [o[2] / total_blocks for o in run.occupancy],
            ls=":",
            color=line.get_color(),
            label=f"{run.arm}: cached, free",
        )
    ax.set_xlabel("time since the first arrival (s)")
    ax.set_ylabel("share of the KV pool's blocks")
    _save(fig, ax, title, out)


def vllm_bench_run(run: FleetRun, env: dict[str, Any]) -> dict[str, Any]:
    """One run in `vllm bench serve`'s result keys: the engine in process (backend `kvtestbed-engine`), its
    scheduled arrivals as send times, no per-token times (ITL null)."""
    served = [
        ServedRequest(q.prompt_tokens, q.output_tokens, q.ttft_s, q.end_s - q.arrival_s, None)
        for q in run.requests
    ]
    agents = len({q.agent for q in run.requests})
    return vllm_bench_result(
        served,
        run.makespan_s,
        backend="kvtestbed-engine",
        model_id=env["model"],
        tokenizer_id=env["model"],
        request_rate=run.rate,
        max_concurrency=agents if run.rate is None else None,
    )


def write_fleet_results(
    out: Path,
    env: dict[str, Any],
    runs: Sequence[FleetRun],
    summary: Sequence[dict[str, Any]],
    notes: Sequence[str],
) -> None:
    write_json(
        out / "fleet.json", {"environment": env, "summary": list(summary), "runs": [asdict(r) for r in runs]}
    )
    rows = [
        {"arm": r.arm, "rate": r.rate, "repeat": r.repeat, "position": r.position} | asdict(q)
        for r in runs
        for q in r.requests
    ]
    write_csv(out / "requests.csv", rows)
    write_csv(out / "summary.csv", list(summary))
    (out / "vllm_bench_serve").mkdir(exist_ok=True)
    for r in runs:  # each run as `vllm bench serve --save-result` writes one
        name = f"{r.arm}-{'closed' if r.rate is None else f'{r.rate:g}rps'}-repeat{r.repeat}.json"
        write_json(out / "vllm_bench_serve" / name, vllm_bench_run(r, env))
    lines = [
        "# Fleet: agents sharing one engine and one KV pool",
        "",
        *provenance(env),
        *([PARTIAL_NOTE, ""] if env.get("partial") else []),
        f"- model: `{env['model']}`, device {env['device']} ({env['device_name']}), dtype {env['dtype']}, "
        f"block size {env['block_size']}, pool {env['cache_tokens']} tokens",
        "",
        table(summary, COLUMNS),
        "",
        *notes,
        "",
        "![TTFT against the offered load](ttft_vs_rate.png)\n",
        "![The KV pool over time at the highest load](pool_occupancy.png)\n",
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")
