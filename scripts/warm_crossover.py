"""Where a prefill after a short cached prefix stops paying for the padded call: one layer's attention of V new
tokens after S cached ones on the CPU's torch backend, as one causal call over all S + V keys with the
query rows front-padded (bitwise equal to the cold prefill; S x S / 2 scores wasted) against the split path
(a call over the S cached keys, a causal call over the V new ones, their log-sum-exp merge), alternating.

    python scripts/warm_crossover.py [--model synthetic:qwen2.5-0.5b] [--dtype float32]
                                     [--lengths 256 1024 4096] [--starts 16 32 64 128 256 512]
                                     [--rounds 9]

Per (S, L = S + V): each side's median time per call (wall and CPU time, one layer, pool read in place) and
the ratio padded / split; per L the largest S where padded is no slower, and S^2 / L there: the engine
pads while S^2 <= PADDED_CROSSOVER x L (engine/model/attention/torch_sdpa.py). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's engine

import engine  # noqa: E402, F401  (before torch: its OpenMP threads wait passively)

# isort: split
import torch  # noqa: E402

from engine.devices import resolve_dtype  # noqa: E402
from engine.kv.pool import KVCache  # noqa: E402
from engine.kv.step import SeqSpan  # noqa: E402
from engine.loading.sources import resolve  # noqa: E402
from engine.model.attention import torch_sdpa  # noqa: E402

BLOCK = 16


def one_layer(config, dtype: torch.dtype, start: int, length: int):  # noqa: ANN001, ANN201
    """A one-layer pool holding the S cached and V new keys in consecutive blocks, the new rows' q, k, v, and
    the span."""
    cfg = dataclasses.replace(config, num_layers=1)
    total = start + length
    kv = KVCache(cfg, -(-total // BLOCK), BLOCK, dtype, torch.device("cpu"))
    g = torch.Generator().manual_seed(start * 7919 + length)
    keys = torch.randn(total, cfg.num_kv_heads, cfg.head_dim, generator=g).to(dtype)
    values = torch.randn(total, cfg.num_kv_heads, cfg.head_dim, generator=g).to(dtype)
    kv.write(0, torch.arange(total), keys, values)
    q = torch.randn(length, cfg.num_heads, cfg.head_dim, generator=g).to(dtype)
    span = SeqSpan(start, length, list(range(-(-total // BLOCK))))
    return kv, span, q, keys[start:], values[start:]


def timed(fn) -> tuple[float, float]:  # noqa: ANN001
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def compare(config, dtype: torch.dtype, start: int, length: int, rounds: int) -> tuple[float, str]:  # noqa: ANN001
    kv, span, q, k, v = one_layer(config, dtype, start, length)
    backend = torch_sdpa.TorchBackend(torch.device("cpu"))

    def call(crossover: float):  # noqa: ANN202
        def run() -> None:
            torch_sdpa.PADDED_CROSSOVER = crossover
            plan = backend.plan([span], kv)
            assert plan.mode == ("padded" if crossover else "split")
            plan.forward(0, q, k, v)

        return run

    sides = {"padded": call(float("inf")), "split": call(0)}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for fn in sides.values():
        fn()  # untimed
    for r in range(rounds):
        for name in sides if r % 2 == 0 else reversed(list(sides)):
            times[name].append(timed(sides[name]))
    ratios = [p[1] / s[1] for p, s in zip(times["padded"], times["split"], strict=True) if s[1] > 0]
    ratio = statistics.median(ratios) if ratios else float("nan")
    med = {n: [statistics.median(t[i] for t in times[n]) * 1e3 for i in (0, 1)] for n in times}
    return ratio, (
        f"S {start:>5} L {start + length:>5}: padded {med['padded'][0]:8.2f} ms wall {med['padded'][1]:8.2f} ms cpu, "
        f"split {med['split'][0]:8.2f} / {med['split'][1]:8.2f}, padded / split (cpu) {ratio:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="synthetic:qwen2.5-0.5b")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--starts", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512])
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args(argv)
    config = resolve(args.model).config
    dtype = resolve_dtype(args.dtype, torch.device("cpu"))
    print(f"{args.model} {args.dtype}, {torch.get_num_threads()} threads; one layer, median of {args.rounds}")
    for length in args.lengths:
        pays = []
        for start in (s for s in args.starts if s < length):
            ratio, line = compare(config, dtype, start, length - start, args.rounds)
            print(line, flush=True)
            if ratio <= 1.0:
                pays.append(start)
        best = max(pays, default=0)
        print(f"L {length}: padded no slower up to S = {best} (S^2 / L = {best * best / length:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
