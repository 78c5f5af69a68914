"""`compaction --answers`: each policy's context at the end of the conversation, asked the ten questions of
engine/bench/workloads/compaction_questions.py, answered greedily by the engine (untimed; every question of
one context shares its tokens in the prefix cache under the conversation's own salt)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from engine.bench.workloads.compaction_questions import KINDS, Question, verdict
from engine.errors import CompactionError
from engine.prompts.chat import Message
from engine.runtime.engine import Engine

ANSWER_TOKENS = 32
# conversation -> its contexts after the end, one per question (CompactionError: it cannot fit)
Contexts = Callable[[list[str]], list[list[Message]]]


def ask_after_the_end(
    engine: Engine,
    contexts: dict[str, Contexts],
    refused: dict[str, tuple[int, str]],
    questions: list[Question],
    max_new_tokens: int = ANSWER_TOKENS,
) -> tuple[dict[str, dict[str, Any]], bool]:
    """Per conversation: the context's tokens (without the question) and every answer with its verdict, or
    why it has no context (refused during the replay, or unable to fit one more request). Each context is
    made once: making it moves the last turn into the conversation's history. A progress bar counts the
    questions. After a Ctrl-C: the conversations whose every question was answered, and True (cut short)."""
    out: dict[str, dict[str, Any]] = {}
    progress = tqdm(total=len(contexts) * len(questions), desc="answers", unit="question")
    try:
        for name, after_the_end in contexts.items():
            out[name] = answered(
                engine, name, after_the_end, refused, questions, max_new_tokens, progress.update
            )
    except KeyboardInterrupt:
        return out, True
    finally:
        progress.close()
    return out, False


def answered(
    engine: Engine,
    name: str,
    after_the_end: Contexts,
    refused: dict[str, tuple[int, str]],
    questions: list[Question],
    max_new_tokens: int,
    advance: Callable[[int], object],
) -> dict[str, Any]:
    """One conversation's entry of `ask_after_the_end`; `advance(n)` after every n questions done."""
    if name in refused:
        advance(len(questions))
        return {"refused": f"refused at turn {refused[name][0]}: no context at the end"}
    try:
        prompts = after_the_end([q.text for q in questions])
    except CompactionError as e:
        advance(len(questions))
        return {"refused": str(e)}
    answers = []
    for q, messages in zip(questions, prompts, strict=True):
        text = engine.generate(messages, max_new_tokens, cache_salt=f"answers {name}").text
        answers.append(
            {"kind": q.kind, "question": q.text, "expected": q.expected, "answer": text}
            | {"verdict": verdict(q, text)}
        )
        advance(1)
    return {"context_tokens": len(engine.render(prompts[0][:-1])), "answers": answers}


def answer_rows(
    answers: dict[str, dict[str, Any]], policy_rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per conversation: right answers per kind, accuracy, stale answers, beside the tokens kept and
    the cache cost of its replay (`policy_rows`)."""
    cost = {r["conversation"]: r for r in policy_rows}
    rows = []
    for name, a in answers.items():
        row: dict[str, Any] = {"conversation": name}
        if "refused" in a:
            rows.append(row | {"accuracy": None, "note": a["refused"]})
            continue
        row["context_tokens"] = a["context_tokens"]
        for kind in KINDS:
            of_kind = [x for x in a["answers"] if x["kind"] == kind]
            row[kind] = f"{sum(x['verdict'] == 'right' for x in of_kind)}/{len(of_kind)}"
        row["accuracy"] = sum(x["verdict"] == "right" for x in a["answers"]) / len(a["answers"])
        row["stale"] = sum(x["verdict"] == "stale" for x in a["answers"])
        row["computed_tokens"] = cost[name]["computed_tokens"]
        row["cached_share"] = cost[name]["cached_share"]
        rows.append(row)
    return rows
