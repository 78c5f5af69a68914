"""scripts/bench_compare.py on small synthetic pytest-benchmark files: ratios, their spread over the rounds,
regressions judged against the baseline's own spread, bad inputs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scripts.bench_records import WARM_BOTH_CACHES

_spec = importlib.util.spec_from_file_location(
    "bench_compare", Path(__file__).resolve().parents[2] / "scripts" / "bench_compare.py"
)
assert _spec is not None and _spec.loader is not None
bench_compare = sys.modules["bench_compare"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_compare)

IDENTITY = {"device": "cpu", "dtype": "float32", "model": "synthetic:qwen2.5-0.5b"}


def record(median: float, spread: float | None = None, **info: Any) -> dict[str, Any]:
    """A record; with `spread`, its rounds ran from median x (1 - spread) to median x (1 + spread)."""
    stats = {"median": median}
    if spread is not None:
        stats |= {"min": median * (1 - spread), "max": median * (1 + spread)}
    return {"name": "x", "extra_info": info | IDENTITY, "stats": stats}


def run_file(
    tmp_path: Path, name: str, *, ours_prefill: float = 1.0, spread: float = 0.1, **identity: str
) -> Path:
    """A run: prefill of 544 tokens (ours vs transformers, their rounds within ±`spread` of the median),
    cached 512+32 with its ideal, a lookup, an alternating prefill and both arms of a splice."""
    records = [
        record(ours_prefill, spread, case="prefill", impl="ours", tokens=544),
        record(2.0, spread, case="prefill", impl="transformers", tokens=544),
        record(0.1, case="cached", impl="ours", cached=512, new=32, ideal_ratio=0.05),
        record(0.2, case="cached", impl="transformers", cached=512, new=32, ideal_ratio=0.05),
        record(0.001, case="lookup", impl="ours", tokens=544),
        record(3.0, case="prefill_alternating", impl="ours/transformers", tokens=544, ratio=0.9),
        record(0.2, case="splice", impl="ours", arm="splice", tokens=1024),
        record(4.0, case="splice", impl="ours", arm="recompute", tokens=1024),
    ]
    for r in records:
        r["extra_info"] |= identity
    path = tmp_path / name
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": records}))
    return path


def test_metrics_are_ratios_within_the_run(tmp_path: Path) -> None:
    got = bench_compare.metrics(bench_compare.load_run(run_file(tmp_path, "run.json")))
    assert got == pytest.approx(
        {
            "ours/transformers prefill 544": 0.5,
            "ours/transformers cached 512+32": 0.5,
            "warm/cold cached 512+32": 0.1 / 1.0,
            "achieved/ideal cached 512+32": 0.1 / 1.0 / 0.05,
            "lookup share 512+32": 0.001 / 0.1,
            "ours/transformers alternating prefill 544": 0.9,
            "splice/recompute 1024": 0.2 / 4.0,  # the two arms are two cases, not one overwritten
        }
    )


def test_decode_steps_are_compared_with_transformers_one_sequence_and_the_weights(tmp_path: Path) -> None:
    steps = [
        record(0.09, case="decode", impl="ours", context=4096),
        record(0.12, case="decode", impl="transformers", context=4096),
        record(0.19, case="decode_weights", impl="step/weights", context=512, ratio=1.4, weight_bytes=2e9),
        record(0.02, case="decode_step_batch", impl="ours", batch=1, context=1024),
        record(0.03, case="decode_step_batch", impl="ours", batch=8, context=1024),
        record(0.05, case="decode_step_scattered", impl="ours", batch=8, context=2048, runs_per_row=[20, 1]),
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": steps}))
    got = bench_compare.metrics(bench_compare.load_run(path))
    assert got == pytest.approx(
        {
            "ours/transformers decode @4096": 0.75,
            "decode step/weights @512": 1.4,  # the alternating pairs' median, as recorded
            "decode step 8/1 @1024": 1.5,
        }
    )


def test_the_warm_ttft_is_compared_with_a_contiguous_cache(tmp_path: Path) -> None:
    steps = [
        record(
            1.0,
            case="warm_contiguous",
            impl="ours/contiguous",
            cached=8192,
            new=64,
            ratio=1.1,
            memory_share=0.04,
        ),
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": steps}))
    got = bench_compare.metrics(bench_compare.load_run(path))
    assert got == pytest.approx({"warm/contiguous 8192+64": 1.1, "warm memory share 8192+64": 0.04})


def test_the_warm_ttft_is_compared_with_each_of_transformers_caches(tmp_path: Path) -> None:
    """Interleaved with a DynamicCache and a StaticCache: a ratio against each, each with its pairs' spread."""
    warm = record(1.0, **WARM_BOTH_CACHES)
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": [warm]}))
    got = bench_compare.measured(bench_compare.load_run(path))
    assert got == {
        "warm/DynamicCache 2048+64": bench_compare.Metric(0.9, (0.85, 0.97)),
        "warm/StaticCache 2048+64": bench_compare.Metric(1.01, (0.95, 1.08)),
        "warm memory share 2048+64": bench_compare.Metric(0.04),
    }


def test_batched_decode_is_compared_with_one_request(tmp_path: Path) -> None:
    """8 requests taking 1.6x the time of one give 8 / 1.6 = 5x the output tokens per second."""
    steps = [
        record(1.0, case="decode_batch", impl="ours", batch=1, context=1024, output_tokens=32),
        record(1.6, case="decode_batch", impl="ours", batch=8, context=1024, output_tokens=256),
        record(2.0, case="prefill_batch", impl="batched/one by one", tokens=2048, ratio=0.97),
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": steps}))
    got = bench_compare.metrics(bench_compare.load_run(path))
    assert got == pytest.approx({"batch cost 8 @1024": 0.2, "batched/one by one prefill 2048": 0.97})


def test_a_ratio_spreads_over_the_rounds_of_both_sides(tmp_path: Path) -> None:
    got = bench_compare.measured(bench_compare.load_run(run_file(tmp_path, "run.json", spread=0.1)))
    prefill = got["ours/transformers prefill 544"]
    assert prefill.value == pytest.approx(0.5)
    assert prefill.spread == pytest.approx((0.9 / 2.2, 1.1 / 1.8))  # fastest over slowest, and the reverse
    assert got["warm/cold cached 512+32"].spread is None  # its records hold a median only


def test_an_alternating_ratio_spreads_over_its_pairs(tmp_path: Path) -> None:
    alternating = record(3.0, case="prefill_alternating", impl="ours/transformers", tokens=544, ratio=0.9)
    alternating["extra_info"] |= {"ratio_min": 0.8, "ratio_max": 1.05, "pairs": 7}
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": [alternating]}))
    got = bench_compare.measured(bench_compare.load_run(path))
    assert got["ours/transformers alternating prefill 544"] == bench_compare.Metric(0.9, (0.8, 1.05))


@pytest.mark.parametrize(
    ("spread", "slower", "status"),
    [
        (0.1, 1.2, 0),  # +20%, within a ±10% baseline's 0.409-0.611
        (0.1, 1.25, 1),  # +25%: 0.625, above it
        (0.3, 1.6, 0),  # +60%, within a noisy baseline's (±30%) 0.269-0.929
        (0.02, 1.05, 1),  # +5%, above a quiet baseline's (±2%) 0.480-0.520
    ],
)
def test_a_regression_is_judged_by_the_baselines_own_spread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spread: float, slower: float, status: int
) -> None:
    base = run_file(tmp_path, "baseline.json", spread=spread)
    current = run_file(tmp_path, "run.json", ours_prefill=slower, spread=spread)
    assert bench_compare.main([str(current), str(base)]) == status
    out = capsys.readouterr().out
    if status:
        assert (
            out.splitlines()[-1]
            == "1 metric(s) above the baseline's own spread: ours/transformers prefill 544"
        )
    else:
        assert out.splitlines()[-1] == "no metric above the baseline's own spread"


def test_a_metric_without_spread_is_shown_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = run_file(tmp_path, "baseline.json")
    current = json.loads(run_file(tmp_path, "run.json").read_text())
    for r in current["benchmarks"]:
        if r["extra_info"]["case"] == "lookup":
            r["stats"]["median"] *= 10  # lookup share 10x: its baseline records no spread
    (tmp_path / "run.json").write_text(json.dumps(current))
    assert bench_compare.main([str(tmp_path / "run.json"), str(base)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("lookup share"))
    assert "+900.0%" in line and line.endswith("(not judged)") and " none " in line


def test_cases_the_baseline_lacks_are_listed_as_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = run_file(tmp_path, "baseline.json")
    current = json.loads(run_file(tmp_path, "run.json").read_text())
    current["benchmarks"] += [
        record(0.5, case="cached", impl="ours", cached=16, new=1008, ideal_ratio=0.98),
        record(0.6, case="prefill", impl="ours", tokens=1024),
    ]
    (tmp_path / "run.json").write_text(json.dumps(current))
    assert bench_compare.main([str(tmp_path / "run.json"), str(base)]) == 0
    new = [line.split() for line in capsys.readouterr().out.splitlines() if line.endswith(" new")]
    assert [" ".join(words[:3]) for words in new] == [
        "warm/cold cached 16+1008",
        "achieved/ideal cached 16+1008",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "not readable JSON"),
        ('{"benchmarks": 3}', "not a pytest-benchmark JSON file"),
        ('{"benchmarks": [{"name": "other", "extra_info": {}, "stats": {"median": 1}}]}', "no kvtestbed"),
        ('{"benchmarks": [{"extra_info": {"case": "prefill"}}]}', "lacks or garbles"),
    ],
    ids=["missing", "not-json", "no-list", "foreign", "garbled"],
)
def test_unusable_files_give_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert bench_compare.main([str(bad), str(run_file(tmp_path, "baseline.json"))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_runs_of_different_devices_are_not_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cuda = run_file(tmp_path, "cuda.json", device="cuda", dtype="bfloat16")
    assert bench_compare.main([str(cuda), str(run_file(tmp_path, "baseline.json"))]) == 2
    assert "measure different things" in capsys.readouterr().err


def test_runs_without_common_metrics_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"benchmarks": [record(1.0, case="decode", impl="ours", context=64)]}))
    assert bench_compare.main([str(other), str(run_file(tmp_path, "baseline.json"))]) == 2
    assert "share no metric" in capsys.readouterr().err


def test_strict_fails_on_a_baseline_that_does_not_cover_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--strict (the CI gate): a metric the baseline lacks would never be judged, one the run lacks never
    again; either is exit 3 naming them. A regression is still 1; a covered run passes."""
    base = run_file(tmp_path, "baseline.json")
    assert bench_compare.main([str(run_file(tmp_path, "same.json")), str(base), "--strict"]) == 0
    grown = json.loads(run_file(tmp_path, "grown.json").read_text())
    grown["benchmarks"].append(record(0.5, case="decode", impl="ours", context=512))
    grown["benchmarks"].append(record(0.6, case="decode", impl="transformers", context=512))
    (tmp_path / "grown.json").write_text(json.dumps(grown))
    assert bench_compare.main([str(tmp_path / "grown.json"), str(base)]) == 0
    capsys.readouterr()
    assert bench_compare.main([str(tmp_path / "grown.json"), str(base), "--strict"]) == 3
    out = capsys.readouterr().out.splitlines()
    assert "1 metric(s) it lacks (ours/transformers decode @512), 0 missing" in out[-2]
    shrunk = json.loads(run_file(tmp_path, "shrunk.json").read_text())
    shrunk["benchmarks"] = [r for r in shrunk["benchmarks"] if r["extra_info"]["case"] != "splice"]
    (tmp_path / "shrunk.json").write_text(json.dumps(shrunk))
    assert bench_compare.main([str(tmp_path / "shrunk.json"), str(base), "--strict"]) == 3
    assert "1 missing from the run (splice/recompute 1024)" in capsys.readouterr().out
    slower = run_file(tmp_path, "slower.json", ours_prefill=1.5)
    assert bench_compare.main([str(slower), str(base), "--strict"]) == 1
