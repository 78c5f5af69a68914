"""scripts/bench_report.py on a small synthetic pytest-benchmark file: the summary states what the run measured."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from tests.scripts.bench_records import WARM_BOTH_CACHES

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # bench_report imports bench_compare as a sibling module
_spec = importlib.util.spec_from_file_location("bench_report", SCRIPTS / "bench_report.py")
assert _spec is not None and _spec.loader is not None
bench_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_report)

IDENTITY = {"device": "cpu", "dtype": "float32", "model": "synthetic:qwen2.5-0.5b"}


def record(median: float, **info: Any) -> dict[str, Any]:
    stats = {"median": median, "iqr": 0.0}
    return {"name": "x", "extra_info": info | IDENTITY | {"load_1min": 1.0}, "stats": stats}


def test_the_decode_section_states_the_step_over_its_weight_stream(tmp_path: Path) -> None:
    """A timed round of the weight-stream case is one step and one stream: at a step / stream ratio of 1.5 and
    0.5 s a round, the stream alone takes 0.2 s, and 2 GB in 0.2 s is 10 GB/s."""
    records = [
        record(0.09, case="decode", impl="ours", context=512),
        record(
            0.5,
            case="decode_weights",
            impl="step/weights",
            context=512,
            ratio=1.5,
            ratio_min=1.4,
            ratio_max=1.7,
            pairs=7,
            weight_bytes=2e9,
        ),
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": records}))
    text = bench_report.summary(bench_report.load_run(path))
    assert "(one row through every matrix it multiplies by, 2,000 MB): 1.500 [1.400–1.700] over 7" in text
    assert "the stream alone about 200 ms, 10.0 GB/s" in text


def test_the_warm_section_gives_a_ratio_against_each_of_transformers_caches(tmp_path: Path) -> None:
    warm = record(2.0, **WARM_BOTH_CACHES)
    cold = record(3.0, case="cached", impl="ours", cached=2048, new=64, ideal_ratio=0.03)
    cold_full = record(30.0, case="prefill", impl="ours", tokens=2112)
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": [warm, cold, cold_full]}))
    text = bench_report.summary(bench_report.load_run(path))
    assert "| 2048+64 | DynamicCache | 0.900 [0.850–0.970] | 6 | 0.040 |" in text
    assert "| 2048+64 | StaticCache | 1.010 [0.950–1.080] | 6 | 0.040 |" in text
    assert "| 2048+64 | cold" not in text  # warm/cold cached 2048+64 is another section's


def test_the_serve_section_gives_both_arms_the_ratio_and_the_verdict(tmp_path: Path) -> None:
    """benchmarks/test_serve.py's record: each arm's and the per-round ratio's median [min–max], the target."""
    serve = record(
        1.6,
        case="serve_ttft",
        impl="server/direct",
        tokens=512,
        direct_s={"median": 1.5, "min": 1.4, "max": 2.0, "n": 7},
        server_s={"median": 1.6, "min": 1.45, "max": 2.1, "n": 7},
        ratio={"median": 1.02, "min": 0.9, "max": 1.06, "n": 7},
        target="server <= 1.05 x direct + 5 ms",
        verdict="within noise",
    )
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": [serve]}))
    text = bench_report.summary(bench_report.load_run(path))
    row = "| 512 | 1.500 s [1.400 s–2.000 s] | 1.600 s [1.450 s–2.100 s] | 1.020 [0.900–1.060] | 7 |"
    assert row + " within noise (server <= 1.05 x direct + 5 ms) |" in text
