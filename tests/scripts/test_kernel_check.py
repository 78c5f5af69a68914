"""scripts/kernel_check.py on CPU: the warm path after one cached block runs the fused flash kernel that returns
the log-sum-exp, no math fallback, and the report says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import kernel_check  # noqa: E402


def test_the_warm_path_runs_a_fused_kernel(tiny_dir, tmp_path, capsys) -> None:
    out = tmp_path / "kernels.json"
    args = ["--device", "cpu", "--model", str(tiny_dir("qwen2")), "--length", "64", "--rounds", "2"]
    assert kernel_check.main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["fused_kernels"] == ["aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert report["math_fallback"] == [] and report["rounds"] == 2 and report["target"] is None
    assert report["warm_over_cold"] > 0 and json.loads(capsys.readouterr().out) == report


def test_warm_up_runs_the_kernels_once_and_says_how_long(tiny_dir, tmp_path) -> None:
    out = tmp_path / "warm-up.json"
    args = ["--device", "cpu", "--model", str(tiny_dir("qwen2")), "--length", "64", "--warm-up"]
    assert kernel_check.main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["warm_up_s"] > 0 and report["graphs_s"] is None  # graphs: CUDA only
