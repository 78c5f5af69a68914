"""Config fields that change the math in ways this engine does not implement: each is refused by name.

The fields checked are those that transformers' Qwen2/Qwen3/Llama models (for config.json) or llama.cpp
(for GGUF metadata) read and act on; a field they ignore is ignored here too. Bias flags and tied
embeddings are checked against the tensors themselves by `engine.loading.weights`.
"""

from __future__ import annotations

from typing import Any

from engine.errors import UnsupportedModelError

ACTIVATIONS = ("silu", "swish")  # the same function; the MLP is SwiGLU


def refuse_unsupported_hf(d: dict[str, Any], arch: str) -> None:
    """Raise for the first config.json field whose effect is not implemented."""
    act = d.get("hidden_act", "silu")
    if act not in ACTIVATIONS:
        raise UnsupportedModelError(f"hidden_act {act!r} is not implemented (only silu, the SwiGLU MLP)")
    if quantization := d.get("quantization_config"):
        method = quantization.get("quant_method", "?") if isinstance(quantization, dict) else quantization
        raise UnsupportedModelError(
            f"quantization_config ({method}) is not implemented: load float weights or a GGUF file"
        )
    rope = _rope_parameter_dicts(d)
    for field, params in rope:
        rope_type = params.get("rope_type", params.get("type", "default"))
        if rope_type != "default":
            raise UnsupportedModelError(
                f"{field}: rope type {rope_type!r} is not implemented (only default RoPE)"
            )
    factors = [p.get("partial_rotary_factor") for _, p in rope] + [d.get("partial_rotary_factor")]
    factor = next((f for f in factors if f not in (None, 1.0)), None)
    if factor is not None:
        raise UnsupportedModelError(f"partial_rotary_factor {factor} is not implemented (RoPE on all dims)")
    if arch in ("qwen2", "qwen3"):  # transformers' Llama has no sliding window and ignores these fields
        _refuse_sliding_window(d)


def _rope_parameter_dicts(d: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every RoPE parameter dict of the config, named by field: `rope_scaling` (the older spelling) and
    `rope_parameters`, each flat or nested per layer type. transformers applies `rope_scaling` when it is set,
    whatever `rope_parameters` says, so both are checked."""
    found = []
    for field in ("rope_scaling", "rope_parameters"):
        value = d.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise UnsupportedModelError(f"config.json field {field} is not an object: {value!r}")
        nested = [(f"{field}.{key}", v) for key, v in value.items() if isinstance(v, dict)]
        found += nested or [(field, value)]
    return found


def rope_theta(d: dict[str, Any]) -> float:
    """RoPE base as transformers resolves it: from `rope_scaling` if set, else `rope_parameters`, else the
    top-level rope_theta, else 10000."""
    params = d.get("rope_scaling") or d.get("rope_parameters") or {}
    per_type = [p for p in params.values() if isinstance(p, dict)] or [params]
    thetas = {float(p.get("rope_theta", d.get("rope_theta", 10000.0))) for p in per_type}
    if len(thetas) > 1:
        raise UnsupportedModelError(
            f"different rope_theta per layer type ({sorted(thetas)}) is not implemented"
        )
    return thetas.pop()


def _refuse_sliding_window(d: dict[str, Any]) -> None:
    """Qwen2/Qwen3 use a window only when use_sliding_window is true, on the layers `layer_types` names
    (default: layers >= max_window_layers); a window at least as long as the context changes nothing."""
    if not d.get("use_sliding_window"):
        return
    layers, context = int(d.get("num_hidden_layers", 0)), int(d.get("max_position_embeddings", 4096))
    window = int(d.get("sliding_window", 4096) or context)
    types = d.get("layer_types") or [
        "sliding_attention" if i >= int(d.get("max_window_layers", layers)) else "full_attention"
        for i in range(layers)
    ]
    sliding = [i for i, t in enumerate(types) if t != "full_attention"]
    if sliding and window < context:
        raise UnsupportedModelError(
            f"sliding-window attention (use_sliding_window: true, window {window} < context {context}, "
            f"from layer {sliding[0]}) is not implemented"
        )


# GGUF keys (after "<arch>.") whose presence with a value other than the neutral one changes the math.
_GGUF_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "rope.scaling.type": ("none",),
    "rope.scaling.factor": (0.0, 1.0),
    "rope.scale_linear": (1.0,),
    "attention.sliding_window": (0,),
    "expert_count": (0,),
    "logit_scale": (1.0,),
    "embedding_scale": (1.0,),
    "residual_scale": (1.0,),
    "attention.scale": (0.0,),
    "attn_logit_softcapping": (0.0,),
    "final_logit_softcapping": (0.0,),
    "attention.clamp_kqv": (0.0,),
    "attention.max_alibi_bias": (0.0,),
    "use_parallel_residual": (False,),
}


def refuse_unsupported_gguf(meta: dict[str, Any], arch: str, head_dim: int) -> None:
    """Raise for the first GGUF metadata key whose effect is not implemented."""
    for key, neutral in _GGUF_NEUTRAL.items():
        value = meta.get(f"{arch}.{key}")
        if value is not None and value not in neutral:
            raise UnsupportedModelError(f"GGUF metadata {arch}.{key} = {value!r} is not implemented")
    for key in ("rope.dimension_count", "attention.value_length"):
        value = meta.get(f"{arch}.{key}")
        if value is not None and int(value) != head_dim:
            raise UnsupportedModelError(
                f"GGUF metadata {arch}.{key} = {value} differs from the head dimension {head_dim}: not implemented"
            )
