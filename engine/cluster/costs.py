"""The simulator's clock: what a prefill and a decode step cost on one replica.

    prefill(new, cached) = p0 + p1 * new + p2 * new * (cached + new / 2)
    decode_step(batch, context) = d0 + d1 * batch + d2 * context
    load(tokens) = tokens * kv_bytes_per_token / host_bytes_per_s

`new` tokens are computed after `cached` ones served from the cache; p0 is a forward's fixed cost (reading
every weight once, launching kernels), p1 a token's linear layers, p2 one query-key pair of attention (a
new token attends to the cached ones and, on average, half the new ones). A decode step of `batch`
sequences holding `context` tokens in all pays d0 once, d1 per sequence and d2 per token of K/V read.
`load` is the time to bring blocks from a CPU tier over the host link.

Two sources, one file format (JSON, `CostModel.save` / `load_cost`):
- `fit`: least squares on this engine's own measurements on this machine (`bench cluster --calibrate`),
  each coefficient kept non-negative (the subset of terms with the smallest residual among those that fit
  without a negative one);
- `figures`: published figures of an accelerator and a model (peak FLOP/s, memory bandwidth, host link;
  parameter count and attention shape) with the efficiency assumed of each, turned into coefficients by
  the roofline (`from_figures`): what a user without the hardware can start from. Shipped:
  `h100-llama-3.1-8b` (engine/cluster/costs/).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import InvalidArgumentError

SHIPPED_DIR = Path(__file__).parent / "costs"
PREFILL_TERMS = ("p0", "p1", "p2")
DECODE_TERMS = ("d0", "d1", "d2")
MODEL_FIGURES = (
    "parameters",
    "weight_bytes",
    "layers",
    "heads",
    "kv_heads",
    "head_dim",
    "kv_bytes_per_element",
)


@dataclass(frozen=True)
class CostModel:
    name: str
    p0: float
    p1: float
    p2: float
    d0: float
    d1: float
    d2: float
    kv_bytes_per_token: float
    host_bytes_per_s: float  # CPU tier <-> accelerator
    source: dict[str, Any] = field(default_factory=dict)  # figures and their sources, or the measurements

    def prefill(self, new: int, cached: int) -> float:
        return self.p0 + self.p1 * new + self.p2 * new * (cached + new / 2)

    def decode_step(self, batch: int, context: int) -> float:
        return self.d0 + self.d1 * batch + self.d2 * context

    def load(self, tokens: int) -> float:
        return tokens * self.kv_bytes_per_token / self.host_bytes_per_s

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")


def prefill_features(new: float, cached: float) -> list[float]:
    return [1.0, new, new * (cached + new / 2)]


def decode_features(batch: float, context: float) -> list[float]:
    return [1.0, batch, context]


def nonnegative_fit(rows: Sequence[Sequence[float]], seconds: Sequence[float]) -> list[float]:
    """Least squares with every coefficient >= 0: of the subsets of terms whose unconstrained fit has no
    negative coefficient, the one with the smallest residual (the others 0). Few terms, so all subsets."""
    x, y = np.asarray(rows, dtype=float), np.asarray(seconds, dtype=float)
    best: tuple[float, list[float]] | None = None
    for k in range(1, x.shape[1] + 1):
        for keep in itertools.combinations(range(x.shape[1]), k):
            coef, *_ = np.linalg.lstsq(x[:, keep], y, rcond=None)
            if (coef < 0).any():
                continue
            residual = float(((x[:, keep] @ coef - y) ** 2).sum())
            if best is None or residual < best[0] - 1e-18:
                full = [0.0] * x.shape[1]
                for i, c in zip(keep, coef, strict=True):
                    full[i] = float(c)
                best = (residual, full)
    if best is None:
        raise InvalidArgumentError("no non-negative fit of the measurements: every time was below zero")
    return best[1]


def fit(
    name: str,
    prefills: Sequence[tuple[int, int, float]],
    steps: Sequence[tuple[int, int, float]],
    kv_bytes_per_token: float,
    host_bytes_per_s: float,
    source: dict[str, Any],
) -> CostModel:
    """The model fitted to (new, cached, seconds) prefills and (batch, context, seconds) decode steps."""
    p = nonnegative_fit([prefill_features(n, c) for n, c, _ in prefills], [s for *_, s in prefills])
    d = nonnegative_fit([decode_features(b, c) for b, c, _ in steps], [s for *_, s in steps])
    measured = {
        "prefills": [{"new": n, "cached": c, "seconds": s} for n, c, s in prefills],
        "decode_steps": [{"batch": b, "context": c, "seconds": s} for b, c, s in steps],
    }
    return CostModel(name, *p, *d, kv_bytes_per_token, host_bytes_per_s, source | {"measured": measured})


def _figure(group: dict[str, Any], key: str, where: str, most: float = math.inf) -> float:
    """One published figure: a finite number above 0 (at most `most`), else one line naming it."""
    value = group[key]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and 0 < value <= most):
        bound = f"above 0 and at most {most:g}" if math.isfinite(most) else "a finite number above 0"
        raise InvalidArgumentError(f"cost figures of {where}: {key} must be {bound}, got {value!r:.40}")
    return float(value)


def from_figures(name: str, figures: dict[str, Any]) -> CostModel:
    """The roofline of published figures (see the module docstring; every field is required, a finite
    number above 0, the efficiencies at most 1): accelerator `peak_flops`, `memory_bytes_per_s`,
    `host_bytes_per_s`; model `parameters`, `weight_bytes`, `layers`, `heads`, `kv_heads`, `head_dim`,
    `kv_bytes_per_element`; efficiency `compute`, `memory` (shares of the peaks a real engine reaches)."""
    try:
        acc, model, eff = figures["accelerator"], figures["model"], figures["efficiency"]
        a = {k: _figure(acc, k, name) for k in ("peak_flops", "memory_bytes_per_s", "host_bytes_per_s")}
        m = {k: _figure(model, k, name) for k in MODEL_FIGURES}
        e = {k: _figure(eff, k, name, most=1.0) for k in ("compute", "memory")}
    except (KeyError, TypeError) as err:
        raise InvalidArgumentError(f"cost figures of {name}: missing or malformed field {err}") from None
    flops, bandwidth = a["peak_flops"] * e["compute"], a["memory_bytes_per_s"] * e["memory"]
    kv_bytes = 2 * m["layers"] * m["kv_heads"] * m["head_dim"] * m["kv_bytes_per_element"]
    per_token = 2 * m["parameters"] / flops  # a token through every linear layer
    per_pair = 4 * m["layers"] * m["heads"] * m["head_dim"] / flops  # q.k and p.v
    weights = m["weight_bytes"] / bandwidth  # one read of every weight
    cost = CostModel(
        name,
        weights,
        per_token,
        per_pair,
        weights,
        per_token,
        kv_bytes / bandwidth,
        kv_bytes,
        a["host_bytes_per_s"],
    )
    return checked(cost, f"cost figures of {name}")


def checked(model: CostModel, where: str) -> CostModel:
    """`model` when its clock is usable: every coefficient finite and non-negative, a prefill that costs
    something (else every TTFT is 0), a host link above 0; else one line naming the term."""
    terms = {
        f: getattr(model, f)
        for f in (*PREFILL_TERMS, *DECODE_TERMS, "kv_bytes_per_token", "host_bytes_per_s")
    }
    bad = [f"{f} = {v!r:.40}" for f, v in terms.items() if not (math.isfinite(v) and v >= 0)]
    if bad:
        raise InvalidArgumentError(f"{where}: every term must be a finite number >= 0; got {', '.join(bad)}")
    if not any(terms[f] > 0 for f in PREFILL_TERMS):
        raise InvalidArgumentError(f"{where}: p0, p1 and p2 are all 0: a prefill would cost nothing (TTFT 0)")
    if terms["host_bytes_per_s"] <= 0:
        raise InvalidArgumentError(f"{where}: host_bytes_per_s must be above 0 (the CPU tier's link)")
    return model


def load_cost(spec: str) -> CostModel:
    """A cost file: a path, or the name of a shipped one (`h100-llama-3.1-8b`). A file holds either fitted
    coefficients (as `CostModel.save` writes them) or `figures` (turned into coefficients here)."""
    path = Path(spec)
    if not path.is_file():
        path = SHIPPED_DIR / f"{spec}.json"
        if not path.is_file():
            shipped = ", ".join(sorted(p.stem for p in SHIPPED_DIR.glob("*.json")))
            raise InvalidArgumentError(f"--cost {spec}: no such file, nor a shipped cost ({shipped})")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidArgumentError(f"--cost {spec}: not a JSON cost file ({e})") from None
    if not isinstance(doc, dict):
        raise InvalidArgumentError(f"--cost {spec}: expected a JSON object")
    if "figures" in doc:
        model = from_figures(str(doc.get("name", path.stem)), doc["figures"])
        return CostModel(**{**asdict(model), "source": doc})
    fields = ("name", *PREFILL_TERMS, *DECODE_TERMS, "kv_bytes_per_token", "host_bytes_per_s")
    missing = [f for f in fields if f not in doc]
    bad = [
        f
        for f in fields[1:]
        if f in doc and (isinstance(doc[f], bool) or not isinstance(doc[f], (int, float)))
    ]
    if missing or bad:
        raise InvalidArgumentError(
            f"--cost {spec}: expected non-negative numbers {', '.join(fields[1:])} (or `figures`); "
            f"missing {missing or 'none'}, not numbers {bad or 'none'}"
        )
    return checked(CostModel(**{f: doc[f] for f in fields}, source=doc.get("source", {})), f"--cost {spec}")
