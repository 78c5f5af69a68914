"""Rotary position embedding (rotate-half RoPE), optionally scaled (YaRN, Llama 3: `rope_scaling`): the tables,
the rotation, and relocation of rotated keys."""

from __future__ import annotations

import torch

from engine.model.rope_scaling import RopeScaling, plain_inv_freq


class Rotary:
    """Rotate-half RoPE. cos/sin for every position up to the context length are built once, in float32 from
    the (scaled) inverse frequencies and times the scaling's magnitude factor; a forward gathers its
    positions' rows once (`at`) and every layer rotates q and k with them."""

    def __init__(
        self,
        head_dim: int,
        theta: float,
        max_positions: int,
        device: torch.device,
        scaling: RopeScaling | None = None,
    ) -> None:
        inv_freq = plain_inv_freq(theta, head_dim)
        if scaling is not None:
            inv_freq = scaling.inv_freq(inv_freq, theta, head_dim)
        magnitude = 1.0 if scaling is None else scaling.attention_factor
        # Both halves of a head share the frequencies, so the tables keep one half.
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        cos, sin = freqs.cos(), freqs.sin()
        if magnitude != 1.0:
            cos, sin = cos * magnitude, sin * magnitude
        self.cos, self.sin = cos.to(device), sin.to(device)
        self.inv_freq = inv_freq  # on the host: `shift` takes its angles in float64, which MPS lacks

    def at(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotation of these positions as `rotate` takes it, `[T, 1, head_dim]` in the model's dtype."""
        return Rotary.whole(
            self.cos[positions].unsqueeze(1).to(dtype), self.sin[positions].unsqueeze(1).to(dtype)
        )

    @staticmethod
    def whole(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Half-width cos, sin `[..., head_dim / 2]` as `rotate` takes them, over the whole head: (cos, cos)
        and (-sin, sin)."""
        return torch.cat((cos, cos), -1), torch.cat((-sin, sin), -1)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x `[T, heads, head_dim]` rotated by `whole` tables: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin),
        as x cos + (x2, x1) (-sin, sin): one product and one fused multiply-add over the whole head (the
        same products and sums, so the same bits, as half by half)."""
        half = x.shape[-1] // 2
        swapped = x.reshape(*x.shape[:-1], 2, half).flip(-2).view(x.shape)
        return (x * cos).addcmul_(swapped, sin)

    def shift(self, x: torch.Tensor, delta: int) -> torch.Tensor:
        """Move keys already rotated for positions p to positions p + delta (delta may be negative): RoPE
        composes, R(p + delta) = R(delta) R(p), under the scaled frequencies too. A pure rotation: the
        scaling's magnitude factor is already in x and is not applied again. x `[..., head_dim]`; cos and
        sin of the angle are taken in float64 on the host (no float64 on the device: MPS has none), the
        rotation in float32, and the result rounded once to x's dtype."""
        if delta == 0:
            return x
        angle = delta * self.inv_freq.double()
        cos, sin = (f.float().to(x.device) for f in (angle.cos(), angle.sin()))
        return Rotary.rotate(x.float(), *Rotary.whole(cos, sin)).to(x.dtype)
