"""`bench cluster`: cost files that would stop the simulated clock or break it (all figures 0, a peak of 0
FLOP/s: ZeroDivisionError; a negative peak: negative TTFTs; NaN: NaN columns), a --load that sends the
arrival times to infinity (1e-308: NaN columns), and hash-id requests without input tokens (simulated as if
they were requests)."""

from __future__ import annotations

import copy
import json
import math

import pytest

from engine.bench.__main__ import main
from engine.cluster.costs import SHIPPED_DIR
from tests.redteam.cli import one_error_line

SHIPPED = json.loads((SHIPPED_DIR / "h100-llama-3.1-8b.json").read_text())
FITTED = {"name": "fit", "p0": 0.01, "p1": 1e-4, "p2": 1e-9, "d0": 0.01, "d1": 1e-4, "d2": 1e-8}
FITTED |= {"kv_bytes_per_token": 131072, "host_bytes_per_s": 6.4e10}


def figures(group: str, key: str, value: object) -> dict:
    doc = copy.deepcopy(SHIPPED)
    doc["figures"][group][key] = value
    return doc


def all_zero(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    for group in doc["figures"].values():
        for key, value in group.items():
            if isinstance(value, (int, float)):
                group[key] = 0
    return doc


COSTS = [
    pytest.param(all_zero(SHIPPED), "peak_flops must be a finite number above 0, got 0", id="figures all 0"),
    pytest.param(figures("accelerator", "peak_flops", 0), "peak_flops must be", id="peak_flops 0"),
    pytest.param(figures("accelerator", "peak_flops", -1e12), "got -1000000000000", id="peak_flops < 0"),
    pytest.param(figures("accelerator", "peak_flops", math.nan), "got nan", id="peak_flops NaN"),
    pytest.param(figures("accelerator", "peak_flops", math.inf), "got inf", id="peak_flops inf"),
    pytest.param(figures("accelerator", "peak_flops", True), "got True", id="peak_flops true"),
    pytest.param(figures("accelerator", "peak_flops", "1e15"), "got '1e15'", id="peak_flops string"),
    pytest.param(figures("model", "layers", -32), "layers must be", id="layers < 0"),
    pytest.param(figures("accelerator", "host_bytes_per_s", 0), "host_bytes_per_s must be", id="host 0"),
    pytest.param(figures("efficiency", "compute", 2), "at most 1", id="efficiency 2"),
    pytest.param(figures("efficiency", "memory", math.nan), "memory must be", id="efficiency NaN"),
    pytest.param({k: 0 for k in FITTED} | {"name": "z"}, "p0, p1 and p2 are all 0", id="fitted all 0"),
    pytest.param(FITTED | {"p1": math.nan}, "p1 = nan", id="fitted NaN"),
    pytest.param(FITTED | {"d2": -1e-8}, "d2 = -1e-08", id="fitted < 0"),
    pytest.param(FITTED | {"host_bytes_per_s": 0}, "host_bytes_per_s must be above 0", id="fitted host 0"),
]


@pytest.mark.parametrize(("cost", "message"), COSTS)
def test_a_cost_file_that_breaks_the_clock_is_one_line(tmp_path, capsys, cost, message) -> None:
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(cost))  # NaN and Infinity as Python's json writes them
    argv = ["cluster", "example:mooncake", "--cost", str(path), "--out", str(tmp_path / "run")]
    line = one_error_line(capsys, main, argv)
    assert message in line, line
    assert not (tmp_path / "run").exists()


def test_a_fitted_cost_file_runs(tmp_path) -> None:
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(FITTED))
    argv = [
        "cluster",
        "example:mooncake",
        "--cost",
        str(path),
        "--replicas",
        "2",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main(argv) == 0
    runs = json.loads((tmp_path / "run" / "cluster.json").read_text())["runs"]
    assert runs and all(math.isfinite(r["ttft_p99_s"]) and r["ttft_p50_s"] > 0 for r in runs)


@pytest.mark.parametrize("load", ["1e-308", "1e-300", "1e-12"])
def test_a_load_that_sends_arrivals_to_infinity_is_one_line(tmp_path, capsys, load) -> None:
    argv = ["cluster", "example:mooncake", "--load", load, "--out", str(tmp_path / "run")]
    line = one_error_line(capsys, main, argv)
    assert f"--load {float(load):g}" in line and "give a larger --load" in line


@pytest.mark.parametrize(
    "row",
    [
        {"timestamp": 0, "input_length": 0, "output_length": 10, "hash_ids": []},
        {"timestamp": 0, "input_length": 0, "output_length": 0, "hash_ids": []},
    ],
)
def test_a_hash_request_without_input_tokens_is_refused(tmp_path, capsys, row) -> None:
    trace = tmp_path / "t.jsonl"
    good = {"timestamp": 1000, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}
    trace.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    line = one_error_line(capsys, main, ["cluster", str(trace), "--out", str(tmp_path / "run")])
    assert "line 2" in line and "input_length: a request has at least 1 input token, got 0" in line
