"""`python -m engine.bench layout --endpoint URL`: the layout scenario's requests sent, streamed, to a live
server; per layout the TTFT and the cached tokens it reported beside the local prediction.

Every layout carries the same scripted replies (the server's own replies are streamed and cached by it, and
predicted, but never carried forward), so the layouts differ only in their layout. Each pass runs every
layout's conversation whole, the order of the layouts rotated from pass to pass; each conversation starts
from an empty server cache: a fresh per-conversation `cache_salt` with `--cache-salt` (vLLM), else the
server's reset route (vLLM's and engine.serve's `/reset_prefix_cache`, SGLang's `/flush_cache`). Cold baselines are each request again from an empty
cache (a unique salt, or a reset before it). A server with neither runs one pass, its layouts sharing its
cache, and cold baselines are not measured.
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from typing import Any

from engine.bench.harness.endpoint import open_endpoint
from engine.bench.harness.prediction import Predictor, prediction_blocks
from engine.bench.harness.sending import Sent, body_for
from engine.bench.harness.streamed import OpenStreams, send
from engine.bench.harness.trace_analysis import open_tokenizer
from engine.bench.reporting.endpoint_report import (
    CONVENTIONS,
    NOT_REPORTED,
    REQUEST_COLUMNS,
    Row,
    endpoint_environment,
    vllm_bench_serve,
)
from engine.bench.reporting.replay_report import PARTIAL_NOTE, table
from engine.bench.reporting.results import provenance, write_csv, write_json
from engine.bench.reporting.run_folder import check_out, interrupted, model_slug, named_run_dir, slug, written
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import build_scenario
from engine.traces.bodies import as_sent, request_body
from engine.traces.providers.local import LocalRule
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest

SUMMARY_COLUMNS = [
    "layout",
    "n",
    "ttft_s",
    "ttft_ratio",
    "cold_ttft_s",
    "cached_share",
    "predicted_share",
    "disagreements",
]


def layout_endpoint(args: argparse.Namespace) -> int:
    check_out(args)
    endpoint = open_endpoint(args)
    source, tokenizer = open_tokenizer(args)
    sc = build_scenario(tokenizer, args.scale, args.seed, args.turns)
    baseline = "stable-first" if "stable-first" in args.layouts else args.layouts[0]
    names = [baseline] + [n for n in args.layouts if n != baseline]
    model = endpoint.served_model(args.served_model)
    version, client, streams = endpoint.version(), endpoint.client(), OpenStreams()
    renderer = TraceRenderer(tokenizer, source.eos_ids)
    salted = args.cache_salt
    resets = not salted and endpoint.reset_prefix_cache() is not None
    isolated = salted or resets
    passes = args.repeats if isolated else 1
    run = uuid.uuid4().hex[:8]  # salts never repeat across runs
    max_tokens = args.max_tokens or sc.reply_tokens
    replies = [t.reply for t in sc.turns]
    rows: list[tuple[int, str, Row]] = []  # (pass, kind, row)

    def one(name: str, t: int, salt: str | None, predictor: Predictor) -> Row:
        r = LAYOUTS[name](sc, t, replies[:t])
        req = TraceRequest(r.messages, r.tools, session=name)
        body = body_for(
            request_body(req, args.api, f"{name} turn {t + 1}"), model, max_tokens, args.temperature
        )
        body |= {"cache_salt": salt} if salt else {}
        ex = send(args.api, client, body, args.timeout, streams, secret=endpoint.key)
        sent = as_sent(req, {k: v for k, v in body.items() if k != "cache_salt"}, args.api)
        return Row(Sent(t, t + 1, sent, ex, 0.0), predictor.feed(sent, ex))

    def fresh() -> Predictor:
        """A prediction from an empty cache, as each isolated conversation starts."""
        return Predictor(renderer, LocalRule(prediction_blocks(args, source)))

    shared = fresh()
    partial = False
    try:
        for p in range(passes):
            order = names[p % len(names) :] + names[: p % len(names)]
            for name in order:
                if resets and p + names.index(name):  # the first conversation follows the check's reset
                    endpoint.reset_prefix_cache()
                predictor = fresh() if isolated else shared
                for t in range(len(sc.turns)):
                    rows.append((p, "warm", one(name, t, f"{run}-{name}-{p}" if salted else None, predictor)))
            for name in order if isolated else ():
                for t in range(len(sc.turns)):
                    if resets:
                        endpoint.reset_prefix_cache()
                    rows.append(
                        (p, "cold", one(name, t, f"{run}-cold-{name}-{p}-{t}" if salted else None, fresh()))
                    )
    except KeyboardInterrupt:
        partial = True
        if not rows:
            return interrupted(0, "requests", None)
    isolation = (
        "a cache_salt per conversation"
        if salted
        else "the server's prefix-cache reset before each conversation"
        if resets
        else "none (no --cache-salt, no reset route): one pass, the layouts share the server's cache; "
        "cold baselines not measured"
    )
    env = endpoint_environment(
        "layout --endpoint",
        args,
        partial,
        endpoint.host,
        model,
        version,
        model=source.model_id,
        isolation=isolation,
        passes=passes,
    )
    summary = summarize(rows, names, baseline)
    out = named_run_dir(args, f"layout-endpoint-{slug(endpoint.host)}-{model_slug(model)}")
    flat = [r.shown() | {"pass": p, "kind": kind, "layout": r.sent.request.session} for p, kind, r in rows]
    write_csv(out / "requests.csv", flat)
    write_json(out / "layout.json", {"environment": env, "summary": summary, "requests": flat})
    (out / "vllm_bench_serve").mkdir(exist_ok=True)
    for name, kind in dict.fromkeys((r.sent.request.session, kind) for _, kind, r in rows):
        mine = [r for _, k, r in rows if k == kind and r.sent.request.session == name]
        write_json(out / "vllm_bench_serve" / f"{name}-{kind}.json", vllm_bench_serve(env, mine))
    lines = [
        f"# Layout replay against {endpoint.host}, {args.scale} scale",
        "",
        *provenance(env),
        *([PARTIAL_NOTE, ""] if partial else []),
        f"- endpoint: `{endpoint.host}` ({args.api} API), served model `{model}`, server version "
        f"{version or NOT_REPORTED}",
        f"- isolation: {isolation}; {passes} pass(es), layouts' order rotated; scripted replies in every layout",
        f"- prediction: tokenizer of `{source.model_id}`, block size {args.block_size}",
        "",
        CONVENTIONS,
        "",
        f"Summary over turns 2+ (median [min–max] over passes and turns; `ttft_ratio` against `{baseline}`):",
        "",
        table(summary, SUMMARY_COLUMNS),
        "",
        table(flat, ["pass", "kind", "layout", *REQUEST_COLUMNS[1:]]),
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print(table(summary, SUMMARY_COLUMNS))
    if partial:
        return interrupted(len(rows), "requests", out)
    return written(out)


def summarize(rows: list[tuple[int, str, Row]], names: list[str], baseline: str) -> list[dict[str, Any]]:
    """Per layout, over its warm turns 2+: TTFT, its ratio to the baseline's, cold TTFT, cached shares."""

    def of(name: str, kind: str) -> list[Row]:
        return [r for _, k, r in rows if k == kind and r.sent.request.session == name and r.sent.turn > 1]

    def ttft(rs: list[Row]) -> list[float]:
        return [r.sent.exchange.ttft_s for r in rs if r.sent.exchange.ttft_s is not None]

    base = ttft(of(baseline, "warm"))
    out = []
    for name in names:
        warm, cold = of(name, "warm"), ttft(of(name, "cold"))
        times = ttft(warm)
        prompt = sum(r.predicted.prompt_tokens for r in warm) or 1
        counted = [r for r in warm if not r.sent.exchange.reported.problem]  # impossible usage: left out
        reported = [r.sent.exchange.reported.cached_tokens for r in counted]
        row: dict[str, Any] = {"layout": name, "n": len(times)}
        if times:
            row |= {"ttft_s": statistics.median(times), "ttft_s_min": min(times), "ttft_s_max": max(times)}
        if times and base:
            row["ttft_ratio"] = statistics.median(times) / statistics.median(base)
        if cold:
            row |= {
                "cold_ttft_s": statistics.median(cold),
                "cold_ttft_s_min": min(cold),
                "cold_ttft_s_max": max(cold),
            }
        row["cached_share"] = (
            sum(reported) / (sum(r.predicted.prompt_tokens for r in counted) or 1)
            if reported and all(c is not None for c in reported)
            else NOT_REPORTED
        )
        row["predicted_share"] = sum(r.predicted.cached_tokens or 0 for r in warm) / prompt
        row["disagreements"] = sum(r.agrees() == "no" for _, _, r in rows if r.sent.request.session == name)
        out.append(row)
    return out
