"""`python -m engine.bench needle`: the run (its description and flags: engine/bench/flags/needle.py)."""

from __future__ import annotations

import argparse
import bisect
from dataclasses import dataclass
from typing import Any

import torch
from tqdm import tqdm

from engine.bench.args import open_engine
from engine.bench.reporting.needle_report import summarize, write_needle
from engine.bench.reporting.run_folder import interrupted, run_dir, written
from engine.bench.workloads.delivery_log import DeliveryLog, build_log
from engine.bench.workloads.delivery_questions import log_offset, messages, score
from engine.errors import ContextOverflowError, PromptError
from engine.inspect.span_shares import SpanShares, observing
from engine.prompts.chat import render_text
from engine.runtime.engine import Engine


@dataclass(frozen=True)
class Cell:
    length: int
    position: str
    log: DeliveryLog


@dataclass(frozen=True)
class Prompt:
    ids: list[int]
    spans: list[tuple[int, int]]  # prompt tokens of each asked record, in log order


def token_span(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """The tokens whose characters overlap [start, end) (offsets: each token's (first, past-last) char)."""
    ends = [b for _, b in offsets]
    first = bisect.bisect_right(ends, start)
    last = first
    while last < len(offsets) and offsets[last][0] < end:
        last += 1
    return first, last


def render(engine: Engine, log: DeliveryLog, fact: int) -> Prompt:
    """The question's prompt ids and where every asked record sits in them, in tokens."""
    chat = messages(log, fact)
    text = render_text(engine.tokenizer, chat)
    enc = engine.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
    if ids != engine.render(chat):
        raise PromptError("the rendered question tokenizes differently from the engine's own rendering")
    at = log_offset(text, log)
    spans = [token_span(offsets, at + a, at + b) for a, b in map(log.char_span, log.facts)]
    return Prompt(ids, spans)


def plan(engine: Engine, args: argparse.Namespace) -> list[Cell]:
    """Every (length, position) log, each length checked against the window before any question runs."""
    if engine.tokenizer is None:
        raise PromptError(f"{engine.source.model_id} has no tokenizer: needle asks questions in text")
    window = engine.config.max_position_embeddings
    tokenizer = engine.tokenizer

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    cells = []
    for length in args.lengths:
        if length >= window:
            raise ContextOverflowError(
                f"--lengths {length}: a log of {length} tokens does not fit {engine.source.model_id}'s "
                f"context of {window} tokens; refused (a log is never cut)"
            )
        for position in args.positions:
            try:
                log = build_log(count, length, position, args.facts, args.seed)
            except ValueError as e:
                raise PromptError(f"--lengths {length}: {e}; give a longer length or fewer --facts") from None
            need = max(len(render(engine, log, f).ids) for f in log.facts) + args.max_new_tokens
            if need > window:
                raise ContextOverflowError(
                    f"--lengths {length}: the prompt with its question and a {args.max_new_tokens}-token "
                    f"answer takes {need} tokens, over {engine.source.model_id}'s context of {window}; "
                    "refused (a log is never cut)"
                )
            cells.append(Cell(length, position, log))
    return cells


def answer_row(engine: Engine, token_ids: list[int], number_at: int) -> int:
    """Index of the generated token holding character `number_at` of the answer (0 when -1 or none)."""
    for k in range(len(token_ids)):
        if len(engine.tokenizer.decode(token_ids[: k + 1], skip_special_tokens=True)) > number_at >= 0:
            return k
    return 0


def ask(engine: Engine, cell: Cell, which: int, args: argparse.Namespace) -> dict[str, Any]:
    """One question: the greedy answer, its score, and the answering row's attention on the records."""
    log, fact = cell.log, cell.log.facts[which]
    prompt = render(engine, log, fact)
    watch = SpanShares(engine.model, prompt.spans, first=len(prompt.ids) - 1, rows=args.max_new_tokens)
    with observing(engine.model, watch):
        gen = engine.generate(prompt.ids, max_new_tokens=args.max_new_tokens, stop=["\n"])
    result = score(gen.text, log, fact)
    k = answer_row(engine, gen.token_ids, result.number_at)
    row = len(prompt.ids) - 1 + k
    shares = watch.at(row)  # [records, layers, heads]
    others = torch.cat([shares[:which], shares[which + 1 :]]).sum(0)
    a, b = prompt.spans[which]
    return {
        "length": cell.length,
        "position": cell.position,
        "log_tokens": log.tokens,
        "prompt_tokens": len(prompt.ids),
        "cached_tokens": gen.usage.cached_tokens,
        "fact": which,
        "order": log.records[fact].order,
        "tubs": log.records[fact].tubs,
        "fact_tokens": [a, b],
        "answer": gen.text,
        "verdict": result.verdict,
        "number": result.number,
        "source": result.source,
        "holders": result.holders,
        "answer_row": k,
        "uniform_share": (b - a) / (row + 1),
        "share_by_layer": shares[which].mean(-1).tolist(),
        "share_layer_head": shares[which].tolist(),
        "other_facts_share_by_layer": others.mean(-1).tolist(),
    }


def main(args: argparse.Namespace) -> int:
    engine = open_engine(args, timed=False)
    cells = plan(engine, args)
    jobs = [(cell, which) for cell in cells for which in range(args.facts)]
    questions: list[dict[str, Any]] = []
    try:
        for cell, which in tqdm(jobs, desc="needle", unit="question"):
            questions.append(ask(engine, cell, which, args))
        partial = False
    except KeyboardInterrupt:  # keep the questions that finished
        partial = True
        if not questions:
            return interrupted(0, "questions", None)
    out = run_dir(args, "needle", engine)
    cells_out = summarize(questions, engine.config.num_layers, args.top_heads)
    print(write_needle(out, engine, args, cells_out, questions, partial))
    if partial:
        return interrupted(len(questions), "questions", out)
    return written(out)
