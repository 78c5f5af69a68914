"""`python -m engine.bench replay TRACE --endpoint URL`: the trace's requests sent, streamed, to a live server
(any OpenAI- or Anthropic-compatible one), and per request the TTFT and the cached tokens it reported beside
what this project's prefix cache predicts for what was actually sent and received."""

from __future__ import annotations

import argparse
import sys

from engine.bench.harness.endpoint import RESET_ROUTES, Endpoint, open_endpoint
from engine.bench.harness.prediction import Predictor, prediction_blocks
from engine.bench.harness.sending import body_for, send_all
from engine.bench.harness.streamed import Exchange, OpenStreams, send
from engine.bench.harness.trace_analysis import open_tokenizer
from engine.bench.reporting.endpoint_report import (
    REQUEST_COLUMNS,
    SUMMARY_COLUMNS,
    Row,
    endpoint_environment,
    write_endpoint_results,
)
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.run_folder import check_out, interrupted, model_slug, named_run_dir, slug, written
from engine.errors import EndpointError, TraceError
from engine.traces.bodies import as_sent, request_body
from engine.traces.providers.local import LocalRule
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest


def check_endpoint_flags(args: argparse.Namespace) -> None:
    """Refuse what a run against a live server cannot do, before any work."""
    if args.analyze or args.pressure or args.rules is not None:
        raise TraceError(
            "--endpoint sends the trace to a server: --analyze, --rules and --pressure run without one"
        )
    if args.concurrency is not None and args.request_rate is not None:
        raise TraceError(
            "give --concurrency N (closed loop) or --request-rate R (Poisson arrivals), not both"
        )


def replay_endpoint(args: argparse.Namespace, requests: list[TraceRequest]) -> int:
    check_endpoint_flags(args)
    check_out(args)
    endpoint: Endpoint = open_endpoint(args)
    model = endpoint.served_model(args.served_model)
    bodies = [
        body_for(request_body(r, args.api, f"request {i + 1}"), model, args.max_tokens, args.temperature)
        for i, r in enumerate(requests)
    ]
    sent = [as_sent(r, b, args.api) for r, b in zip(requests, bodies, strict=True)]  # what the server renders
    source, tokenizer = open_tokenizer(args)
    blocks = prediction_blocks(args, source)  # a bad cache size is refused before anything is sent
    predictor = Predictor(TraceRenderer(tokenizer, source.eos_ids), LocalRule(blocks))
    version = endpoint.version()
    start = "not reset: the prediction starts from an empty cache (pass --reset-cache)"
    if args.reset_cache:
        route = endpoint.reset_prefix_cache()
        if route is None:
            raise EndpointError(
                f"--reset-cache: {endpoint.host} has no prefix-cache reset route ({', '.join(RESET_ROUTES)})"
            )
        start = f"emptied by POST {route}"
    client = endpoint.client()

    def one(i: int, streams: OpenStreams) -> Exchange:
        return send(args.api, client, bodies[i], args.timeout, streams, secret=endpoint.key)

    concurrency = args.concurrency or 1
    result = send_all(sent, one, concurrency, args.request_rate, args.seed)
    if result.partial and not result.sent:
        return interrupted(0, "requests", None)
    rows = [Row(s, predictor.feed(s.request, s.exchange)) for s in result.sent]

    sessions = list(dict.fromkeys(r.session for r in requests))
    name = sessions[0] if len(sessions) == 1 else f"{len(sessions)}-sessions"
    out = named_run_dir(args, f"replay-endpoint-{slug(name)}-{slug(endpoint.host)}-{model_slug(model)}")
    arrivals = (
        f"Poisson, {args.request_rate:g} requests/s (seed {args.seed})"
        if args.request_rate is not None
        else f"closed loop, {concurrency} session(s) at once"
    )
    env = endpoint_environment(
        "replay --endpoint",
        args,
        result.partial,
        endpoint.host,
        model,
        version,
        model=source.model_id,
        cache_tokens=blocks.num_blocks * args.block_size,
        arrivals=arrivals,
        server_cache_at_start=start,
    )
    summary = write_endpoint_results(out, f"Trace replay against {endpoint.host}: {name}", env, rows)
    print(table([r.shown() for r in rows], REQUEST_COLUMNS))
    print(table(summary, SUMMARY_COLUMNS))
    if summary[0]["disagreements"]:
        print(
            f"[{summary[0]['disagreements']} request(s) where reported and predicted cached tokens differ: see report.md]",
            file=sys.stderr,
        )
    if result.partial:
        return interrupted(len(rows), "requests", out)
    return written(out)
