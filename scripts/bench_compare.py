"""Compare a benchmark run with a committed baseline of the same device, on ratios measured within each run.

    python scripts/bench_compare.py results/bench/cpu/run.json results/bench/cpu/baseline.json

Every metric is a ratio of two medians from the same run, so the machine's speed and most of its load
cancel out (lower is better):
- `ours/transformers <case>`: our time over `transformers`' time for the same case, weights and device;
- `ours/transformers alternating prefill N`: the same for a cold prefill, the two sides alternating call by
  call: the median of the per-round ratios (its min-max is in the record);
- `warm/cold cached S+V`: our cached TTFT over our full (cold) prefill of S+V (at most 1: a cached prefix never
  makes a prefill slower);
- `achieved/ideal cached S+V`: our (cached TTFT / full prefill of S+V) over the FLOP-model ideal ratio;
- `lookup share S+V`: hashing and looking up the blocks of an (S+V)-token prompt over our cached TTFT;
- `layout ratio replay N turns`: the last turn's TTFT in the stable-first layout over timestamp-first;
- `warm/DynamicCache S+64`, `warm/StaticCache S+64`: our warm TTFT (S cached, 64 new, `generate`) over
  transformers' forward of the same 64 tokens over a contiguous cache of S (each of its two caches),
  interleaved (median of the per-round ratios; records of one cache name it `contiguous`);
- `warm memory share S+64`: the memory one such warm request adds over the cached prefix's K/V bytes;
- `decode step B/1 @N`: one engine step while B requests decode over one while a single one does (`Engine.step`);
- `batch cost B @N`: the time per output token of B requests decoding together over one request's (1 / the
  batching gain in output tokens per second);
- `batched/one by one prefill N`: four prompts of N / 4 tokens prefilled in one batch over one after another.
- `decode step/weights @N`: our decode step over one row through every weight it reads, alternating (what
  the step adds to the weight stream, its floor on a CPU).
A metric regresses when the current run's value lies above the baseline's own spread: the highest the
metric takes over the baseline's rounds (a ratio of two medians: the slowest round of the numerator over the
fastest of the denominator; an alternating ratio: its pairs' maximum). So the gate is as wide as the reference
run was noisy, not a fixed percentage; a metric whose baseline records no spread (a layout's TTFT ratio, a
memory share, records without min/max) is shown and not judged. Metrics of cases the baseline lacks are listed
as new, and the baseline's metrics the run lacks as missing: neither is judged, so a gate runs with
`--strict`, which fails (exit status 3) when the baseline does not cover the run. Exit status: 0 no
regression, 1 a regression, 2 unusable input files, 3 (--strict) a baseline that does not cover the run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class BenchError(Exception):
    """An input file that cannot be compared: missing, not a benchmark run, or of another device or model."""


@dataclass
class Run:
    path: Path
    device: str
    dtype: str
    model: str
    medians: dict[tuple[str, str], float] = field(default_factory=dict)  # (case label, impl) -> seconds
    info: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # the same keys -> extra_info
    stats: dict[tuple[str, str], dict[str, Any]] = field(
        default_factory=dict
    )  # ... -> pytest-benchmark stats
    machine: dict[str, Any] = field(default_factory=dict)


def label(info: dict[str, Any]) -> str:
    """The case a record measures, without the implementation: `prefill 2048`, `cached 4096+32`, ..."""
    case = info["case"]
    if case == "cached":
        return f"cached {info['cached']}+{info['new']}"
    if case == "decode":
        return f"decode @{info['context']}"
    if case == "block_size":
        return f"block size {info['block_size']}"
    if case == "replay":
        return f"replay {info['turns']} turns"
    if case == "splice":  # two arms of one case, both ours
        return f"{info['arm']} {info['tokens']}"
    if case == "decode_batch":
        return f"decode batch {info['batch']} @{info['context']}"
    if case == "decode_weights":
        return f"decode step/weights @{info['context']}"
    if case == "decode_step_batch":
        return f"decode step batch {info['batch']} @{info['context']}"
    if case == "decode_step_scattered":  # B requests over prompts of their own, block tables in many runs
        return f"decode step scattered {info['batch']} @{info['context']}"
    if case == "warm_contiguous":
        return f"warm {info['cached']}+{info['new']}"
    return f"{case} {info['tokens']}"


def load_run(path: Path) -> Run:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise BenchError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BenchError(f"{path}: not readable JSON ({e})") from None
    records = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(records, list):
        raise BenchError(f"{path}: not a pytest-benchmark JSON file (no 'benchmarks' list)")
    ours = [r for r in records if isinstance(r, dict) and "case" in r.get("extra_info", {})]
    if not ours:
        raise BenchError(f"{path}: holds no kvtestbed benchmark records")
    try:
        identity = {
            (r["extra_info"]["device"], r["extra_info"]["dtype"], r["extra_info"]["model"]) for r in ours
        }
        if len(identity) > 1:
            raise BenchError(
                f"{path}: mixes devices, dtypes or models {sorted(identity)}; compare one at a time"
            )
        run = Run(path, *identity.pop(), machine=data.get("machine_info", {}))
        for r in ours:
            key = (label(r["extra_info"]), r["extra_info"]["impl"])
            run.medians[key], run.info[key], run.stats[key] = (
                float(r["stats"]["median"]),
                r["extra_info"],
                r["stats"],
            )
    except (KeyError, TypeError, ValueError) as e:
        raise BenchError(f"{path}: a benchmark record lacks or garbles {e}") from None
    return run


def natural(key: tuple[str, str]) -> list[Any]:
    """Sort `decode @512` before `decode @2048`."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", " ".join(key))]


@dataclass(frozen=True)
class Metric:
    value: float
    spread: tuple[float, float] | None = None  # the metric over the run's own rounds: (lowest, highest)


def _quotient(run: Run, top: tuple[str, str], bottom: tuple[str, str], scale: float = 1.0) -> Metric:
    """median(top) / median(bottom) x scale, and its spread: the rounds' extremes against each other (the
    fastest top over the slowest bottom, and the reverse), where both records hold their min and max."""
    value = run.medians[top] / run.medians[bottom] * scale
    a, b = run.stats[top], run.stats[bottom]
    if not all(isinstance(s.get(k), (int, float)) and s[k] > 0 for s in (a, b) for k in ("min", "max")):
        return Metric(value)
    return Metric(value, (a["min"] / b["max"] * scale, a["max"] / b["min"] * scale))


def _recorded(info: dict[str, Any]) -> Metric:
    """A ratio the benchmark recorded itself (the median of alternating pairs), with the pairs' min-max."""
    low, high = info.get("ratio_min"), info.get("ratio_max")
    spread = (
        (float(low), float(high))
        if isinstance(low, (int, float)) and isinstance(high, (int, float))
        else None
    )
    return Metric(float(info["ratio"]), spread)


def measured(run: Run) -> dict[str, Metric]:
    """Every ratio the run allows (see the module docstring), with its spread over the run's rounds where
    the records give one."""
    out: dict[str, Metric] = {}
    cases = sorted(run.medians, key=natural)
    for case, impl in cases:
        if impl == "ours" and run.medians.get((case, "transformers")):
            out[f"ours/transformers {case}"] = _quotient(run, (case, impl), (case, "transformers"))
    for case, impl in cases:
        key, info = (case, impl), run.info[(case, impl)]
        if info["case"] == "replay":
            out[f"layout ratio {case}"] = Metric(info["ttft_ratio"])
        if info["case"] == "prefill_alternating":
            out[f"ours/transformers alternating prefill {info['tokens']}"] = _recorded(info)
        if info["case"] == "prefill_batch":
            out[f"batched/one by one prefill {info['tokens']}"] = _recorded(info)
        if info["case"] == "decode_weights":
            out[case] = _recorded(info)
        if info["case"] == "warm_contiguous":
            warm = f"{info['cached']}+{info['new']}"
            out[f"warm/{info['impl'].split('/')[1]} {warm}"] = _recorded(info)  # its second side
            for cache, against in info.get("ratios", {}).items():  # and every further side
                out[f"warm/{cache} {warm}"] = _recorded(against)
            out[f"warm memory share {warm}"] = Metric(info["memory_share"])
        one = (f"decode step batch 1 @{info.get('context')}", "ours")
        if info["case"] == "decode_step_batch" and info["batch"] > 1 and run.medians.get(one):
            out[f"decode step {info['batch']}/1 @{info['context']}"] = _quotient(run, key, one)
        solo = (f"decode batch 1 @{info.get('context')}", "ours")
        if info["case"] == "decode_batch" and info["batch"] > 1 and run.medians.get(solo):  # per token
            out[f"batch cost {info['batch']} @{info['context']}"] = _quotient(
                run, key, solo, 1 / info["batch"]
            )
        recompute = (f"recompute {info.get('tokens')}", "ours")
        if info["case"] == "splice" and info["arm"] == "splice" and run.medians.get(recompute):
            out[f"splice/recompute {info['tokens']}"] = _quotient(run, key, recompute)
        if impl != "ours" or info["case"] != "cached":
            continue
        total = info["cached"] + info["new"]
        full, lookup = (f"prefill {total}", "ours"), (f"lookup {total}", "ours")
        if run.medians.get(full):
            out[f"warm/cold {case}"] = _quotient(run, key, full)
            out[f"achieved/ideal {case}"] = _quotient(run, key, full, 1 / info["ideal_ratio"])
        if run.medians.get(lookup):
            out[f"lookup share {case.removeprefix('cached ')}"] = _quotient(run, lookup, key)
    return out


def metrics(run: Run) -> dict[str, float]:
    """Every ratio the run allows, its value only."""
    return {name: m.value for name, m in measured(run).items()}


@dataclass
class Comparison:
    lines: list[str]  # the table: every metric of either run
    regressed: list[str]  # above the baseline's own spread
    new: list[str]  # measured by the run, lacking in the baseline: not judged
    missing: list[str]  # in the baseline, not in the run


def compare(current: Run, baseline: Run) -> Comparison:
    """Every metric of both runs: a metric regresses when the current run's value lies above the highest the
    baseline's own rounds give it; one whose baseline records no spread, or that the baseline lacks, is
    shown, not judged."""
    if (current.device, current.dtype, current.model) != (baseline.device, baseline.dtype, baseline.model):
        raise BenchError(
            f"{current.path} ({current.device}, {current.dtype}, {current.model}) and {baseline.path} "
            f"({baseline.device}, {baseline.dtype}, {baseline.model}) measure different things"
        )
    now, before = measured(current), measured(baseline)
    common = [name for name in before if name in now]
    if not common:
        raise BenchError(
            f"{current.path} and {baseline.path} share no metric (different shapes, e.g. --quick?)"
        )
    out = Comparison(
        [f"{'metric':<44} {'baseline':>9} {'its spread':>21} {'current':>9} {'change':>8}"], [], [], []
    )
    for name in common:
        base, value = before[name], now[name].value
        spread = f"{base.spread[0]:.4g}–{base.spread[1]:.4g}" if base.spread else "none"
        bad = base.spread is not None and value > base.spread[1]
        out.regressed += [name] if bad else []
        flag = "  REGRESSION" if bad else ("  (not judged)" if base.spread is None else "")
        out.lines.append(
            f"{name:<44} {base.value:>9.4g} {spread:>21} {value:>9.4g} {value / base.value - 1:>+8.1%}{flag}"
        )
    out.missing = [name for name in before if name not in now]
    out.lines += [f"{name:<44} {before[name].value:>9.4g} {'':>21} {'missing':>9}" for name in out.missing]
    out.new = [name for name in now if name not in before]
    out.lines += [f"{name:<44} {'-':>9} {'':>21} {now[name].value:>9.4g} {'new':>8}" for name in out.new]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("current", type=Path, help="a run's --benchmark-json file")
    parser.add_argument("baseline", type=Path, help="the committed baseline of the same device")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="a gate's mode: also exit 3 when the baseline does not cover the run (a metric it lacks, which "
        "nothing judges, or one the run lacks)",
    )
    args = parser.parse_args(argv)
    try:
        result = compare(load_run(args.current), load_run(args.baseline))
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(result.lines))
    uncovered = args.strict and bool(result.new or result.missing)
    if uncovered:
        print(
            f"the baseline {args.baseline} does not cover this run: {len(result.new)} metric(s) it lacks "
            f"({', '.join(result.new) or 'none'}), {len(result.missing)} missing from the run "
            f"({', '.join(result.missing) or 'none'}); make a baseline of this suite on a quiet machine of "
            "the class it gates: scripts/bench.sh baseline"
        )
    if result.regressed:
        print(
            f"{len(result.regressed)} metric(s) above the baseline's own spread: {', '.join(result.regressed)}"
        )
        return 1
    print("no metric above the baseline's own spread")
    return 3 if uncovered else 0


if __name__ == "__main__":
    sys.exit(main())
