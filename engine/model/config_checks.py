"""Config fields that change the math in ways this engine does not implement: each is refused by name.

The fields checked are those that transformers' Qwen2/Qwen3/Llama models (for config.json) or llama.cpp
(for GGUF metadata) read and act on; a field they ignore is ignored here too. Bias flags and tied
embeddings are checked against the tensors themselves by `engine.loading.weights`.
"""

from __future__ import annotations

from typing import Any

from engine.errors import UnsupportedModelError

ACTIVATIONS = ("silu", "swish")  # the same function; the MLP is SwiGLU


# RoPE types transformers implements that the engine refuses, and why.
_ROPE_REFUSED = {
    "linear": "position interpolation; the scalings implemented are yarn and llama3",
    "dynamic": (
        "dynamic NTK changes the frequencies with the sequence length, so a cached key would differ from the "
        "key the same token gets in a longer prompt: it breaks prefix reuse"
    ),
    "longrope": (
        "LongRoPE switches its frequency factors when the sequence passes the original window, as dynamic NTK "
        "changes its frequencies: it breaks prefix reuse"
    ),
}
ROPE_TYPES = ("default", "yarn", "llama3")


def refuse_unsupported_hf(d: dict[str, Any], arch: str, context: int) -> None:
    """Raise for the first config.json field whose effect is not implemented (RoPE: see `rope_parameters`);
    `context` is the context length the model serves."""
    act = d.get("hidden_act", "silu")
    if act not in ACTIVATIONS:
        raise UnsupportedModelError(f"hidden_act {act!r} is not implemented (only silu, the SwiGLU MLP)")
    if quantization := d.get("quantization_config"):
        method = quantization.get("quant_method", "?") if isinstance(quantization, dict) else quantization
        raise UnsupportedModelError(
            f"quantization_config ({method}) is not implemented: load float weights or a GGUF file"
        )
    factors = [p.get("partial_rotary_factor") for _, p in _rope_parameter_dicts(d)]
    factor = next((f for f in factors + [d.get("partial_rotary_factor")] if f not in (None, 1.0)), None)
    if factor is not None:
        raise UnsupportedModelError(f"partial_rotary_factor {factor} is not implemented (RoPE on all dims)")
    if arch in ("qwen2", "qwen3"):  # transformers' Llama has no sliding window and ignores these fields
        _refuse_sliding_window(d, context)


def rope_parameters(d: dict[str, Any]) -> dict[str, Any]:
    """The RoPE parameters transformers applies, as one flat dict with its rope_theta: `rope_scaling` (the
    older spelling) when set, else `rope_parameters`, else the top-level rope_theta. Refused: a rope type
    other than default, yarn and llama3 in either field; different parameters per layer type; and a
    `rope_parameters` that the applied `rope_scaling` contradicts (another rope type or rope_theta, which
    transformers would silently drop)."""
    for field, params in _rope_parameter_dicts(d):
        rope_type = _rope_type(params)
        if rope_type not in ROPE_TYPES:
            why = _ROPE_REFUSED.get(rope_type, f"the rope types implemented are {', '.join(ROPE_TYPES)}")
            raise UnsupportedModelError(f"{field}: rope type {rope_type!r} is not implemented ({why})")
    applied_field = "rope_scaling" if d.get("rope_scaling") else "rope_parameters"
    per_type = _per_layer_type(d.get(applied_field) or {})
    if any(p != per_type[0] for p in per_type):
        raise UnsupportedModelError(f"{applied_field}: different RoPE per layer type is not implemented")
    applied = per_type[0] | {"rope_theta": float(per_type[0].get("rope_theta", d.get("rope_theta", 10000.0)))}
    if applied_field == "rope_scaling":
        for ignored in _per_layer_type(d.get("rope_parameters") or {}):
            _refuse_contradiction(applied, ignored)
    return applied


def _refuse_contradiction(applied: dict[str, Any], ignored: dict[str, Any]) -> None:
    ignored_type = _rope_type(ignored)
    if ignored_type not in ("default", _rope_type(applied)):
        raise UnsupportedModelError(
            f"rope_scaling (rope type {_rope_type(applied)!r}) and rope_parameters (rope type "
            f"{ignored_type!r}) disagree; transformers applies rope_scaling only: remove one of them"
        )
    theta = ignored.get("rope_theta")
    if theta is not None and float(theta) != applied["rope_theta"]:
        raise UnsupportedModelError(
            f"rope_parameters' rope_theta {theta} differs from the rope_theta {applied['rope_theta']} that "
            "transformers applies with rope_scaling (its own rope_theta, else the top-level one, else 10000): "
            "add rope_theta to rope_scaling"
        )


def _rope_type(params: dict[str, Any]) -> str:
    return params.get("rope_type", params.get("type", "default"))


def _per_layer_type(value: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in value.values() if isinstance(v, dict)] or [value]


def _rope_parameter_dicts(d: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every RoPE parameter dict of the config, named by field: `rope_scaling` and `rope_parameters`, each
    flat or nested per layer type."""
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


def _refuse_sliding_window(d: dict[str, Any], context: int) -> None:
    """Qwen2/Qwen3 use a window only when use_sliding_window is true, on the layers `layer_types` names
    (default: layers >= max_window_layers); a window at least as long as the context changes nothing."""
    if not d.get("use_sliding_window"):
        return
    layers = int(d.get("num_hidden_layers", 0))
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
    "rope.scale_linear": (1.0,),
    "rope.scaling.attn_factor": (1.0,),
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
