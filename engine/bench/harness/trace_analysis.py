"""`bench replay --analyze`: a trace analyzed without a model forward, written out like every bench's results.

Only the model's tokenizer, chat template, end-of-turn ids, context length and cache geometry are used: no
weights are loaded. The local cache gets the capacity a full replay gets (--cache-tokens / --cache-gb, else
the engine's fixed default, whatever memory is free), so both report the same cached tokens; a request the
model's context cannot hold, which a full replay refuses, is served nothing locally, marked, counted, and
the notice names a model that holds it; with no --model asked for, the analysis picks one whose context
holds the trace's longest request (`engine.bench.harness.trace_model`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from engine.bench.args import chosen_model
from engine.bench.harness.trace_model import fitting_model, hint, longest_prompt
from engine.bench.reporting.replay_plots import plot_pressure, plot_rule_shares, plot_strip
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.results import run_environment
from engine.bench.reporting.run_folder import check_out, model_slug, named_run_dir, written
from engine.bench.reporting.trace_plots import plot_timelines
from engine.bench.reporting.trace_report import (
    REQUEST_COLUMNS,
    RULE_COLUMNS,
    WHY,
    messages_only,
    rule_summary,
    summary_tables,
    write_trace_results,
)
from engine.devices import dtype_name, resolve_device, resolve_dtype
from engine.errors import TokenizerMissingError, TraceError
from engine.kv.block_manager import BlockManager
from engine.kv.pool import KVCache
from engine.loading.sources import ModelSource, resolve
from engine.runtime.identity import identity
from engine.runtime.loader import with_tokenizer
from engine.traces.analysis import AnalyzedRequest, Analyzer
from engine.traces.hidden_prefix import estimate
from engine.traces.hidden_prefix import notes as hidden_notes
from engine.traces.pressure import PressurePoint, capacities, sweep
from engine.traces.providers.local import OVER_CACHE, OVER_CONTEXT, LocalRule
from engine.traces.providers.registry import HOSTED, LOCAL
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest


def open_tokenizer(args: argparse.Namespace) -> tuple[ModelSource, PreTrainedTokenizerBase]:
    source, tokenizer = with_tokenizer(resolve(chosen_model(args), args.seed))
    if tokenizer is None:
        raise TokenizerMissingError(f"{source.model_id} has no tokenizer files: --analyze renders with them")
    return source, tokenizer


@dataclass
class AnalysisSetup:
    """What every analysis of one command run shares: the model's tokenizer and geometry, the rules."""

    source: ModelSource
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype
    num_blocks: int
    block_size: int
    rules: list[str]

    @classmethod
    def open(
        cls, args: argparse.Namespace, rules: list[str], requests: Sequence[TraceRequest] = ()
    ) -> AnalysisSetup:
        """With `requests` and no --model asked for: a model whose context holds the longest of them
        (`trace_model`), said in one line."""
        source, tokenizer = open_tokenizer(args)
        longest = longest_prompt(tokenizer, source.eos_ids, requests) if args.model == "auto" else 0
        if longest > source.config.max_position_embeddings:
            picked = fitting_model(longest)
            print(
                f"[the longest request, {longest:,} tokens, does not fit the "
                f"{source.config.max_position_embeddings:,}-token context of {source.model_id}: analyzing "
                f"with {picked} (Qwen2.5's tokenizer and chat template, offline, no weights)]",
                file=sys.stderr,
            )
            source, tokenizer = with_tokenizer(resolve(picked, args.seed))
        device = resolve_device(args.device)
        dtype = resolve_dtype(args.dtype, device)
        num_blocks = KVCache.blocks_in_budget(  # sized, never allocated: no free-memory check
            source.config, args.block_size, dtype, tokens=args.cache_tokens, gb=args.cache_gb
        )
        return cls(source, tokenizer, device, dtype, num_blocks, args.block_size, rules)

    @property
    def context(self) -> int:
        return self.source.config.max_position_embeddings

    def renderer(self) -> TraceRenderer:
        return TraceRenderer(self.tokenizer, self.source.eos_ids)

    def units(self) -> dict[str, int]:
        """Each rule's unit of what it serves, in tokens (the local cache's: a block)."""
        return {LOCAL: self.block_size} | {n: HOSTED[n]().unit for n in self.rules if n != LOCAL}

    def analyzer(self) -> Analyzer:
        """A fresh analyzer: an empty local cache and fresh hosted rules."""
        salt = f"{self.source.digest}:{dtype_name(self.dtype)}".encode()
        local = LocalRule(BlockManager(self.num_blocks, self.block_size, salt), context=self.context)
        return Analyzer(self.renderer(), local, [HOSTED[n]() for n in self.rules if n != LOCAL])


def run_analysis(
    args: argparse.Namespace, requests: list[TraceRequest], rules: list[str], notes: list[str] | None = None
) -> int:
    check_out(args)  # a bad --out costs no tokenizer load
    setup = AnalysisSetup.open(args, rules, requests)
    source, dtype, device, num_blocks = setup.source, setup.dtype, setup.device, setup.num_blocks
    context = setup.context
    analyzer = setup.analyzer()
    hidden = estimate(requests, getattr(args, "hidden_prefix_tokens", None))
    records = analyzer.run(requests, keep_ids=args.pressure, hidden=hidden)
    refused = [r.served[LOCAL].why_none for r in records if LOCAL in r.served]
    over, over_cache = (sum(1 for why in refused if mark in why) for mark in (OVER_CONTEXT, OVER_CACHE))
    if over:
        print(
            f"[{over} of {len(records)} requests do not fit the {context:,}-token context of "
            f"{source.model_id}: a full replay refuses them; here the local cache serves them nothing "
            f"(see why_none); {hint(max(r.prompt_tokens for r in records))}]",
            file=sys.stderr,
        )
    if over_cache:
        print(
            f"[{over_cache} of {len(records)} requests do not fit the local cache of "
            f"{num_blocks * args.block_size:,} tokens: a full replay refuses them; here they are served "
            "nothing (see why_none); --cache-tokens N sizes the cache]",
            file=sys.stderr,
        )
    pressure: list[PressurePoint] = []
    if args.pressure and not analyzer.prompts:
        raise TraceError("--pressure replays prompts: these traces hold usage only, no content")
    if args.pressure:
        sizes = capacities(analyzer.prompts, args.block_size, args.cache_tokens)
        pressure = sweep(analyzer.prompts, args.block_size, sizes)
    name = requests[0].session if len({r.session for r in requests}) == 1 else f"{len(args.traces)}-traces"
    out = named_run_dir(args, f"replay-analyze-{name}-{model_slug(source.model_id)}")
    info = identity(source, dtype, device, args.block_size, num_blocks * args.block_size)
    env = run_environment(info, "replay --analyze", args) | {
        "context_tokens": context,
        "over_context_requests": over,
        "over_cache_requests": over_cache,
    }
    plots, notes = _plots(records, rules, pressure, out, name), [*(notes or []), *hidden_notes(hidden)]
    timelines, left = plot_timelines(records, out)
    plots += [(f, f"cached share over time, {f[9:-4]}") for f in timelines]
    if left:
        notes.append(
            f"timelines drawn for the {len(timelines)} sessions with the most requests, not the other {left}"
        )
    write_trace_results(out, f"Trace analysis: {name}", env, records, rules, pressure, plots, notes)
    for note in notes:
        print(note)
    print("\n".join(messages_only(records)))
    print(
        table(
            [r.row() for r in records], [*REQUEST_COLUMNS, *(f"{x}_cached" for x in rules if x != LOCAL), WHY]
        )
    )
    print(table(rule_summary(records, rules), RULE_COLUMNS))
    print("\n".join(summary_tables(records, rules)))
    return written(out)


def _plots(
    records: list[AnalyzedRequest], rules: list[str], pressure: list[PressurePoint], out: Path, name: str
) -> list[tuple[str, str]]:
    """The cumulative share per rule, the token strip and the pressure curves (those that have data)."""
    plots = []
    served = [r for r in records if r.served]  # usage-only requests have no predictions
    if served:
        title = f"Cached share so far, per cache rule: {name}"
        plot_rule_shares(served, rules, out / "cached_share_by_rule.png", title)
        strip = [r for r in records if r.regions]
        plot_strip(
            strip,
            out / "token_strip.png",
            "Where local reuse ends on each session's last request",
            "prompt token index",
        )
        plots += [
            ("cached_share_by_rule.png", "cumulative cached share per rule"),
            ("token_strip.png", "token strip"),
        ]
    if pressure:
        plot_pressure(pressure, out / "pressure.png", f"Local cache hit rate against capacity: {name}")
        plots.append(("pressure.png", "hit rate against capacity, per eviction policy"))
    return plots
