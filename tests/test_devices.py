"""Half precision on every device present (CPU always; CUDA and MPS when the machine has them), whatever
the run's --dtype, so that the default float32 run checks bfloat16 and float16 too; --device refusing a
device this machine lacks, in one line; the default dtype of timed runs by the CPU's bfloat16 instructions
(read from a fake /proc/cpuinfo), never the exact default's; and allocation failures told apart.

Tolerances come from tests/precision.py: transformers in the same dtype and device strays from its own
float32 logits by E; ours may stray by 3E; prefix reuse and decode must match our plain forward within E.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import engine
from engine.devices import DTYPES, allocation_failed, cpu_bf16_flags, resolve_dtype, timing_dtype
from tests.conftest import build_hf_model
from tests.precision import Precision

CASES = [("cpu", "bfloat16"), ("cpu", "float16")]
if torch.cuda.is_available():
    CASES += [("cuda", "bfloat16"), ("cuda", "float16")]
if torch.backends.mps.is_available():
    CASES += [("mps", "float16")]


@pytest.fixture(
    scope="module",
    params=[(d, t, k) for d, t in CASES for k in ("qwen2", "qwen3")],
    ids=lambda p: "-".join(p),
)
def setup(request, tiny_dir):
    """(our engine on the device in the dtype, its tolerances, the model kind, a prompt)"""
    device, dtype, kind = request.param
    ours = engine.load(str(tiny_dir(kind)), device=device, dtype=dtype, cache_tokens=1024)
    ids = torch.randint(0, 512, (200,), generator=torch.Generator().manual_seed(1)).tolist()
    return ours, Precision(torch.device(device), DTYPES[dtype], build_hf_model), kind, ids


def test_logits_track_transformers_in_half_precision(setup) -> None:
    ours, precision, kind, ids = setup
    with torch.no_grad():
        reference = build_hf_model(kind)(torch.tensor([ids])).logits[0]
    assert (ours.logits(ids).cpu() - reference).abs().max().item() <= precision.logits_tol(kind)


def test_prefix_reuse_and_decode_are_exact_within_half_precision(setup) -> None:
    ours, precision, kind, ids = setup
    ours.reset_cache()
    ours.generate(ids[:150], max_new_tokens=1)
    warm = ours.generate(ids, max_new_tokens=8, return_logits=True)
    cold = ours.generate(ids, max_new_tokens=8, return_logits=True, cache=False)
    assert warm.usage.cached_tokens == 144 and cold.usage.cached_tokens == 0
    assert (warm.logits[0] - cold.logits[0]).abs().max().item() <= precision.cache_tol(kind)
    # every decode step against a plain forward over the same tokens (teacher-forced, no cache)
    plain = ours.logits(ids + warm.token_ids[:-1])[-8:].cpu()
    assert (warm.logits.cpu() - plain).abs().max().item() <= precision.cache_tol(kind)


def test_an_absent_device_stops_the_run_in_one_line() -> None:
    absent = "mps" if torch.cuda.is_available() else "cuda"
    message = {"cuda": "CUDA is not available", "mps": "MPS is not available"}[absent]
    if torch.cuda.is_available() and torch.backends.mps.is_available():
        absent, message = "tpu", "unknown device 'tpu'"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_devices.py", "--collect-only", "-q", "--device", absent],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 4 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == "", proc.stderr


SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
COOPER_LAKE = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n"
SKYLAKE = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n\nprocessor\t: 1\nflags\t\t: fpu avx2\n"


def test_bfloat16_instructions_are_read_from_cpuinfo_flags() -> None:
    assert cpu_bf16_flags(SAPPHIRE_RAPIDS) == ["amx_bf16", "avx512_bf16"]
    assert cpu_bf16_flags(COOPER_LAKE) == ["avx512_bf16"]
    assert cpu_bf16_flags(SKYLAKE) == [] and cpu_bf16_flags("") == []  # "" : no /proc/cpuinfo (not Linux)
    assert cpu_bf16_flags("model name\t: amx_bf16 in a name, not a flag\n") == []


def test_timed_runs_pick_bfloat16_only_where_the_cpu_multiplies_it_natively() -> None:
    cpu = torch.device("cpu")
    dtype, why = timing_dtype(cpu, SAPPHIRE_RAPIDS)
    assert (
        dtype == torch.bfloat16
        and why == "this CPU has AMX-BF16 and AVX512-BF16, native bfloat16 matrix multiplies"
    )
    assert timing_dtype(cpu, COOPER_LAKE)[0] == torch.bfloat16
    dtype, why = timing_dtype(cpu, SKYLAKE)
    assert dtype == torch.float32 and "neither AMX-BF16 nor AVX512-BF16" in why
    assert resolve_dtype(None, cpu) == torch.float32  # the API's and the parity tests' default, on any CPU
    proc = Path("/proc/cpuinfo")
    here = proc.read_text() if proc.exists() else ""
    assert timing_dtype(cpu)[0] == (torch.bfloat16 if cpu_bf16_flags(here) else torch.float32)


def test_a_failed_allocation_is_told_apart_from_other_errors() -> None:
    with pytest.raises(RuntimeError) as cpu_failure:  # 2^57 bytes: more than any address space
        torch.empty(2**55, dtype=torch.float32)
    assert allocation_failed(cpu_failure.value) and not isinstance(cpu_failure.value, torch.OutOfMemoryError)
    assert allocation_failed(torch.OutOfMemoryError("CUDA out of memory"))
    assert not allocation_failed(RuntimeError("shape mismatch")) and not allocation_failed(ValueError("x"))
