"""The bench commands' default dtype: a timed command takes bfloat16 on a CPU with native bfloat16 matrix
instructions and float32 elsewhere; an inspecting command, a timed one whose exact arms must equal recompute
(kv-edit, kv-compose) and the Python API keep the exact default; each says which dtype it runs and why before the model loads."""

from __future__ import annotations

import argparse

import pytest
import torch

from engine import devices
from engine.bench.args import EXACT_ARMS, open_engine
from engine.runtime.loader import load
from tests.test_devices import SAPPHIRE_RAPIDS, SKYLAKE


def bench_args(model: str, tmp_path, dtype: str | None = None) -> argparse.Namespace:
    options = dict(device="cpu", dtype=dtype, seed=0, block_size=16, cache_tokens=256, cache_gb=None)
    return argparse.Namespace(model=model, out=tmp_path / "run", overwrite=False, **options)


@pytest.mark.parametrize(
    "cpuinfo, how, dtype, why",
    [
        (SAPPHIRE_RAPIDS, {}, torch.bfloat16, "this CPU has AMX-BF16 and AVX512-BF16"),
        (SKYLAKE, {}, torch.float32, "this CPU has neither AMX-BF16 nor AVX512-BF16"),
        (SAPPHIRE_RAPIDS, {"timed": False}, torch.float32, "the exact default (this command inspects"),
        (SAPPHIRE_RAPIDS, {"exact_because": EXACT_ARMS}, torch.float32, "the exact default (its exact arms"),
    ],
)
def test_the_default_dtype_of_a_bench_command(
    tiny_dir, tmp_path, monkeypatch, capsys, cpuinfo, how, dtype, why
) -> None:
    monkeypatch.setattr(devices, "_host_cpuinfo", lambda: cpuinfo)
    model = str(tiny_dir("qwen2"))
    engine = open_engine(bench_args(model, tmp_path), **how)
    assert engine.dtype == dtype
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[dtype")]
    assert len(said) == 1 and said[0].startswith(f"[dtype {devices.dtype_name(dtype)}: {why}")
    assert (
        load(model, device="cpu", cache_tokens=256).dtype == torch.float32
    )  # the API: exact, whatever the CPU


def test_an_explicit_dtype_wins_and_says_so(tiny_dir, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(devices, "_host_cpuinfo", lambda: SAPPHIRE_RAPIDS)
    engine = open_engine(bench_args(str(tiny_dir("qwen2")), tmp_path, dtype="float32"))
    assert engine.dtype == torch.float32
    assert "[dtype float32: given by --dtype]" in capsys.readouterr().err.splitlines()
