"""The results of a replay against a live server: per request what it measured and what the server reported,
beside the local prediction; totals; every disagreement; the files (requests.csv, endpoint.json, report.md,
and vllm_bench_serve.json: the run as `vllm bench serve --save-result` writes one).

A count the server did not report is "not reported" in every table and file (null in JSON), never 0, and
is left out of the totals, which say over how many requests they run. A request whose counts cannot all be
true (a negative one, more cached than prompt tokens) is flagged (`status`: `impossible usage: ...`), compared
with nothing, and its counts left out of the totals. Times are seconds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.bench.harness.prediction import Predicted
from engine.bench.harness.sending import Sent
from engine.bench.reporting.replay_report import PARTIAL_NOTE, markdown_text, table
from engine.bench.reporting.results import provenance, run_environment, write_csv, write_json
from engine.bench.reporting.routed_report import per_replica, request_columns
from engine.bench.reporting.stats import spread
from engine.bench.reporting.vllm_bench import ServedRequest, vllm_bench_result

NOT_REPORTED = "not reported"
REQUEST_COLUMNS = [
    "session",
    "turn",
    "status",
    "ttft_s",
    "itl_median_s",
    "tpot_s",
    "e2e_s",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "predicted_prompt_tokens",
    "predicted_cached_tokens",
    "agrees",
]
CONVENTIONS = (
    "TTFT: just before the request is sent to the first streamed chunk carrying output (an OpenAI content "
    "or tool-call delta, an Anthropic content_block_delta); ITL: gaps between later output chunks; TPOT: "
    "(e2e − TTFT) / (completion tokens − 1); e2e: sent to the stream's end. Token counts are the server's. "
    "Predicted: this project's BlockManager fed what was sent and what the server streamed back, tokenized "
    "with the local model's tokenizer."
)


def endpoint_environment(
    command: str, args: Any, partial: bool, host: str, served_model: str, version: str | None, **facts: Any
) -> dict[str, Any]:
    """What a results folder records of a live run: the endpoint by its host alone (in the options too),
    the API, the served model, its version where reported, the prediction's model and block size, `facts`."""
    info = {
        "endpoint": host,
        "api": args.api,
        "served_model": served_model,
        "server_version": version,
        "block_size": args.block_size,
    }
    env = run_environment(info | facts, command, args, partial)
    env["options"]["endpoint"] = host  # never the path, query or anything but the host
    return env


@dataclass
class Row:
    sent: Sent
    predicted: Predicted
    replica: str | None = None  # the server it was sent to (routed replays: one of several)

    def values(self) -> dict[str, Any]:
        """The row as JSON keeps it (None where the server did not report a count)."""
        ex, rep, pred = self.sent.exchange, self.sent.exchange.reported, self.predicted
        tpot = None  # only where output arrived in more than one chunk (a held-back reply comes in one)
        if ex.itl_s and ex.ttft_s is not None and ex.e2e_s is not None and (rep.completion_tokens or 0) > 1:
            tpot = (ex.e2e_s - ex.ttft_s) / (rep.completion_tokens - 1)
        return {
            "session": self.sent.request.session,
            "turn": self.sent.turn,
            "replica": self.replica,
            "trace_index": self.sent.index + 1,
            "started_s": self.sent.started_s,
            "status": ex.error or (f"impossible usage: {rep.problem}" if rep.problem else "ok"),
            "ttft_s": ex.ttft_s,
            "itl_median_s": statistics.median(ex.itl_s) if ex.itl_s else None,
            "tpot_s": tpot,
            "e2e_s": ex.e2e_s,
            "finish_reason": ex.finish_reason,
            "prompt_tokens": rep.prompt_tokens,
            "completion_tokens": rep.completion_tokens,
            "cached_tokens": rep.cached_tokens,
            "cached_field": rep.cached_source or None,
            "cache_written_tokens": rep.cache_written_tokens,
            "predicted_prompt_tokens": pred.prompt_tokens,
            "predicted_cached_tokens": pred.cached_tokens,
            "agrees": self.agrees(),
        }

    @property
    def counted(self) -> bool:
        """Whether the server's counts go into totals: the request succeeded and its counts are possible."""
        ex = self.sent.exchange
        return not ex.error and not ex.reported.problem

    def agrees(self) -> str | None:
        """yes / no when both counts exist and are possible; None (-) otherwise."""
        cached, predicted = self.sent.exchange.reported.cached_tokens, self.predicted.cached_tokens
        if cached is None or predicted is None or self.sent.exchange.reported.problem:
            return None
        return "yes" if cached == predicted else "no"

    def shown(self) -> dict[str, Any]:
        """The row for tables and CSV: a count the server did not report reads "not reported"."""
        v = self.values()
        failed = bool(self.sent.exchange.error)
        for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            if v[key] is None and not failed:
                v[key] = NOT_REPORTED
        return v


def totals(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One summary row: requests, errors, requests with impossible usage, TTFT (over every request answered),
    and cached tokens reported against predicted, over the requests where both exist and are possible."""
    answered = [r for r in rows if not r.sent.exchange.error]
    ok = [r for r in answered if r.counted]
    both = [r for r in ok if r.agrees() is not None]
    ttft = [r.sent.exchange.ttft_s for r in answered if r.sent.exchange.ttft_s is not None]
    later = [
        r.sent.exchange.ttft_s for r in answered if r.sent.turn > 1 and r.sent.exchange.ttft_s is not None
    ]
    row: dict[str, Any] = {
        "requests": len(rows),
        "errors": len(rows) - len(answered),
        "impossible_usage": len(answered) - len(ok),
        "n": len(ttft),
    }
    for key, values in (("ttft_s", ttft), ("ttft_later_turns_s", later)):
        if values:
            s = spread(values)
            row |= {key: s["median"], f"{key}_min": s["min"], f"{key}_max": s["max"]}
    reported = [r.sent.exchange.reported.cached_tokens for r in ok]
    row["cached_reported"] = (
        sum(c for c in reported if c is not None) if any(c is not None for c in reported) else NOT_REPORTED
    )
    row["compared"] = len(both)
    row["cached_predicted"] = sum(r.predicted.cached_tokens or 0 for r in both) if both else None
    row["disagreements"] = sum(r.agrees() == "no" for r in both)
    row["prompt_tokens"] = sum(r.sent.exchange.reported.prompt_tokens or 0 for r in ok)
    return [row]


SUMMARY_COLUMNS = [
    "requests",
    "errors",
    "impossible_usage",
    "n",
    "ttft_s",
    "ttft_later_turns_s",
    "prompt_tokens",
    "cached_reported",
    "compared",
    "cached_predicted",
    "disagreements",
]


def disagreements(rows: Sequence[Row]) -> list[str]:
    """One line per request whose reported and predicted cached tokens differ, and per prompt counted
    differently (the local tokenizer is not the served model's)."""
    lines = []
    for r in rows:
        v = r.values()
        if not r.counted:
            continue
        where = f"{v['session']} request {v['turn']}"
        if r.agrees() == "no":
            lines.append(
                f"- {where}: reported {v['cached_tokens']}, predicted {v['predicted_cached_tokens']} cached tokens"
            )
        if v["prompt_tokens"] is not None and v["prompt_tokens"] != v["predicted_prompt_tokens"]:
            lines.append(
                f"- {where}: the server counts {v['prompt_tokens']} prompt tokens, the local tokenizer "
                f"{v['predicted_prompt_tokens']} (is --model the served model?)"
            )
    return lines


def vllm_bench_serve(env: dict[str, Any], rows: Sequence[Row]) -> dict[str, Any]:
    """The run as `vllm bench serve` saves its result (engine/bench/reporting/vllm_bench.py)."""
    served = []
    for r in rows:
        ex, rep = r.sent.exchange, r.sent.exchange.reported
        prompt = rep.prompt_tokens if rep.prompt_tokens is not None else r.predicted.prompt_tokens
        served.append(
            ServedRequest(prompt, rep.completion_tokens, ex.ttft_s, ex.e2e_s, list(ex.itl_s), ex.error or "")
        )
    sent = [r.sent.exchange for r in rows if r.sent.exchange.sent_s > 0]  # perf_counter when each was sent
    duration = max(x.sent_s + (x.e2e_s or 0.0) for x in sent) - min(x.sent_s for x in sent) if sent else 0.0
    options = env["options"]
    return vllm_bench_result(
        served,
        duration,
        backend="openai-chat" if env["api"] == "openai" else "anthropic-messages",
        model_id=env["served_model"],
        tokenizer_id=env["model"],
        request_rate=options.get("request_rate"),
        max_concurrency=options.get("concurrency") or (None if options.get("request_rate") else 1),
    )


def write_endpoint_results(
    out: Path, title: str, env: dict[str, Any], rows: Sequence[Row]
) -> list[dict[str, Any]]:
    """requests.csv, endpoint.json and report.md; the summary row."""
    summary = totals(rows)
    routed = env.get("router") is not None
    columns, replicas = request_columns(REQUEST_COLUMNS, routed), per_replica(rows) if routed else []
    write_csv(out / "requests.csv", [r.shown() for r in rows])
    write_json(
        out / "endpoint.json",
        {
            "environment": env,
            "summary": summary,
            "replicas": replicas,
            "requests": [r.values() for r in rows],
        },
    )
    write_json(out / "vllm_bench_serve.json", vllm_bench_serve(env, rows))
    errors = [
        f"- {r.sent.request.session} request {r.sent.turn}: {markdown_text(r.sent.exchange.error)}"
        for r in rows
        if r.sent.exchange.error
    ]
    found = disagreements(rows)
    impossible = [
        f"- {r.sent.request.session} request {r.sent.turn}: {markdown_text(r.sent.exchange.reported.problem)}"
        for r in rows
        if not r.sent.exchange.error and r.sent.exchange.reported.problem
    ]
    lines = [
        f"# {title}",
        "",
        *provenance(env),
        *([PARTIAL_NOTE, ""] if env.get("partial") else []),
        f"- endpoint: `{env['endpoint']}` ({env['api']} API), served model `{env['served_model']}`, "
        f"server version {env['server_version'] or NOT_REPORTED}",
        f"- prediction: tokenizer of `{env['model']}`, block size {env['block_size']}, "
        f"cache of {env['cache_tokens']:,} tokens; the server's cache at the start: {env['server_cache_at_start']}",
        f"- arrivals: {env['arrivals']}; max {env['options']['max_tokens']} tokens per reply, "
        f"temperature {env['options']['temperature']}",
        "",
        CONVENTIONS,
        "",
        table(summary, SUMMARY_COLUMNS),
        "",
        *(
            [f"Per replica (router `{env.get('router')}`):", "", table(replicas, list(replicas[0])), ""]
            if replicas
            else []
        ),
        table([r.shown() for r in rows], columns),
        "",
        "Disagreements (reported against predicted):"
        if found
        else "Reported and predicted cached tokens agree on every request compared.",
        *found,
        *(["", "Impossible usage (left out of every total):", *impossible] if impossible else []),
        *(["", "Failed requests:", *errors] if errors else []),
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return summary
