"""Which attention backend and kernels a prefill after one cached block and a batched decode step run on a
device, what the warm prefill costs against the cold prefill of the same prompt, and (CUDA) the share of a
decode step the device sits idle waiting for the host (eager, and with decode steps as CUDA graphs): the
check that the warm path uses a fused or paged kernel (no math fallback materializing [heads, T, S + T]
scores) and costs no more than cold.

    python scripts/kernel_check.py --device cuda [--dtype bfloat16] [--model synthetic:qwen2.5-0.5b]
                                   [--attention auto|torch|flashinfer|flash-attn]
                                   [--length 2048] [--rounds 7] [--out check.json]

Exit status 1 when no fused kernel ran, a math fallback did, or warm / cold exceeds --target (default 1.02)
on CUDA; on other devices the ratio is reported, not judged.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's engine

import engine  # noqa: E402  (before torch: its OpenMP threads wait passively, as a user's do)

# isort: split
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from engine.devices import now  # noqa: E402

# kernel or op names of fused attention (with a log-sum-exp) and of the paged libraries' kernels
FUSED = ("flash", "efficient", "fmha", "cutlass", "flashinfer", "batchprefill", "batchdecode", "paged")
DECODE_SEQUENCES, DECODE_TOKENS = 8, 16  # the batched decode whose kernels and host share are reported
MATH = ("_scaled_dot_product_attention_math",)


def kernels_of(fn, device: torch.device) -> list[str]:
    """Names of the ops (and, on CUDA, the kernels) that one call of `fn` ran."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        now(device)
    return sorted({e.key for e in prof.key_averages()})


def host_share(fn, device: torch.device) -> float | None:
    """CUDA: the share of one call's wall time in which no kernel ran (1 - kernel time / wall time), what
    launch overhead and host work cost a decode step; None elsewhere."""
    if device.type != "cuda":
        return None
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = now(device)
        fn()
        wall = now(device) - start
    busy = sum(e.self_device_time_total for e in prof.key_averages() if e.device_type.name == "CUDA") / 1e6
    return max(0.0, 1.0 - busy / wall)


def graphs_host_share(e: engine.Engine, decode) -> float | None:  # noqa: ANN001
    """`host_share` of the decode with its decode steps captured as CUDA graphs (static decode; the first
    call captures, untimed); None off CUDA."""
    if e.device.type != "cuda":
        return None
    e.runner.use_static_decode(True)
    try:
        decode()
        return host_share(decode, e.device)
    finally:
        e.runner.use_static_decode(False)


def warm_up(e: engine.Engine, out: Path | None, calls: list) -> int:
    """Each call once, eager and (CUDA) with decode steps as CUDA graphs, timed: the first use of a paged
    kernel library compiles its kernels (FlashInfer's JIT can take minutes), which no timed step should pay."""
    start = now(e.device)
    for fn in calls:
        fn()
    eager = now(e.device) - start
    graphs = None
    if e.device.type == "cuda":
        e.runner.use_static_decode(True)
        calls[-1]()
        e.runner.use_static_decode(False)
        graphs = now(e.device) - start - eager
    report = {
        "device": str(e.device),
        "attention": e.info["attention"],
        "warm_up_s": eager,
        "graphs_s": graphs,
    }
    print(json.dumps(report, indent=2))
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default=None)
    p.add_argument("--model", default="synthetic:qwen2.5-0.5b")
    p.add_argument(
        "--attention", default="auto", help="attention backend: auto, torch, flashinfer, flash-attn"
    )
    p.add_argument("--length", type=int, default=2048)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--target", type=float, default=1.02)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument(
        "--warm-up",
        action="store_true",
        help="only run the backend's kernels once (FlashInfer compiles them at first use) and report how long",
    )
    args = p.parse_args(argv)
    e = engine.load(
        args.model, args.device, args.dtype, cache_tokens=4 * args.length + 4096, attention=args.attention
    )
    e.kv.touch()  # no arm pays a pool page's first touch
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(100, e.config.vocab_size, (args.length,), generator=gen).tolist()
    block = e.blocks.block_size

    def one_block_cached() -> None:  # untimed: the cache holds exactly the prompt's first block
        e.reset_cache()
        e.generate(ids[: block + 1], max_new_tokens=1)

    def warm() -> None:
        assert e.generate(ids, max_new_tokens=1).usage.cached_tokens == block

    def cold() -> None:
        e.generate(ids, max_new_tokens=1, cache=False)

    def decode() -> None:  # sequences over the cached block, decoding together
        prompts = [ids[: block + 1 + i] for i in range(DECODE_SEQUENCES)]
        e.generate_many(prompts, max_new_tokens=DECODE_TOKENS, ignore_eos=True)

    if args.warm_up:
        return warm_up(e, args.out, [one_block_cached, warm, cold, decode])
    for fn in (one_block_cached, warm, cold, decode, one_block_cached):  # untimed first calls
        fn()
    names = kernels_of(warm, e.device)
    decode_names = kernels_of(decode, e.device)
    fused = [n for n in names if any(f in n.lower() for f in FUSED)]
    math = [n for n in sorted(set(names) | set(decode_names)) if any(m in n for m in MATH)]
    ratios = []
    for r in range(args.rounds):  # alternate which side goes first
        times = {}
        for name, fn in (("warm", warm), ("cold", cold)) if r % 2 == 0 else (("cold", cold), ("warm", warm)):
            if name == "warm":
                one_block_cached()
            start = now(e.device)
            fn()
            times[name] = now(e.device) - start
        ratios.append(times["warm"] / times["cold"])
    ratio = statistics.median(ratios)
    judged = e.device.type == "cuda"
    ok = bool(fused) and not math and (ratio <= args.target or not judged)
    report = {
        "device": str(e.device),
        "dtype": str(e.dtype),
        "model": args.model,
        "length": args.length,
        "attention": e.info["attention"],
        "fused_kernels": fused,
        "decode_kernels": [n for n in decode_names if any(f in n.lower() for f in FUSED)],
        "decode_host_share": host_share(decode, e.device),
        "decode_host_share_graphs": graphs_host_share(e, decode),
        "math_fallback": math,
        "warm_over_cold": ratio,
        "warm_over_cold_min": min(ratios),
        "warm_over_cold_max": max(ratios),
        "rounds": len(ratios),
        "target": args.target if judged else None,
        "ok": ok,
    }
    print(json.dumps(report, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
