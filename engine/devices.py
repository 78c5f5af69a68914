"""Device and dtype choice (the exact default, and the default of timed runs by what the CPU can do),
device synchronization for honest timings, the memory free on a device, and telling an allocation failure
apart."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch

from engine.errors import DeviceError

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


def resolve_device(name: str | None) -> torch.device:
    """`None`/"auto" picks cuda, then mps, then cpu; an explicit device must exist."""
    if name in (None, "", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise DeviceError(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"device {name!r} requested but CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(
                f"device {name!r} requested but only {torch.cuda.device_count()} CUDA device(s) exist"
            )
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            raise DeviceError(f"device {name!r} requested but MPS is not available on this machine")
    elif device.type != "cpu":
        raise DeviceError(f"unsupported device type {device.type!r}; use cpu, cuda or mps")
    return device


# /proc/cpuinfo flags of CPU instructions that multiply bfloat16 matrices natively, and their names
BF16_FLAGS = {"amx_bf16": "AMX-BF16", "avx512_bf16": "AVX512-BF16"}


def resolve_dtype(name: str | None, device: torch.device) -> torch.dtype:
    """Default (the API's, and of every parity test): bfloat16 on CUDA, float16 on MPS, float32 on CPU,
    whatever the CPU; `timing_dtype` is the default of timed bench runs."""
    if name in (None, "", "auto"):
        return {"cuda": torch.bfloat16, "mps": torch.float16}.get(device.type, torch.float32)
    if name not in DTYPES:
        raise DeviceError(f"unknown dtype {name!r}; use one of auto, float32, bfloat16, float16")
    dtype = DTYPES[name]
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise DeviceError("bfloat16 is not supported on this CUDA device; use float16")
    return dtype


def cpu_bf16_flags(cpuinfo: str | None = None) -> list[str]:
    """Which of BF16_FLAGS this CPU has, from the `flags` lines of /proc/cpuinfo (or the `cpuinfo` text
    given); none where there is no /proc/cpuinfo (not Linux)."""
    cpuinfo = _host_cpuinfo() if cpuinfo is None else cpuinfo
    flags = {
        f for line in cpuinfo.splitlines() if line.startswith("flags") for f in line.partition(":")[2].split()
    }
    return [f for f in BF16_FLAGS if f in flags]


@functools.cache
def _host_cpuinfo() -> str:
    """/proc/cpuinfo, read once ("" where there is none)."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def timing_dtype(device: torch.device, cpuinfo: str | None = None) -> tuple[torch.dtype, str]:
    """The default dtype of a timed bench run on `device`, and why: on a CPU, bfloat16 where it has native
    bfloat16 matrix instructions (BF16_FLAGS), else float32 (emulated bfloat16 runs slower than float32);
    elsewhere the exact default (`resolve_dtype`)."""
    if device.type != "cpu":
        return resolve_dtype(None, device), f"the default on {device.type.upper()}"
    found = cpu_bf16_flags(cpuinfo)
    if found:
        names = " and ".join(BF16_FLAGS[f] for f in found)
        return torch.bfloat16, f"this CPU has {names}, native bfloat16 matrix multiplies"
    return torch.float32, "this CPU has neither AMX-BF16 nor AVX512-BF16: bfloat16 would be emulated, slower"


def cpu_capability() -> dict[str, object]:
    """What results record of the host CPU: torch's vector capability (e.g. AVX2, AVX512) and the bfloat16
    matrix instructions found (BF16_FLAGS)."""
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "cpu_bf16": cpu_bf16_flags()}


def allocation_failed(error: BaseException) -> bool:
    """Whether `error` is a failed memory allocation: torch.OutOfMemoryError on a GPU, and on a CPU the
    allocator's plain RuntimeError ("DefaultCPUAllocator: can't allocate memory")."""
    return isinstance(error, torch.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and "can't allocate memory" in str(error)
    )


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels so that a wall-clock reading covers the work it claims to."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def to_device(data: object, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A tensor of host values (nested lists of numbers) on `device`: on CUDA through pinned memory without
    waiting (an ordinary copy from pageable memory would wait for the queued kernels)."""
    if device.type != "cuda":
        return torch.tensor(data, dtype=dtype, device=device)
    return torch.tensor(data, dtype=dtype, pin_memory=True).to(device, non_blocking=True)


def now(device: torch.device) -> float:
    """A synchronized timestamp in seconds."""
    synchronize(device)
    return time.perf_counter()


def mark(device: torch.device) -> Callable[[], float]:
    """The point the device's queue has reached, without waiting for it: call the result after a later
    synchronization for the host clock time at which the device got there. On CUDA a timing event (its
    elapsed time to the resolving moment, subtracted from that moment); elsewhere a synchronized timestamp
    taken now (a CPU has no queue)."""
    if device.type != "cuda":
        t = now(device)
        return lambda: t
    event = torch.cuda.Event(enable_timing=True)
    event.record()

    def resolve() -> float:
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        end.synchronize()
        return time.perf_counter() - event.elapsed_time(end) / 1e3

    return resolve


def free_memory(device: torch.device) -> tuple[int, str]:
    """Bytes that can be allocated on `device` now, and a phrase saying which memory that is."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free), f"free memory on {device} ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        free = int(torch.mps.recommended_max_memory()) - int(torch.mps.driver_allocated_memory())
        return max(free, 0), "MPS memory left under its recommended maximum"
    return _host_available()


def _host_available() -> tuple[int, str]:
    """Linux: MemAvailable, lowered to the cgroup's limit when one is set; elsewhere free (or total) pages."""
    found: list[tuple[int, str]] = []
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
        found.append((kib * 1024, "available host memory (MemAvailable)"))
    except (OSError, StopIteration, ValueError, IndexError):
        try:
            found.append((os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free host memory"))
        except (ValueError, OSError, AttributeError):  # macOS lacks SC_AVPHYS_PAGES
            found.append((os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "total host memory"))
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            found.append((max(int(limit) - used, 0), "memory left under this container's limit"))
    except (OSError, ValueError):
        pass
    return min(found)


def device_description(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"
