"""`python -m engine.bench replay TRACE [TRACE ...]`: replay your own agent's requests and see, request by
request, where prefix reuse ended, what it cost, and what each hosted prompt cache would have served.

A TRACE is a JSON list of requests or JSONL (one request per line, as proxies log them) in OpenAI Chat
Completions, OpenAI Responses or Anthropic Messages form; a file agents and proxies write: a Claude Code
transcript (or a whole project folder), a Codex rollout, a claude-trace log, a HAR file, an
OpenTelemetry (OTLP JSON) export; a hash-id (Mooncake) trace; or `example:<format>`, shipped with the
package. Formats are detected per file (--format forces one); a file given twice is refused. Where a trace
records the provider's usage, --analyze shows it beside each rule's prediction, and for every cache where
each miss came from. The assistant message that the next request carries after this one's messages is
taken as this request's reply: it is cached as if the engine had generated it, as a serving engine would
have.

Full replay (default) runs the model: TTFT per request. --analyze runs no model (tokenizer and chat
template only): the engine's own block hashing gives the same cached tokens, plus --rules (what OpenAI,
Anthropic, DeepSeek and Gemini would cache and bill) and --pressure (several sessions interleaved by time
against one local cache: hit rate against capacity, LRU against fewest-reuses eviction).
"""

from __future__ import annotations

import argparse

from engine.arguments import float_flag, int_flag
from engine.bench.flags.shared import add_bench_args, add_trace_args
from engine.bench.harness.endpoint import add_endpoint_args
from engine.cli import docs_link
from engine.cluster.routers import ROUTERS
from engine.traces.providers.registry import ALL


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "replay",
        help="replay your own trace: where reuse ended, turn by turn (--analyze: no model, hosted rules)",
        description=__doc__,
        epilog=docs_link("replay.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_args(p)
    p.add_argument(
        "--analyze", action="store_true", help="no model forward: tokenizer and chat template only"
    )
    p.add_argument("--rules", default=None, help=f"with --analyze: cache rules to compare (default {ALL})")
    p.add_argument(
        "--hidden-prefix-tokens",
        type=int_flag(1),
        default=None,
        metavar="N",
        help="with --analyze: the system prompt and tools a transcript lacks are N tokens (default: each "
        "session's first recorded cache read)",
    )
    p.add_argument(
        "--pressure",
        action="store_true",
        help="with --analyze: local cache hit rate against capacity (to --cache-tokens), per eviction policy",
    )
    add_bench_args(p)
    add_endpoint_args(p)
    p.add_argument(
        "--concurrency",
        type=int_flag(1),
        default=None,
        help="with --endpoint: sessions in flight at once (default 1)",
    )
    p.add_argument(
        "--request-rate",
        type=float_flag(positive=True),
        default=None,
        metavar="R",
        help="with --endpoint: Poisson arrivals, R requests per second (seeded by --seed)",
    )
    p.add_argument(
        "--router",
        choices=list(ROUTERS),
        default=None,
        help="with several --endpoint: the routing policy that picks each request's replica (docs/cluster.md)",
    )
