"""The device check's summary: each step's status, the test counts, and each benchmark run's key ratios
(ours / transformers, lower is better) against the CUDA targets.

Targets (CUDA, bfloat16, same weights): a decode step at 2,048 cached tokens at least 3x faster than
transformers' (ratio <= 1/3), and prefill within 1.1x of transformers' (ratio <= 1.1).
"""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from bench_compare import BenchError, load_run, metrics

TARGETS = {"decode": 1 / 3, "prefill": 1.1}


def test_counts(path: Path) -> dict[str, int] | None:
    """Totals of a pytest --junitxml file (None when the tests did not get to write it)."""
    try:
        suite = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    if suite is None:
        return None
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    return counts | {"passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]}


def key_ratios(path: Path, decode_context: int) -> dict[str, Any] | None:
    """decode @context and every prefill length, ours / transformers, and whether they meet the targets."""
    try:
        run = load_run(path)
    except BenchError:
        return None
    ratios = metrics(run)
    decode = ratios.get(f"ours/transformers decode @{decode_context}")
    prefill = {
        name.removeprefix("ours/transformers "): value
        for name, value in ratios.items()
        if name.startswith("ours/transformers prefill ")
    }
    met = (
        decode is not None
        and decode <= TARGETS["decode"]
        and all(v <= TARGETS["prefill"] for v in prefill.values())
    )
    return {"model": run.model, "decode": decode, "prefill": prefill, "targets_met": met, "ratios": ratios}


def kernel_lines(path: Path) -> list[str]:
    """An attention kernel check (scripts/kernel_check.py): the backend, which fused or paged kernels the warm
    prefill and a batched decode ran, warm / cold, and the decode step's host share (CUDA)."""
    if not path.exists():
        return [f"Attention kernels: no result (see {path.stem}.log)."]
    k = json.loads(path.read_text())
    target = f" (target <= {k['target']})" if k["target"] is not None else ""
    share, graphs = k.get("decode_host_share"), k.get("decode_host_share_graphs")
    host = f"; decode step host share {share:.1%}" if share is not None else ""
    host += f" ({graphs:.1%} as CUDA graphs)" if graphs is not None else ""
    return [
        f"Attention ({k.get('attention', '?')}): warm prefill ({k['length']} tokens, one block cached) fused "
        f"{', '.join(k['fused_kernels']) or 'NONE'}; decode {', '.join(k.get('decode_kernels', [])) or 'NONE'}; "
        f"math fallback {', '.join(k['math_fallback']) or 'none'}; warm / cold {k['warm_over_cold']:.3f} "
        f"[{k['warm_over_cold_min']:.3f}–{k['warm_over_cold_max']:.3f}], {k['rounds']} rounds{target}{host}: "
        + ("ok" if k["ok"] else "NOT ok")
    ]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def summarize(
    out: Path,
    device: str,
    description: str,
    dtype: str,
    decode_context: int,
    commit: str,
    results: list[dict],
) -> dict[str, Any]:
    """{"data": what summary.json holds, "markdown": summary.md}."""
    tests = test_counts(out / "tests.xml")
    benches = {
        r["step"]: key_ratios(out / f"{r['step']}.json", decode_context)
        for r in results
        if r["step"].startswith("bench-")
    }
    data = {
        "device": device,
        "description": description,
        "dtype": dtype,
        "commit": commit.removesuffix("+dirty"),
        "dirty": commit.endswith("+dirty"),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "steps": results,
        "tests": tests,
        "benchmarks": benches,
        "targets": TARGETS,
    }
    lines = [
        f"# Device check: {device} ({description}), {dtype}",
        "",
        f"Commit {data['commit']} ({'DIRTY tree' if data['dirty'] else 'clean tree'}), {data['date']}, "
        f"{sum(r['seconds'] for r in results):.0f} s in all.",
        "",
        "| step | status | seconds | cap (s) |",
        "|---|---|---|---|",
        *(f"| {r['step']} | {r['status']} | {r['seconds']} | {r['timeout_s']} |" for r in results),
        "",
        "Tests: "
        + (
            ", ".join(f"{tests[k]} {k}" for k in ("passed", "failures", "errors", "skipped"))
            if tests
            else "no result file"
        )
        + " (tests.xml, tests.log).",
        "",
        f"## Ours / transformers (same weights, device and dtype; lower is better; decode at {decode_context})",
        "",
    ]
    prefills = sorted(
        {p for b in benches.values() if b for p in b["prefill"]}, key=lambda p: int(p.split()[-1])
    )
    header = ["model", f"decode @{decode_context}", *prefills, "CUDA targets"]
    lines += [_row(header), "|" + "---|" * len(header)]
    for step, bench in benches.items():
        if bench is None:
            lines.append(_row([step.removeprefix("bench-"), f"no result (see {step}.log)"]))
            continue
        verdict = ("met" if bench["targets_met"] else "NOT met") if device == "cuda" else "n/a (not CUDA)"
        prefill = [_cell(bench["prefill"].get(p)) for p in prefills]
        lines.append(_row([bench["model"], _cell(bench["decode"]), *prefill, verdict]))
    if (
        out / "warm-up.json"
    ).exists():  # the kernels' first use (FlashInfer's JIT compile), before any timing
        w = json.loads((out / "warm-up.json").read_text())
        graphs = (
            f", capturing the decode graphs {w['graphs_s']:.1f} s" if w.get("graphs_s") is not None else ""
        )
        lines += ["", f"Attention kernels' warm-up ({w['attention']}): {w['warm_up_s']:.1f} s{graphs}."]
    lines += ["", *kernel_lines(out / "kernels.json")]
    if (out / "kernels-torch.json").exists():
        lines += kernel_lines(out / "kernels-torch.json")
    lines += [
        "",
        f"CUDA targets: decode <= {TARGETS['decode']:.3f} (3x faster), every prefill <= "
        f"{TARGETS['prefill']}. Full reports: bench-<model>.md / .png, layout/report.md.",
        "",
    ]
    return {"data": data, "markdown": "\n".join(lines)}
