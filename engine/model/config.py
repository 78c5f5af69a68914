"""`ModelConfig`: the shape of a decoder, read from a Hugging Face config.json or GGUF metadata."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from engine.errors import UnsupportedModelError
from engine.model.config_checks import refuse_unsupported_gguf, refuse_unsupported_hf, rope_parameters
from engine.model.rope_scaling import RopeScaling, scaling_from_gguf, scaling_from_hf

# Hugging Face class name or model_type -> our architecture name.
_HF_ARCHS = {
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "LlamaForCausalLM": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "llama": "llama",
}
SUPPORTED = ("Qwen2ForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM")


@dataclass(frozen=True)
class ModelConfig:
    arch: str  # "qwen2" | "qwen3" | "llama"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    max_position_embeddings: int  # the context length served: with YaRN, factor x the original window
    tie_word_embeddings: bool
    qkv_bias: bool  # Qwen2 always; Llama/Qwen3 when attention_bias
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool  # Qwen3: per-head RMSNorm on q and k before RoPE
    rope_scaling: RopeScaling | None = None  # YaRN or Llama 3; None: plain RoPE

    def __post_init__(self) -> None:
        bad = next((name for name, v in asdict(self).items() if type(v) is int and v < 1), None)  # sizes
        if bad is not None:
            raise UnsupportedModelError(f"the config's {bad} must be at least 1, got {getattr(self, bad)}")
        if not (self.rope_theta > 0 and self.rms_norm_eps > 0):
            raise UnsupportedModelError(
                f"rope_theta ({self.rope_theta}) and rms_norm_eps ({self.rms_norm_eps}) must be positive"
            )
        if self.num_heads % self.num_kv_heads:
            raise UnsupportedModelError(
                f"num_attention_heads ({self.num_heads}) is not a multiple of num_key_value_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2:
            raise UnsupportedModelError(f"head_dim must be even for RoPE, got {self.head_dim}")

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V elements per token over all layers (multiply by the dtype's size)."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> ModelConfig:
        names = list(d.get("architectures") or []) + [d.get("model_type", "")]
        arch = next((_HF_ARCHS[n] for n in names if n in _HF_ARCHS), None)
        if arch is None:
            raise UnsupportedModelError(
                f"unknown architecture {names[0] or '(none given)'}; supported: {', '.join(SUPPORTED)}"
            )
        try:
            rope = rope_parameters(d)
            context = int(d.get("max_position_embeddings", 4096))
            scaling = scaling_from_hf(rope, context)
            context = scaling.context_length(context) if scaling else context
            refuse_unsupported_hf(d, arch, context)
            hidden, heads = int(d["hidden_size"]), int(d["num_attention_heads"])
            bias = bool(d.get("attention_bias", False))
            return cls(
                arch=arch,
                vocab_size=int(d["vocab_size"]),
                hidden_size=hidden,
                num_layers=int(d["num_hidden_layers"]),
                num_heads=heads,
                num_kv_heads=int(d.get("num_key_value_heads") or heads),
                head_dim=int(d.get("head_dim") or hidden // max(heads, 1)),
                intermediate_size=int(d["intermediate_size"]),
                rope_theta=rope["rope_theta"],
                rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
                max_position_embeddings=context,
                tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
                qkv_bias=arch == "qwen2" or bias,  # transformers' Qwen2 always has q/k/v biases
                o_bias=arch != "qwen2" and bias,
                mlp_bias=arch == "llama" and bool(d.get("mlp_bias", False)),  # only Llama reads mlp_bias
                qk_norm=arch == "qwen3",
                rope_scaling=scaling,
            )
        except KeyError as e:
            raise UnsupportedModelError(f"config.json lacks required field {e.args[0]!r}") from None
        except (TypeError, ValueError) as e:
            raise UnsupportedModelError(f"config.json has a field of the wrong type: {e}") from None

    @classmethod
    def from_gguf(
        cls, meta: dict[str, Any], has_output_weight: bool, rope_freqs: list[float] | None = None
    ) -> ModelConfig:
        """Build from GGUF key/values (already decoded to Python values) and the `rope_freqs.weight` tensor's
        values where the file holds one (Llama 3 rope scaling)."""
        arch = meta.get("general.architecture")
        if arch not in ("llama", "qwen2", "qwen3"):
            raise UnsupportedModelError(f"unknown GGUF architecture {arch!r}; supported: llama, qwen2, qwen3")

        def get(key: str, default: Any = None) -> Any:
            value = meta.get(f"{arch}.{key}", default)
            if value is None:
                raise UnsupportedModelError(f"GGUF metadata lacks {arch}.{key}")
            return value

        heads = int(get("attention.head_count"))
        hidden = int(get("embedding_length"))
        head_dim = int(get("attention.key_length", hidden // max(heads, 1)))
        refuse_unsupported_gguf(meta, arch, head_dim)
        vocab = meta.get(f"{arch}.vocab_size") or len(meta.get("tokenizer.ggml.tokens") or [])
        theta, context = float(get("rope.freq_base", 10000.0)), int(get("context_length", 4096))
        scaling = scaling_from_gguf(meta, arch, context, theta, head_dim, rope_freqs)
        return cls(
            arch=arch,
            vocab_size=int(vocab),
            hidden_size=hidden,
            num_layers=int(get("block_count")),
            num_heads=heads,
            num_kv_heads=int(get("attention.head_count_kv", heads)),
            head_dim=head_dim,
            intermediate_size=int(get("feed_forward_length")),
            rope_theta=theta,
            rms_norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-6)),
            max_position_embeddings=scaling.context_length(context) if scaling else context,
            tie_word_embeddings=not has_output_weight,
            qkv_bias=arch == "qwen2",
            o_bias=False,
            mlp_bias=False,
            qk_norm=arch == "qwen3",
            rope_scaling=scaling,
        )

    def to_hf(self) -> dict[str, Any]:
        """A config.json that both this module and `transformers` read back to the same shape."""
        hf_class = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}
        scaling = {"rope_scaling": self.rope_scaling.to_hf()} if self.rope_scaling else {}
        return scaling | {
            "architectures": [hf_class[self.arch]],
            "model_type": self.arch,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "rope_theta": self.rope_theta,
            "rms_norm_eps": self.rms_norm_eps,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": self.arch != "qwen2" and self.qkv_bias,
            "mlp_bias": self.mlp_bias,
            "hidden_act": "silu",
        }
