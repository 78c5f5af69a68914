"""`python -m engine.bench replay TRACE --endpoint URL`: the trace's requests sent, streamed, to a live server
(any OpenAI- or Anthropic-compatible one), and per request the TTFT and the cached tokens it reported beside
what this project's prefix cache predicts for what was actually sent and received.

With several `--endpoint` and `--router R`, each request goes to the replica the routing policy picks when it
is sent (engine/bench/harness/routing.py), and is predicted by that replica's own cache: one prediction per
endpoint, fed what was placed there."""

from __future__ import annotations

import argparse
import sys

from engine.bench.harness.endpoint import RESET_ROUTES, open_endpoints
from engine.bench.harness.prediction import Predictor, prediction_blocks
from engine.bench.harness.routing import LiveRouter
from engine.bench.harness.sending import body_for, release_times, send_all
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
from engine.bench.reporting.routed_report import request_columns
from engine.bench.reporting.run_folder import check_out, interrupted, model_slug, named_run_dir, slug, written
from engine.cluster.routers import ROUTERS
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
    if len(args.endpoint) > 1 and args.router is None:
        raise TraceError(f"{len(args.endpoint)} --endpoint: give --router ({', '.join(ROUTERS)})")
    if len(args.endpoint) == 1 and args.router is not None:
        raise TraceError("--router picks among several servers: give --endpoint once per replica")
    if args.concurrency is not None and args.request_rate is not None:
        raise TraceError(
            "give --concurrency N (closed loop) or --request-rate R (Poisson arrivals), not both"
        )


def replay_endpoint(args: argparse.Namespace, requests: list[TraceRequest]) -> int:
    check_endpoint_flags(args)
    check_out(args)
    release_times(len(requests), args.request_rate, args.seed)  # a rate that never sends them is refused here
    endpoints = open_endpoints(args)
    endpoint = endpoints[0]
    model = endpoint.served_model(args.served_model)  # the replicas serve one model, under one name
    bodies = [
        body_for(request_body(r, args.api, f"request {i + 1}"), model, args.max_tokens, args.temperature)
        for i, r in enumerate(requests)
    ]
    sent = [as_sent(r, b, args.api) for r, b in zip(requests, bodies, strict=True)]  # what the server renders
    source, tokenizer = open_tokenizer(args)
    renderer = TraceRenderer(tokenizer, source.eos_ids)
    # one predicting cache per server (a bad cache size is refused before anything is sent)
    predictors = [Predictor(renderer, LocalRule(prediction_blocks(args, source))) for _ in endpoints]
    blocks = predictors[0].local.blocks
    router = None
    if args.router is not None:
        router = LiveRouter(
            args.router,
            sent,
            renderer,
            len(endpoints),
            blocks.num_blocks,
            args.block_size,
            args.max_tokens,
            args.seed,
        )
    version = endpoint.version()
    start = "not reset: the prediction starts from an empty cache (pass --reset-cache)"
    if args.reset_cache:
        for e in endpoints:
            route = e.reset_prefix_cache()
            if route is None:
                raise EndpointError(
                    f"--reset-cache: {e.host} has no prefix-cache reset route ({', '.join(RESET_ROUTES)})"
                )
        start = f"emptied by POST {route}"
    clients = [e.client() for e in endpoints]

    def one(i: int, streams: OpenStreams) -> Exchange:
        if router is None:
            return send(args.api, clients[0], bodies[i], args.timeout, streams, secret=endpoint.key)
        k = router.pick(i)
        try:
            return send(args.api, clients[k], bodies[i], args.timeout, streams, secret=endpoints[k].key)
        finally:
            router.answered(i)

    concurrency = args.concurrency or 1
    result = send_all(sent, one, concurrency, args.request_rate, args.seed)
    if result.partial and not result.sent:
        return interrupted(0, "requests", None)
    placed = router.placement if router is not None else dict.fromkeys(range(len(requests)), 0)
    rows = [
        Row(s, predictors[placed[s.index]].feed(s.request, s.exchange), endpoints[placed[s.index]].host)
        for s in result.sent
    ]

    sessions = list(dict.fromkeys(r.session for r in requests))
    name = sessions[0] if len(sessions) == 1 else f"{len(sessions)}-sessions"
    where = endpoint.host if router is None else f"{args.router}-{len(endpoints)}-replicas"
    out = named_run_dir(args, f"replay-endpoint-{slug(name)}-{slug(where)}-{model_slug(model)}")
    arrivals = (
        f"Poisson, {args.request_rate:g} requests/s (seed {args.seed})"
        if args.request_rate is not None
        else f"closed loop, {concurrency} session(s) at once"
    )
    env = endpoint_environment(
        "replay --endpoint",
        args,
        result.partial,
        ", ".join(e.host for e in endpoints),
        model,
        version,
        model=source.model_id,
        cache_tokens=blocks.num_blocks * args.block_size,
        arrivals=arrivals,
        server_cache_at_start=start,
        router=args.router,
    )
    title = f"Trace replay against {endpoint.host if router is None else where}: {name}"
    summary = write_endpoint_results(out, title, env, rows)
    print(table([r.shown() for r in rows], request_columns(REQUEST_COLUMNS, router is not None)))
    print(table(summary, SUMMARY_COLUMNS))
    if summary[0]["disagreements"]:
        print(
            f"[{summary[0]['disagreements']} request(s) where reported and predicted cached tokens differ: see report.md]",
            file=sys.stderr,
        )
    if result.partial:
        return interrupted(len(rows), "requests", out)
    return written(out)
