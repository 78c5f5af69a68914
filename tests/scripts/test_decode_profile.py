"""scripts/decode_profile.py on a tiny Qwen2: the weight stream multiplies by exactly the matrices the decode step
does (one call each, nothing else), and the step's table shows what it adds (attention once per layer)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import engine

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import decode_profile  # noqa: E402

MATMUL_CALLS = ("aten::mm", "aten::addmm")


def test_the_stream_is_the_steps_matrices_alone(tiny_dir) -> None:
    ours = engine.load(str(tiny_dir("qwen2")), "cpu", None, cache_tokens=256)
    seconds, tables = decode_profile.step_and_stream(ours, context=48, rounds=3, steps=2)
    assert [len(v) for v in seconds.values()] == [3, 3] and all(t > 0 for v in seconds.values() for t in v)
    (step_ops, step_wall), (stream_ops, stream_wall) = tables["step"], tables["stream"]
    layers = ours.config.num_layers
    matrices = (
        5 * layers + 1
    )  # qkv, o, gate, up, down per layer (gate and up one matrix in the step), lm_head
    stream_calls = sum(stream_ops.get(op, (0, 0))[0] for op in MATMUL_CALLS)
    step_calls = sum(step_ops.get(op, (0, 0))[0] for op in MATMUL_CALLS)
    assert stream_calls == matrices and step_calls in (matrices, matrices - layers)
    assert not [op for op in stream_ops if "attention" in op or "norm" in op]
    attention = [calls for op, (calls, _) in step_ops.items() if "scaled_dot_product" in op and "flash" in op]
    assert attention == [layers]
    assert step_wall > 0 and stream_wall > 0


def test_a_model_that_does_not_load_is_one_line(tmp_path) -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "decode_profile.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--model", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
