"""Half precision, on every device present (CPU always; CUDA and MPS when the machine has them).

Tolerances come from the reference itself: `transformers` run in the same dtype and device strays from its
own float32 logits by some error E; ours must stray no more than 2E and stay within 2E of it. Prefix reuse
and decode must match our plain forward in the same dtype within E.
"""

from __future__ import annotations

import pytest
import torch

import engine
from engine.devices import DTYPES
from tests.conftest import build_hf_model

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
    """(our engine, transformers logits in the dtype, float32 reference logits, E, prompt) on the device."""
    device, dtype, kind = request.param
    ids = torch.randint(0, 512, (200,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        reference = build_hf_model(kind)(torch.tensor([ids])).logits[0]
        half = build_hf_model(kind).to(device=device, dtype=DTYPES[dtype])
        theirs = half(torch.tensor([ids], device=device)).logits[0].float().cpu()
    ours = engine.load(str(tiny_dir(kind)), device=device, dtype=dtype, cache_tokens=1024)
    error = (theirs - reference).abs().max().item()
    assert 0 < error < 0.05 * reference.abs().max().item(), (
        "the reference error should be a half-precision one"
    )
    return ours, theirs, reference, error, ids


def test_logits_track_transformers_in_half_precision(setup) -> None:
    ours, theirs, reference, error, ids = setup
    got = ours.logits(ids).cpu()
    assert (got - reference).abs().max().item() <= 2 * error
    assert (got - theirs).abs().max().item() <= 2 * error


def test_prefix_reuse_and_decode_are_exact_within_half_precision(setup) -> None:
    ours, _theirs, _reference, error, ids = setup
    ours.reset_cache()
    ours.generate(ids[:150], max_new_tokens=1)
    warm = ours.generate(ids, max_new_tokens=8, return_logits=True)
    cold = ours.generate(ids, max_new_tokens=8, return_logits=True, cache=False)
    assert warm.usage.cached_tokens == 144 and cold.usage.cached_tokens == 0
    assert (warm.logits[0] - cold.logits[0]).abs().max().item() <= error
    # every decode step against a plain forward over the same tokens (teacher-forced, no cache)
    plain = ours.logits(ids + warm.token_ids[:-1])[-8:].cpu()
    assert (warm.logits - plain).abs().max().item() <= error
