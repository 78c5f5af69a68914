"""Device and dtype choice, device synchronization for honest timings, and the memory free on a device."""

from __future__ import annotations

import os
import time

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


def resolve_dtype(name: str | None, device: torch.device) -> torch.dtype:
    """Default: bfloat16 on CUDA, float16 on MPS, float32 on CPU (bf16 is 2-2.5x slower on most CPUs)."""
    if name in (None, "", "auto"):
        return {"cuda": torch.bfloat16, "mps": torch.float16}.get(device.type, torch.float32)
    if name not in DTYPES:
        raise DeviceError(f"unknown dtype {name!r}; use one of auto, float32, bfloat16, float16")
    dtype = DTYPES[name]
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise DeviceError("bfloat16 is not supported on this CUDA device; use float16")
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels so that a wall-clock reading covers the work it claims to."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def now(device: torch.device) -> float:
    """A synchronized timestamp in seconds."""
    synchronize(device)
    return time.perf_counter()


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
