"""RoPE scaling past the pretraining window: YaRN (Qwen2.5 / Qwen3 beyond 32k) and Llama 3's frequency-dependent
interpolation. Each is a frozen set of parameters, read from a config.json `rope_scaling` / `rope_parameters`
dict or from GGUF metadata, that turns RoPE's inverse frequencies into scaled ones and names the magnitude
factor cos and sin carry.

Both are static: a token's rotation depends on its position only, never on the sequence's length, so a cached
key equals the key the same token gets in any longer prompt (prefix reuse), and moving a key by delta
positions is a rotation by delta under the scaled frequencies (relocation). Linear and dynamic NTK scaling
are refused in `config_checks`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from engine.errors import UnsupportedModelError


def plain_inv_freq(theta: float, head_dim: int) -> torch.Tensor:
    """RoPE's inverse frequencies `[head_dim / 2]`, theta^(-2i / d), in float32 as transformers computes them."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def _mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction for a context `factor` times longer: 0.1 * mscale * ln(factor) + 1."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


@dataclass(frozen=True)
class Yarn:
    """YaRN (Peng et al., 2023) as transformers computes it. Pair i of a head turns
    L / (2 pi theta^(2i / d)) times over the original window L: pairs that turn more than `beta_fast` times
    keep their frequency (extrapolation), pairs that turn fewer than `beta_slow` times have it divided by
    `factor` (interpolation), and the pairs between blend the two along a linear ramp. cos and sin are
    multiplied by `attention_factor`, so every q.k score is scaled by its square."""

    factor: float
    original_max_position_embeddings: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float = 1.0
    truncate: bool = True  # round the ramp's ends outwards to whole pairs
    rope_type: str = field(default="yarn", init=False)

    def __post_init__(self) -> None:
        _check_common(self.factor, self.original_max_position_embeddings)
        if not self.attention_factor > 0:
            raise UnsupportedModelError(
                f"yarn attention_factor must be positive, got {self.attention_factor}"
            )

    def context_length(self, max_position_embeddings: int) -> int:
        """factor x the original window, as vLLM derives a YaRN model's length (Qwen's configs keep
        max_position_embeddings at the original 32,768 or 40,960)."""
        return int(self.factor * self.original_max_position_embeddings)

    def inv_freq(self, inv_freq: torch.Tensor, theta: float, head_dim: int) -> torch.Tensor:
        """The scaled inverse frequencies `[head_dim / 2]` (float32) of the unscaled ones."""
        low, high = (self._pair_turning(beta, theta, head_dim) for beta in (self.beta_fast, self.beta_slow))
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, head_dim - 1)
        span = high - low if high != low else 0.001
        ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / span).clamp(0, 1)
        keep = (1 - ramp).to(inv_freq.device)  # 1: the pair keeps its frequency, 0: divided by factor
        return inv_freq / self.factor * (1 - keep) + inv_freq * keep

    def _pair_turning(self, rotations: float, theta: float, head_dim: int) -> float:
        """The (fractional) pair index whose frequency turns `rotations` times over the original window."""
        window = self.original_max_position_embeddings
        return head_dim * math.log(window / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    def to_hf(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Llama3:
    """Llama 3.1's scaling: with L the original window, frequencies whose wavelength is shorter than
    L / high_freq_factor are kept, those longer than L / low_freq_factor are divided by `factor`, and those
    between are blended by how many times they turn over L. cos and sin are not rescaled."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int
    rope_type: str = field(default="llama3", init=False)

    attention_factor = 1.0  # a class constant, not a field

    def __post_init__(self) -> None:
        _check_common(self.factor, self.original_max_position_embeddings)
        if not self.high_freq_factor > self.low_freq_factor > 0:
            raise UnsupportedModelError(
                f"llama3 rope scaling needs high_freq_factor > low_freq_factor > 0, got "
                f"{self.high_freq_factor} and {self.low_freq_factor}"
            )

    def context_length(self, max_position_embeddings: int) -> int:
        """Llama 3.x configs state the scaled length themselves."""
        return max_position_embeddings

    def inv_freq(self, inv_freq: torch.Tensor, theta: float, head_dim: int) -> torch.Tensor:
        window, low, high = self.original_max_position_embeddings, self.low_freq_factor, self.high_freq_factor
        turns = window / (2 * math.pi / inv_freq)  # how many times each pair turns over the original window
        smooth = ((turns - low) / (high - low)).clamp(0, 1)  # 0: wavelength >= L / low, 1: <= L / high
        return inv_freq / self.factor * (1 - smooth) + inv_freq * smooth

    def to_hf(self) -> dict[str, Any]:
        return asdict(self)


RopeScaling = Yarn | Llama3


def _check_common(factor: float, original: int) -> None:
    if not factor >= 1:
        raise UnsupportedModelError(f"rope scaling factor must be at least 1, got {factor}")
    if original < 1:
        raise UnsupportedModelError(f"original_max_position_embeddings must be at least 1, got {original}")


def scaling_from_hf(params: dict[str, Any], max_position_embeddings: int) -> RopeScaling | None:
    """The scaling of a RoPE parameter dict (already checked by `config_checks`), filled in as transformers
    fills it: the original window defaults to max_position_embeddings, a YaRN factor of null to their ratio,
    beta_fast / beta_slow (0 or null) to 32 / 1, the attention factor to YaRN's formula."""
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type == "default":
        return None
    original = int(params.get("original_max_position_embeddings") or max_position_embeddings)
    try:
        if rope_type == "llama3":
            return Llama3(
                float(params["factor"]),
                float(params["low_freq_factor"]),
                float(params["high_freq_factor"]),
                original,
            )
        factor = params["factor"]  # required, as transformers requires it; null: the lengths' ratio
        factor = max_position_embeddings / original if factor is None else float(factor)
        attention = params.get("attention_factor")
        if attention is None:
            mscale, all_dim = params.get("mscale"), params.get("mscale_all_dim")
            attention = (
                _mscale(factor, mscale) / _mscale(factor, all_dim) if mscale and all_dim else _mscale(factor)
            )
        return Yarn(
            factor,
            original,
            float(params.get("beta_fast") or 32),
            float(params.get("beta_slow") or 1),
            float(attention),
            bool(params.get("truncate", True)),
        )
    except KeyError as e:
        raise UnsupportedModelError(f"{rope_type} rope scaling lacks required field {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise UnsupportedModelError(f"{rope_type} rope scaling has a field of the wrong type: {e}") from None


# llama.cpp's YaRN keys (after "<arch>.rope.scaling.") and the values under which its YaRN is transformers'.
_GGUF_YARN_NEUTRAL = {
    "yarn_ext_factor": (-1.0, 1.0),
    "yarn_attn_factor": (1.0,),
    "yarn_log_multiplier": (0.0,),
}
# What llama.cpp's converter assumes when a Llama 3 config omits them, and what every Llama 3.x model states.
_LLAMA3_DEFAULTS = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def scaling_from_gguf(
    meta: dict[str, Any],
    arch: str,
    context: int,
    theta: float,
    head_dim: int,
    rope_freqs: Sequence[float] | None,
) -> RopeScaling | None:
    """The scaling of GGUF metadata: `rope.scaling.type` yarn (factor, original_context_length, beta_fast /
    beta_slow; llama.cpp's other YaRN knobs only at their neutral values), or a Llama `rope_freqs.weight`
    tensor (per-pair divisors) that equals Llama 3 scaling's. Linear and LongRoPE are refused by name."""
    key = f"{arch}.rope.scaling."
    kind = meta.get(key + "type", "none")
    if rope_freqs is not None:
        if kind != "none" or arch != "llama":
            raise UnsupportedModelError(
                f"GGUF tensor rope_freqs.weight with {arch} and rope scaling type {kind!r} is not implemented"
            )
        return _llama3_from_divisors(rope_freqs, theta, head_dim)
    if kind == "none":
        factor = meta.get(key + "factor")
        if factor not in (None, 0.0, 1.0):  # llama.cpp then divides every frequency by it: linear scaling
            raise UnsupportedModelError(f"GGUF metadata {key}factor = {factor!r} is not implemented")
        return None
    if kind != "yarn":
        raise UnsupportedModelError(
            f"GGUF metadata {key}type = {kind!r} is not implemented (supported: none, yarn; and Llama 3's "
            "rope_freqs.weight)"
        )
    for name, neutral in _GGUF_YARN_NEUTRAL.items():
        value = meta.get(key + name)
        if value is not None and float(value) not in neutral:
            raise UnsupportedModelError(f"GGUF metadata {key}{name} = {value!r} is not implemented")
    factor = float(meta.get(key + "factor", 1.0))
    return Yarn(
        factor,
        int(meta.get(key + "original_context_length", context)),
        float(meta.get(key + "yarn_beta_fast", 32.0)),
        float(meta.get(key + "yarn_beta_slow", 1.0)),
        _mscale(factor),
    )


def _llama3_from_divisors(divisors: Sequence[float], theta: float, head_dim: int) -> Llama3:
    """llama.cpp stores Llama 3 scaling as the divisor of each pair's frequency, computed from the config's
    parameters; the parameters are not stored. The largest divisor is the factor; the others are checked
    against Llama 3's stated ones, and any other tensor is refused."""
    base = plain_inv_freq(theta, head_dim)
    given = torch.tensor(list(divisors), dtype=torch.float32)
    if given.shape != base.shape:
        raise UnsupportedModelError(
            f"GGUF tensor rope_freqs.weight has {given.numel()} values, not head_dim / 2 = {base.numel()}"
        )
    scaling = Llama3(float(given.max()), **_LLAMA3_DEFAULTS)
    if not torch.allclose(base / scaling.inv_freq(base, theta, head_dim), given, rtol=1e-5, atol=0):
        raise UnsupportedModelError(
            f"GGUF tensor rope_freqs.weight is not Llama 3 rope scaling with factor {scaling.factor}, "
            "low_freq_factor 1, high_freq_factor 4, original context 8192: other frequency factors are not "
            "implemented"
        )
    return scaling
