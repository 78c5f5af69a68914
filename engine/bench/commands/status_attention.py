"""`python -m engine.bench status-attention`: the run (its description and flags: engine/bench/flags/status_attention.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from engine.bench.args import open_engine
from engine.bench.reporting.replay_report import PARTIAL_NOTE, table
from engine.bench.reporting.results import environment, provenance, write_csv, write_json
from engine.bench.reporting.run_folder import interrupted, run_dir, written
from engine.inspect.attention import AttentionMaps
from engine.prompts.chat import Message
from engine.prompts.regions import STATUS_TAG, render_prompt
from engine.runtime.engine import Engine
from engine.viz.charts import line_chart

NUMBER = "+1 415 555 0142"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "phone_call",
            "description": "Place a phone call to a number.",
            "parameters": {
                "type": "object",
                "properties": {"number": {"type": "string"}},
                "required": ["number"],
            },
        },
    }
]
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"type": "function", "function": {"name": "phone_call", "arguments": {"number": NUMBER}}}],
}
TRAJECTORY: list[Message] = [
    {
        "role": "system",
        "content": "You are a phone assistant. Place calls with the phone_call tool. Policy: call "
        "the same number at most 3 times per conversation; when the limit is reached, "
        "tell the user instead of calling.",
    },
    {"role": "user", "content": f"Please call my dentist at {NUMBER} to confirm my appointment on Thursday."},
    CALL,
    {"role": "tool", "content": '{"number": "+14155550142", "result": "no answer", "duration_s": 32}'},
    CALL,
    {"role": "tool", "content": '{"number": "+14155550142", "result": "busy", "duration_s": 4}'},
    CALL,
    {"role": "tool", "content": '{"number": "+14155550142", "result": "voicemail", "duration_s": 21}'},
    {"role": "user", "content": "Please call them again."},
]
STATUS: Message = {
    "role": "user",
    "content": f"{STATUS_TAG}phone_call invoked 3 times; maximum reached 3/3</agent_status>",
}
CASES = {"without status": TRAJECTORY, "with status": [*TRAJECTORY, STATUS]}
# The raw call records: the assistant's tool calls and the tools' results, by their region labels.
CALL_LABELS = [
    f"{m['role']} #{i}" for i, m in enumerate(TRAJECTORY) if m.get("tool_calls") or m["role"] == "tool"
]


def shares(maps: AttentionMaps, labels: list[str], rows: slice) -> dict[str, list[float]]:
    """Per layer: mean over heads (and the strongest head) of the mean share over `rows`, raw and without
    token 0."""
    present = [label for label in labels if label in maps.region_labels]
    mass = maps.share(present)[:, :, rows] if present else torch.zeros_like(maps.probs[:, :, rows, 0])
    excl = mass / (1 - maps.probs[:, :, rows, 0]).clamp_min(1e-12)  # renormalised without the sink
    return {
        "mean": mass.mean(2).mean(1).tolist(),
        "max_head": mass.mean(2).amax(1).tolist(),
        "excl_token0": excl.mean(2).mean(1).tolist(),
    }


def run_case(engine: Engine, messages: list[Message], max_new_tokens: int) -> dict[str, Any]:
    prompt = render_prompt(engine.tokenizer, messages, TOOLS)
    missing = [label for label in CALL_LABELS if label not in {r.label for r in prompt.regions}]
    assert not missing, f"call records without a region: {missing}"  # regions label message i "<role> #i"
    full = prompt.with_generated(engine.generate(prompt.token_ids, max_new_tokens, cache=False).token_ids)
    last = len(prompt.token_ids) - 1
    maps = engine.attention(full, rows=range(last, len(full.token_ids)))
    answer = full.token_ids[len(prompt.token_ids) :]
    size = {r.label: 0 for r in full.regions}
    for r in full.regions:
        size[r.label] += r.end - r.start
    return {
        "prompt_tokens": len(prompt.token_ids),
        "status_tokens": size.get("status", 0),
        "call_tokens": sum(size[label] for label in CALL_LABELS),
        "answer": engine.tokenizer.decode(answer, skip_special_tokens=True),
        "answer_tokens": len(answer),
        "last_row": {
            "status": shares(maps, ["status"], slice(0, 1)),
            "calls": shares(maps, CALL_LABELS, slice(0, 1)),
            "token0": maps.probs[:, :, 0, 0].mean(1).tolist(),
        },
        "answer_rows": {
            "status": shares(maps, ["status"], slice(1, None)),
            "calls": shares(maps, CALL_LABELS, slice(1, None)),
        },
    }


def main(args: argparse.Namespace) -> int:
    engine = open_engine(args, timed=False)
    cases: dict[str, dict[str, Any]] = {}
    try:
        for name, msgs in tqdm(CASES.items(), desc="cases"):
            cases[name] = run_case(engine, msgs, args.max_new_tokens)
        partial = False
    except KeyboardInterrupt:  # keep the case that finished
        partial = True
        if not cases:
            return interrupted(0, "cases", None)
    out = run_dir(args, "status-attention", engine)
    env = environment(engine, "status-attention", args, partial)
    write_json(
        out / "status_attention.json",
        {
            "environment": env,
            "call_labels": CALL_LABELS,
            "cases": cases,
        },
    )
    write_json(out / "messages_with_status.json", {"messages": CASES["with status"], "tools": TOOLS})
    rows = [
        {
            "case": name,
            "layer": layer,
            "token0": c["last_row"]["token0"][layer],
            **{
                f"{part}_{stat}": c["last_row"][part][stat][layer]
                for part in ("status", "calls")
                for stat in ("mean", "max_head", "excl_token0")
            },
            **{f"answer_{part}_mean": c["answer_rows"][part]["mean"][layer] for part in ("status", "calls")},
        }
        for name, c in cases.items()
        for layer in range(engine.config.num_layers)
    ]
    write_csv(out / "status_attention.csv", rows)
    text = report(cases, engine.source.model_id)
    head = [*provenance(env), "", *([PARTIAL_NOTE, ""] if partial else [])]
    (out / "report.md").write_text("\n".join([*head, text]) + "\n")
    print(text)
    plot(cases, engine, out)
    if partial:
        return interrupted(len(cases), "cases", out)
    return written(out)


def report(cases: dict[str, dict[str, Any]], model: str) -> str:
    summary = [
        {
            "case": name,
            "prompt tokens": c["prompt_tokens"],
            "status tokens": c["status_tokens"],
            "call-record tokens": c["call_tokens"],
            "last row on status": _mean(c["last_row"]["status"]["mean"]),
            "last row on calls": _mean(c["last_row"]["calls"]["mean"]),
            "status excl. token 0": _mean(c["last_row"]["status"]["excl_token0"]),
            "calls excl. token 0": _mean(c["last_row"]["calls"]["excl_token0"]),
            "answer rows on status": _mean(c["answer_rows"]["status"]["mean"]),
        }
        for name, c in cases.items()
    ]
    answers = "\n".join(
        f"- {name} ({c['answer_tokens']} tokens): {c['answer']!r}" for name, c in cases.items()
    )
    if len(cases) < len(CASES):  # interrupted: nothing to compare
        return "\n\n".join([f"# Status-bar attention: {model}", table(summary, list(summary[0])), answers])
    w, wo = cases["with status"]["last_row"], cases["without status"]["last_row"]
    per_layer = [
        {
            "layer": i,
            "status": w["status"]["mean"][i],
            "status, top head": w["status"]["max_head"][i],
            "status excl. t0": w["status"]["excl_token0"][i],
            "calls": w["calls"]["mean"][i],
            "calls, no status": wo["calls"]["mean"][i],
            "token 0": w["token0"][i],
            "token 0, no status": wo["token0"][i],
        }
        for i in range(len(w["token0"]))
    ]
    return "\n\n".join(
        [
            f"# Status-bar attention: {model}",
            "Shares of attention (mean over heads, then over layers) of the last prompt row and of the "
            "answer's rows. "
            "Uniform attention would give each part its share of the prompt's tokens.",
            table(summary, list(summary[0])),
            "Greedy answers:",
            answers,
            "Per layer, last prompt row, with the status block (mean over heads unless said):",
            table(per_layer, list(per_layer[0])),
        ]
    )


def plot(cases: dict[str, dict[str, Any]], engine: Engine, out: Path) -> None:
    layers = list(range(engine.config.num_layers))
    for stat, name, ylabel in (
        ("mean", "status_attention.png", "share of the last row's attention"),
        ("excl_token0", "status_attention_excl_sink.png", "share, renormalised without token 0"),
    ):
        series = {
            f"{part}, {case}": (layers, c["last_row"][part][stat])
            for case, c in cases.items()
            for part in ("status", "calls")
            if part == "calls" or c["status_tokens"]
        }
        line_chart(
            series,
            out / name,
            title=f"{engine.source.model_id}: status block vs call records (last prompt row)",
            xlabel="layer",
            ylabel=ylabel,
        )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
