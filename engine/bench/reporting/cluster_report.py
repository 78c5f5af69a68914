"""What `bench cluster` writes: cluster.json (the environment, the cost model, the workload and the `runs`
list), runs.csv, requests.csv (per request of each run: replica, cached tokens, TTFT and its parts; traces
of at most `MAX_REQUEST_ROWS` requests x runs), report.md, and the plots of hit rate against replica count
per router and of TTFT p99 against the offered rate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from engine.bench.reporting.replay_report import table  # noqa: E402
from engine.bench.reporting.results import provenance, write_csv, write_json  # noqa: E402
from engine.cluster.simulate import RunResult  # noqa: E402
from engine.cluster.workload import Workload  # noqa: E402

MAX_REQUEST_ROWS = 200_000
COLUMNS = [
    "layout",
    "router",
    "replicas",
    "load",
    "rate_rps",
    "hit_rate",
    "evictions",
    "load_max_over_mean",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "output_tok_s",
]


def shown(run: dict[str, Any]) -> dict[str, Any]:
    """A `runs` row as the tables print it (times in ms, rates rounded)."""
    return {
        "layout": run["layout"],
        "router": run["router"],
        "replicas": run["replicas"],
        "load": f"{run['load']:g}x",
        "rate_rps": f"{run['rate_rps']:.3g}",
        "hit_rate": f"{run['hit_rate']:.3f}",
        "evictions": run["evictions"],
        "load_max_over_mean": f"{run['load_max_over_mean']:.2f}",
        "ttft_p50_ms": f"{1000 * run['ttft_p50_s']:,.1f}",
        "ttft_p90_ms": f"{1000 * run['ttft_p90_s']:,.1f}",
        "ttft_p99_ms": f"{1000 * run['ttft_p99_s']:,.1f}",
        "output_tok_s": f"{run['output_tokens_per_s']:,.0f}",
    }


def request_rows(workloads: Sequence[Workload], results: Sequence[RunResult]) -> list[dict[str, Any]]:
    by_layout = {w.layout: w for w in workloads}
    return [
        {
            "layout": res.layout,
            "router": res.router,
            "replicas": res.replicas,
            "load": res.load,
            "request": i,
            "session": req.session,
            "arrival_s": req.time_s / res.load,
            "prompt_tokens": req.prompt_tokens,
            "output_tokens": req.output_tokens,
            "replica": s.replica,
            "cached_tokens": s.cached_tokens,
            "tier_tokens": s.tier_tokens,
            "evictions": s.evictions,
            "queue_s": s.queue_s,
            "load_s": s.load_s,
            "prefill_s": s.prefill_s,
            "ttft_s": s.ttft_s,
            "end_s": s.end_s,
        }
        for res in results
        for i, (req, s) in enumerate(zip(by_layout[res.layout].requests, res.served, strict=True))
    ]


def styles(runs: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """One colour per router, one line style per layout (solid: as sent)."""
    routers = list(dict.fromkeys(r["router"] for r in runs))
    layouts = list(dict.fromkeys(r["layout"] for r in runs))
    return {
        (router, layout): {
            "color": f"C{routers.index(router)}",
            "linestyle": ("-", "--", ":")[layouts.index(layout) % 3],
            "marker": "o",
            "label": router if len(layouts) == 1 else f"{router}, {layout}",
        }
        for router in routers
        for layout in layouts
    }


def layout_costs(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per router, replica count and load: timestamp-first against as-sent (hit rates, TTFT p99 ratio)."""
    sent = {(r["router"], r["replicas"], r["load"]): r for r in runs if r["layout"] == "as-sent"}
    out = []
    for r in runs:
        base = sent.get((r["router"], r["replicas"], r["load"]))
        if r["layout"] != "timestamp-first" or base is None:
            continue
        out.append(
            {
                "router": r["router"],
                "replicas": r["replicas"],
                "load": f"{r['load']:g}x",
                "hit_rate_as_sent": f"{base['hit_rate']:.3f}",
                "hit_rate_timestamp_first": f"{r['hit_rate']:.3f}",
                "ttft_p99_ratio": f"{r['ttft_p99_s'] / base['ttft_p99_s']:.2f}x",
                "ttft_p50_ratio": f"{r['ttft_p50_s'] / base['ttft_p50_s']:.2f}x",
            }
        )
    return out


def plot_hit_rate(runs: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Hit rate against the replica count, one line per router (at the lowest load)."""
    low = min(r["load"] for r in runs)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for (router, layout), style in styles(runs).items():
        mine = sorted(
            (r for r in runs if (r["router"], r["layout"]) == (router, layout) and r["load"] == low),
            key=lambda r: r["replicas"],
        )
        ax.plot([r["replicas"] for r in mine], [100 * r["hit_rate"] for r in mine], **style)
    ax.set_xscale("log", base=2)
    ax.set_xticks(
        sorted({r["replicas"] for r in runs}), [str(n) for n in sorted({r["replicas"] for r in runs})]
    )
    ax.set(xlabel="replicas", ylabel="prompt tokens from cache (%)", ylim=(-3, 103))
    ax.set_title(
        f"{title}\nhit rate against replica count (colours: routers; dashed: timestamp-first; load {low:g}x)",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(
        fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0
    )  # beside the axes: inside, it covered lines
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_ttft_vs_rate(runs: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """TTFT p99 against the offered rate, one panel per replica count, one line per router."""
    counts = sorted({r["replicas"] for r in runs})
    fig, axes = plt.subplots(
        1, len(counts), figsize=(4.2 * len(counts) + 2.2, 4.2), squeeze=False, sharey=True
    )
    for ax, n in zip(axes[0], counts, strict=True):
        for (router, layout), style in styles(runs).items():
            mine = sorted(
                (r for r in runs if (r["router"], r["layout"]) == (router, layout) and r["replicas"] == n),
                key=lambda r: r["load"],
            )
            ax.plot([r["rate_rps"] for r in mine], [r["ttft_p99_s"] for r in mine], **style)
        ax.set(xlabel="offered rate (requests/s)", title=f"{n} replica{'s' if n > 1 else ''}")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("TTFT p99 (s)")
    axes[0][-1].legend(
        fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0
    )  # beside the last panel, off its lines
    fig.suptitle(
        f"{title}: TTFT p99 against the offered rate (colours: routers; dashed: timestamp-first)", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_cluster_results(
    out: Path,
    env: dict[str, Any],
    workloads: Sequence[Workload],
    results: Sequence[RunResult],
    runs: list[dict[str, Any]],
    notes: list[str],
) -> None:
    workload = workloads[0]
    requests = len(workload.requests) * len(results)
    write_json(out / "cluster.json", {"environment": env, "runs": runs})
    write_csv(out / "runs.csv", [{k: v for k, v in r.items() if k != "per_replica"} for r in runs])
    if requests <= MAX_REQUEST_ROWS:
        write_csv(out / "requests.csv", request_rows(workloads, results))
    else:
        notes.append(
            f"requests.csv not written: {requests:,} rows (requests x runs) is over {MAX_REQUEST_ROWS:,}"
        )
    plot_hit_rate(runs, out / "hit_rate_vs_replicas.png", workload.name)
    plot_ttft_vs_rate(runs, out / "ttft_p99_vs_rate.png", workload.name)
    lines = [
        f"# Cluster simulation: {workload.name}",
        "",
        *provenance(env),
        f"- {len(workload.requests):,} requests in {workload.unit} at {workload.block_size} tokens per block"
        f"{f' ({workload.refused} left out: no content or over the context)' if workload.refused else ''}; "
        f"cost model `{env['cost']['name']}`",
        f"- per replica: a pool of {env['pool_tokens']:,} tokens ({env['eviction']} eviction)"
        + (f", a CPU tier of {env['cpu_tier_tokens']:,} tokens" if env["cpu_tier_tokens"] else ""),
        *(f"- {n}" for n in notes),
        "",
        "TTFT = the wait for the replica's earlier prefills + loading CPU-tier blocks + the prefill of the "
        "uncached tokens, by the cost model; no network, router or tokenizer time, and prefills never share a "
        "step with decodes or with each other (see docs/cluster.md).",
        "",
        table([shown(r) for r in runs], COLUMNS),
        "",
        *(
            ["What a timestamp-first layout costs the cluster:", "", table(costs, list(costs[0])), ""]
            if (costs := layout_costs(runs))
            else []
        ),
        "![hit rate against replicas](hit_rate_vs_replicas.png)",
        "",
        "![TTFT p99 against the offered rate](ttft_p99_vs_rate.png)",
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")
