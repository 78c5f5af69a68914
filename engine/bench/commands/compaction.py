"""`python -m engine.bench compaction`: the run (its description and flags: engine/bench/flags/compaction.py)."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from engine.bench.args import open_engine
from engine.bench.harness.compaction_answers import answer_rows, ask_after_the_end
from engine.bench.harness.replayer import Conversation, Replayer, Request, TurnRecord, finished_turns
from engine.bench.reporting.replay_plots import plot_compaction, plot_cumulative
from engine.bench.reporting.replay_report import summarize_turns, table, write_results
from engine.bench.reporting.results import environment
from engine.bench.reporting.run_folder import interrupted, run_dir, written
from engine.bench.reporting.stats import per_pass, spread
from engine.bench.workloads.compaction_policies import (
    Compactor,
    History,
    Summarizer,
    extractive_summary,
)
from engine.bench.workloads.compaction_questions import questions, updates_for
from engine.bench.workloads.longchat import PINNED, SYSTEM, ChatTurn, build_long_chat
from engine.errors import CompactionError
from engine.prompts.chat import Message
from engine.runtime.engine import Engine

PREFIXES = ("stable", "timestamp-first")
MIN_ANSWER_TURNS = 6  # a value set and changed, a middle turn and the second-to-last one, all apart
ANSWERS_NOTE = (
    "What each context knows at the end (`--answers`): ten questions asked after the last turn, the history "
    "compacted as the policy compacts any request; right answers per kind (rules and names, values later "
    "changed, facts only in tool results, the last thing said), `stale`: a changed value answered with its "
    "earlier value; beside the context's tokens and its replay's cache cost."
)
POLICY_COLUMNS = [
    "conversation",
    "max_utilization",
    "events",
    "cache_breaks",
    "computed_tokens",
    "passes",
    "total_ttft_s",
    "cached_share",
    "refused_at_turn",
]


class CompactedChat:
    """One conversation under one policy and prefix: history grows turn by turn and is compacted in place."""

    def __init__(self, chat: list[ChatTurn], prefix: str, compactor: Compactor) -> None:
        self.chat, self.prefix, self.compactor = chat, prefix, compactor
        self.history = History()

    def system(self, t: int) -> Message:
        system = SYSTEM + "\n\n<pinned>\n" + "\n".join(PINNED) + "\n</pinned>"
        if self.prefix == "timestamp-first":
            system = f"Current time: {self.chat[t].time}\n{system}"
        return {"role": "system", "content": system}

    def frame(self, t: int) -> Any:
        turn = self.chat[t]
        return lambda h: [self.system(t), *h.messages(), turn.user, turn.call, turn.result]

    def after_the_end(self, questions: list[str]) -> list[list[Message]]:
        """Each question as the request after the last turn (its reply now history), the history compacted
        for the longest of them as the policy compacts any request; CompactionError when it cannot fit.
        Called once, after the replay: it appends the last turn to the history."""
        t, last = len(self.chat) - 1, self.chat[-1]
        self.history.turns.append(
            [last.user, last.call, last.result, {"role": "assistant", "content": last.reply}]
        )

        def asking(question: str) -> Any:
            return lambda h: [self.system(t), *h.messages(), {"role": "user", "content": question}]

        self.compactor.fit(self.history, asking(max(questions, key=len)))
        return [asking(q)(self.history) for q in questions]

    def request(self, t: int, replies: list[str]) -> Request:
        if t > 0:
            prev = self.chat[t - 1]
            self.history.turns.append(
                [prev.user, prev.call, prev.result, {"role": "assistant", "content": replies[-1]}]
            )
        event = self.compactor.fit(self.history, self.frame(t))
        messages = self.frame(t)(self.history)
        used = self.compactor.count(messages)
        return Request(
            messages,
            None,
            {
                "utilization": used / self.compactor.budget,
                "compaction": event,
                "folded_turns": self.history.folded,
            },
        )


def model_summarizer(engine: Engine) -> Summarizer:
    """The model writes the prose (untimed, on a KV pool of its own, so it evicts nothing of the replay's
    cache); durable lines are carried by the compactor."""
    engine = engine.with_own_pool(engine.config.max_position_embeddings)

    def summarize(previous: str, turns: list[list[Message]]) -> str:
        transcript = "\n".join(f"{m['role']}: {m.get('content') or ''}" for turn in turns for m in turn)
        ask = (
            f"Previous summary: {previous or '(none)'}\n\nSummarize in at most three sentences:\n{transcript}"
        )
        return engine.generate(
            [{"role": "user", "content": ask}], max_new_tokens=96, cache=False
        ).text.strip()

    return summarize


def policy_rows(
    records: list[TurnRecord], refused: dict[str, tuple[int, str]], names: list[str]
) -> list[dict]:
    """Token facts per policy (deterministic) and its TTFT summed over the turns of each pass (median with
    min-max over passes)."""
    rows = []
    for name in names:
        rs = [r for r in records if r.conversation == name]
        later = [r for r in rs if r.turn > 1] or rs
        totals = spread(per_pass([r.ttft_passes_s for r in rs], sum)) if rs else None
        rows.append(
            {
                "conversation": name,
                "max_utilization": max((r.meta["utilization"] for r in rs), default=0.0),
                "events": sum(1 for r in rs if r.meta["compaction"]),
                "cache_breaks": sum(1 for r in rs if r.first_change >= 0),
                "computed_tokens": sum(r.computed_tokens for r in rs),
                "passes": totals["n"] if totals else 0,
                "total_ttft_s": totals["median"] if totals else None,
                "total_ttft_s_min": totals["min"] if totals else None,
                "total_ttft_s_max": totals["max"] if totals else None,
                "cached_share": sum(r.cached_tokens for r in later)
                / max(1, sum(r.prompt_tokens for r in later)),
                "refused_at_turn": refused.get(name, (None, ""))[0],
            }
        )
    return rows


def conversations(
    engine: Engine,
    chat: list[ChatTurn],
    policies: list[str],
    budget: int,
    summarizer: Summarizer,
    holders: dict[str, CompactedChat] | None = None,
) -> list[Conversation]:
    """policy x prefix conversations over the same chat, each with the chat's scripted replies (each one's
    CompactedChat put in `holders` by name, when given)."""

    def count(messages: list[Message]) -> int:
        return len(engine.render(messages))

    convs = []
    for policy, prefix in itertools.product(policies, PREFIXES):
        holder = CompactedChat(chat, prefix, Compactor(policy, budget, count, summarizer))
        if holders is not None:
            holders[f"{policy}/{prefix}"] = holder
        convs.append(Conversation(f"{policy}/{prefix}", holder.request, lambda t: chat[t].reply))
    return convs


def main(args: argparse.Namespace) -> int:
    if args.answers and args.turns < MIN_ANSWER_TURNS:
        raise CompactionError(f"--answers needs --turns of at least {MIN_ANSWER_TURNS}, got {args.turns}")
    engine = open_engine(args)
    updates = updates_for(args.turns, args.seed) if args.answers else None
    chat = build_long_chat(
        engine.tokenizer, args.turns, args.result_tokens, args.seed, updates.note if updates else None
    )
    summarizer = model_summarizer(engine) if args.summarizer == "model" else extractive_summary

    holders: dict[str, CompactedChat] = {}
    convs = conversations(engine, chat, args.policies, args.budget, summarizer, holders)
    names = [c.name for c in convs]
    replayer = Replayer(engine, args.repeats, cold=False)
    records, partial = finished_turns(lambda: replayer.run(convs, args.turns, desc="compaction"))
    if partial and not records:
        return interrupted(0, "turns", None)
    if not records:
        raise CompactionError("every conversation was refused on its first turn: raise --budget")
    rows = policy_rows(records, replayer.refused, names)
    answers, answered, answers_cut = {}, [], False
    if updates is not None and not partial:
        contexts = {name: h.after_the_end for name, h in holders.items()}
        qs = questions(chat, updates)
        answers, answers_cut = ask_after_the_end(engine, contexts, replayer.refused, qs)
        answered = answer_rows(answers, rows)

    out = run_dir(args, "compaction", engine)
    title = f"{engine.info['model']} ({engine.info['dtype']}, {engine.info['device']}), budget {args.budget}"
    plot_compaction(records, out / "compaction.png", title)
    plot_cumulative(
        [r for r in records if r.conversation.endswith("/stable")],
        out / "cumulative.png",
        f"Stable prefix, cumulative: {title}",
    )
    refusals = [f"- `{name}` refused at turn {turn}: {why}" for name, (turn, why) in replayer.refused.items()]
    events = [
        f"- `{r.conversation}` turn {r.turn}: {r.meta['compaction']}"
        for r in records
        if r.meta["compaction"] and r.conversation.endswith("/stable")
    ][:12]
    notes = [
        "Every policy replays the same scripted replies and tool results: only the policy and the prefix differ.",
        "Per policy (all turns): `cache_breaks` counts requests that did not extend the previous one; "
        "`total_ttft_s` is summed over the turns of a pass, median [min–max] over passes.",
        "",
        table(rows, POLICY_COLUMNS),
        "",
        *refusals,
        "",
        "First compaction events (stable prefix):",
        *events,
        *(["", ANSWERS_NOTE, "", table(answered, list(answered[0]))] if answered else []),
        *(
            ["", f"Answers interrupted: {len(answers)} of {len(holders)} contexts answered."]
            if answers_cut
            else []
        ),
    ]
    write_results(
        out,
        f"Compaction over {args.turns} turns",
        environment(engine, "compaction", args, partial or answers_cut),
        records,
        summarize_turns(records, names[0]),
        notes,
        [
            ("compaction.png", "utilization and cached share per turn"),
            ("cumulative.png", "cumulative computed tokens and TTFT"),
        ],
        {"policies": rows, "refused": replayer.refused} | ({"answers": answers} if answers else {}),
        replayer.passes,
    )
    print(table(rows, POLICY_COLUMNS))
    print(*refusals, sep="\n")
    if answered:
        print(table(answered, list(answered[0])))
    if partial:
        return interrupted(len(records), "turns", out)
    if answers_cut:
        return interrupted(len(records), f"turns and {len(answers)} contexts' answers", out)
    return written(out)
