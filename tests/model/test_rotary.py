"""`Rotary.shift` under RoPE scaling: relocated layer-0 keys equal recomputed ones past the original window
(YaRN and Llama 3, float32), the rotation uses the scaled frequencies and never applies YaRN's magnitude factor
again, and in bfloat16 it rotates in float32, rounding once."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import engine
from engine.approx.snapshot import snapshot
from engine.model.rotary import Rotary
from tests.conftest import random_ids as tokens


@pytest.mark.parametrize(("kind", "scaling"), [("qwen2", "yarn"), ("qwen3", "yarn"), ("llama", "llama3")])
def test_relocated_layer0_keys_equal_recomputed_ones_past_the_window(
    tiny_dir, kind: str, scaling: str
) -> None:
    """A 30-token piece after 70 and after 150 other tokens (the original window is 64): shifting the first
    one's layer-0 keys by 80 gives the second's, and back."""
    eng = engine.load(str(tiny_dir(kind, scaling=scaling)), device="cpu", cache_tokens=512)
    piece = tokens(30, 31)
    near, far = snapshot(eng, tokens(70, 32) + piece), snapshot(eng, tokens(150, 33) + piece)
    rope = eng.model.rope
    assert (rope.shift(near.k[0, :, 70:], 80) - far.k[0, :, 150:]).abs().max() <= 1e-5
    assert (rope.shift(far.k[0, :, 150:], -80) - near.k[0, :, 70:]).abs().max() <= 1e-5
    cfg = eng.config
    unscaled = Rotary(cfg.head_dim, cfg.rope_theta, 8, torch.device("cpu"))  # the plain frequencies are wrong
    assert (unscaled.shift(near.k[0, :, 70:], 80) - far.k[0, :, 150:]).abs().max() > 1e-2


def test_shift_is_a_pure_rotation_under_yarn() -> None:
    """The magnitude factor lives in the rotated keys; a shift keeps every pair's length."""
    from engine.model.rope_scaling import Yarn

    rope = Rotary(16, 10000.0, 8, torch.device("cpu"), Yarn(4.0, 64, attention_factor=1.25))
    x = torch.randn(5, 2, 16, generator=torch.Generator().manual_seed(0))
    moved = rope.shift(x, 1000)
    pair_norms = lambda t: t[..., :8].pow(2) + t[..., 8:].pow(2)  # noqa: E731
    assert torch.allclose(pair_norms(moved), pair_norms(x), rtol=1e-5)
    assert torch.allclose(rope.shift(moved, -1000), x, atol=1e-5)


def test_bfloat16_shift_rounds_once() -> None:
    """bfloat16 keys shifted by 12,345 positions: each element is the exact (float64) rotation rounded to
    bfloat16, but for near-ties, and never more than one unit in the last place away. Rotating in bfloat16
    (cos and sin and every product rounded) strays in a large share of the elements."""
    rope = Rotary(64, 1e6, 8, torch.device("cpu"))
    x = torch.randn(256, 2, 64, generator=torch.Generator().manual_seed(1)).bfloat16()
    angle = 12345 * rope.inv_freq.double()
    exact = Rotary.rotate(x.double(), *Rotary.whole(angle.cos(), angle.sin()))
    got = rope.shift(x, 12345)
    assert got.dtype == torch.bfloat16
    ulp = torch.finfo(torch.bfloat16).eps * exact.abs().clamp_min(1e-30)  # the spacing above |exact|
    assert ((got.double() - exact).abs() <= ulp).all()
    assert (got == exact.bfloat16()).float().mean() > 0.999
    in_bf16 = Rotary.rotate(x, *Rotary.whole(angle.cos().bfloat16(), angle.sin().bfloat16()))
    assert (in_bf16 == exact.bfloat16()).float().mean() < 0.9


def test_shift_keeps_float64_off_the_device() -> None:
    """MPS has no float64: the angles are taken on the host. Keys on the meta device (no data; every op's
    dtype and device still checked): no float64 tensor appears there, and the keys stay there."""
    seen: list[tuple[torch.dtype, str]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            out = func(*args, **(kwargs or {}))
            tensors = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            seen.extend((t.dtype, t.device.type) for t in tensors)
            return out

    rope = Rotary(16, 10000.0, 8, torch.device("meta"))
    x = torch.empty(5, 2, 16, dtype=torch.bfloat16, device="meta")
    with Record():
        moved = rope.shift(x, 1000)
    assert (moved.device.type, moved.dtype) == ("meta", torch.bfloat16)
    assert (torch.float64, "cpu") in seen and (torch.float64, "meta") not in seen
