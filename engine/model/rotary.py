"""Rotary position embedding (rotate-half RoPE): the tables, the rotation, and relocation of rotated keys."""

from __future__ import annotations

import torch


class Rotary:
    """Rotate-half RoPE. cos/sin for every position up to the context length are built once; a forward
    gathers its positions' rows once (`at`) and every layer rotates q and k with them."""

    def __init__(self, head_dim: int, theta: float, max_positions: int, device: torch.device) -> None:
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        # Both halves of a head share the frequencies, so the tables keep one half.
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        self.cos, self.sin = freqs.cos().to(device), freqs.sin().to(device)
        self.inv_freq = inv_freq.to(device)

    def at(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin `[T, 1, head_dim / 2]` of these positions, in the model's dtype."""
        return self.cos[positions].unsqueeze(1).to(dtype), self.sin[positions].unsqueeze(1).to(dtype)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x `[T, heads, head_dim]` rotated: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), written
        half by half into one new tensor (no rotated copy of x, no temporaries)."""
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        torch.mul(x1, cos, out=out[..., :half]).addcmul_(x2, sin, value=-1)
        torch.mul(x2, cos, out=out[..., half:]).addcmul_(x1, sin)
        return out

    def shift(self, x: torch.Tensor, delta: int) -> torch.Tensor:
        """Move keys already rotated for positions p to positions p + delta (delta may be negative): RoPE
        composes, R(p + delta) = R(delta) R(p). x `[..., head_dim]`; the angle is taken in float64."""
        if delta == 0:
            return x
        angle = delta * self.inv_freq.double()
        return Rotary.rotate(x, angle.cos().to(x.dtype), angle.sin().to(x.dtype))
