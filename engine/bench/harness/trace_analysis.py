"""`bench replay --analyze`: a trace analyzed without a model forward, written out like every bench's results.

Only the model's tokenizer, chat template, end-of-turn ids, context length and cache geometry are used: no
weights are loaded. The local cache gets the capacity a full replay gets (--cache-tokens / --cache-gb, else
the engine's fixed default, whatever memory is free), so both report the same cached tokens; a request the
model's context cannot hold, which a full replay refuses, is served nothing locally, marked, and counted.
"""

from __future__ import annotations

import argparse
import sys

from transformers import PreTrainedTokenizerBase

from engine.bench.args import chosen_model
from engine.bench.reporting.replay_plots import plot_pressure, plot_rule_shares, plot_strip
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.results import run_environment
from engine.bench.reporting.run_folder import check_out, model_slug, named_run_dir, written
from engine.bench.reporting.trace_report import REQUEST_COLUMNS, WHY, rule_summary, write_trace_results
from engine.devices import dtype_name, resolve_device, resolve_dtype
from engine.errors import TokenizerMissingError
from engine.kv.block_manager import BlockManager
from engine.kv.pool import KVCache
from engine.loading.sources import ModelSource, resolve
from engine.runtime.identity import identity
from engine.runtime.loader import with_tokenizer
from engine.traces.analysis import Analyzer
from engine.traces.pressure import capacities, sweep
from engine.traces.providers.local import LocalRule
from engine.traces.providers.registry import HOSTED, LOCAL
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest


def open_tokenizer(args: argparse.Namespace) -> tuple[ModelSource, PreTrainedTokenizerBase]:
    source, tokenizer = with_tokenizer(resolve(chosen_model(args), args.seed))
    if tokenizer is None:
        raise TokenizerMissingError(f"{source.model_id} has no tokenizer files: --analyze renders with them")
    return source, tokenizer


def run_analysis(args: argparse.Namespace, requests: list[TraceRequest], rules: list[str]) -> int:
    check_out(args)  # a bad --out costs no tokenizer load
    source, tokenizer = open_tokenizer(args)
    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    num_blocks = KVCache.blocks_in_budget(  # sized, never allocated: no free-memory check
        source.config, args.block_size, dtype, tokens=args.cache_tokens, gb=args.cache_gb
    )
    blocks = BlockManager(num_blocks, args.block_size, f"{source.digest}:{dtype_name(dtype)}".encode())
    renderer = TraceRenderer(tokenizer, source.eos_ids)
    context = source.config.max_position_embeddings
    local = LocalRule(blocks, context=context)
    analyzer = Analyzer(renderer, local, [HOSTED[n]() for n in rules if n != LOCAL])
    records = analyzer.run(requests, keep_ids=args.pressure)
    over = sum(bool(r.served[LOCAL].why_none) for r in records)
    if over:
        print(
            f"[{over} of {len(records)} requests do not fit the {context:,}-token context of "
            f"{source.model_id}: a full replay refuses them; here the local cache serves them nothing "
            "(see why_none)]",
            file=sys.stderr,
        )
    pressure = []
    if args.pressure:
        sizes = capacities(analyzer.prompts, args.block_size, args.cache_tokens)
        pressure = sweep(analyzer.prompts, args.block_size, sizes)
    name = requests[0].session if len({r.session for r in requests}) == 1 else f"{len(args.traces)}-traces"
    out = named_run_dir(args, f"replay-analyze-{name}-{model_slug(source.model_id)}")
    info = identity(source, dtype, device, args.block_size, num_blocks * args.block_size)
    env = run_environment(info, "replay --analyze", args) | {
        "context_tokens": context,
        "over_context_requests": over,
    }
    plot_rule_shares(
        records, rules, out / "cached_share_by_rule.png", f"Cached share so far, per cache rule: {name}"
    )
    plot_strip(
        [r for r in records if r.regions],
        out / "token_strip.png",
        "Where local reuse ends on each session's last request",
        "prompt token index",
    )
    plots = [
        ("cached_share_by_rule.png", "cumulative cached share per rule"),
        ("token_strip.png", "token strip"),
    ]
    if pressure:
        plot_pressure(pressure, out / "pressure.png", f"Local cache hit rate against capacity: {name}")
        plots.append(("pressure.png", "hit rate against capacity, per eviction policy"))
    write_trace_results(out, f"Trace analysis: {name}", env, records, rules, pressure, plots)
    print(
        table(
            [r.row() for r in records], [*REQUEST_COLUMNS, *(f"{x}_cached" for x in rules if x != LOCAL), WHY]
        )
    )
    print(
        table(
            rule_summary(records, rules),
            ["rule", "cached_share", "written_tokens", "input_cost", "cost_vs_uncached"],
        )
    )
    return written(out)
