"""`bench cluster --calibrate`: this engine's own prefill and decode costs on this machine, measured and
fitted to the simulator's cost model (`engine.cluster.costs`).

- Prefills: prompts of `new` tokens after `cached` ones served from the cache (published first under a salt
  of their own, so no other measurement shares them), TTFT from the engine's clock (lookup, prefill, first
  sample; device synchronized), the median of `repeats`; cold ones (cached 0) under a fresh salt.
- Decode steps: `batch` requests of `context` random tokens decoded together for `STEPS` tokens (EOS
  ignored), the median time per output token of the batch's requests.
- The host link: the median of copying a 64 MiB tensor to this device and back, per byte (on a CPU, a
  memory copy).
Timings are this machine's at the moment: run it on a quiet machine, as every timed command.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time

import torch
from tqdm import tqdm

from engine.bench.args import open_engine
from engine.cluster.costs import CostModel, fit
from engine.devices import dtype_name, synchronize
from engine.kv.pool import KVCache

NEW = (64, 256, 1024)
CACHED = (0, 256, 1024)
BATCHES = (1, 2, 4, 8)
CONTEXTS = (128, 1024)
STEPS = 16
REPEATS = 3


def _ids(n: int, seed: int, vocab: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(100, vocab, (n,), generator=gen).tolist()


def host_bytes_per_s(device: torch.device) -> float:
    x = torch.empty(64 * 2**20, dtype=torch.uint8)
    times = []
    for _ in range(5):
        synchronize(device)
        start = time.perf_counter()
        x.to(device, copy=True).to("cpu", copy=True)
        synchronize(device)
        times.append(time.perf_counter() - start)
    return 2 * x.numel() / statistics.median(times)


def calibrate(args: argparse.Namespace) -> CostModel:
    engine = open_engine(args)
    vocab, bs = min(engine.config.vocab_size, 30000), engine.blocks.block_size
    prefills: list[tuple[int, int, float]] = []
    grid = [(n, c) for n in NEW for c in CACHED]
    engine.generate(_ids(64, 0, vocab), max_new_tokens=1, cache=False)  # warm-up
    for k, (new, cached) in enumerate(tqdm(grid, desc="calibrate prefill", unit="point")):
        times = []
        for r in range(REPEATS):
            salt = f"calibrate-{k}-{r}"
            ids = _ids(cached + new, 1000 * k + r, vocab)
            if cached:
                engine.generate(ids[:cached], max_new_tokens=1, cache_salt=salt)
            gen = engine.generate(ids, max_new_tokens=1, cache_salt=salt)
            assert gen.usage.cached_tokens == cached // bs * bs
            times.append(gen.timing.ttft_s)
            engine.reset_cache()
        prefills.append((new + cached - cached // bs * bs, cached // bs * bs, statistics.median(times)))
    steps: list[tuple[int, int, float]] = []
    for batch in tqdm(BATCHES, desc="calibrate decode", unit="batch"):
        for context in CONTEXTS:
            prompts = [_ids(context, 7919 * batch + i, vocab) for i in range(batch)]
            gens = engine.generate_many(prompts, max_new_tokens=STEPS, ignore_eos=True, cache=False)
            tpot = statistics.median(g.timing.time_per_output_token_s for g in gens)
            steps.append((batch, batch * (context + STEPS // 2), tpot))
    source = {
        "measured_on": {
            "model": engine.source.model_id,
            "device": str(engine.device),
            "dtype": dtype_name(engine.dtype),
            "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "load_average": os.getloadavg(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "repeats": REPEATS,
            "decode_steps": STEPS,
        }
    }
    kv_bytes = KVCache.bytes_per_token(engine.config, engine.dtype)
    name = f"calibrated-{engine.source.model_id.split('/')[-1]}-{engine.device.type}"
    return fit(name, prefills, steps, kv_bytes, host_bytes_per_s(engine.device), source)
