"""glibc's malloc held to fixed thresholds in a benchmark process, so that a large tensor's page faults are
paid once, not on every call by some processes and never by others.

By default glibc maps every block over its mmap threshold (128 KiB, raised to a freed mapped block's size,
up to 32 MiB) fresh from the kernel and unmaps it when freed, and returns the heap's free top above its trim
threshold: whether a call's large temporaries fault in new pages each time depends on the process's
allocation history. transformers' forward of 64 new tokens over a StaticCache of 8,192 (repeat_kv's copies
of the keys and values, 30 MB a layer, float32) took 475-506 ms in some processes and 718 ms in others on the
same machine, while ours (K/V in a pool allocated once) took 378-391 in both: the warm ratio read 0.78-0.80
or 0.53 by chance. With the mmap threshold fixed at glibc's largest (32 MiB: blocks up to it come from the
heap) and a trim threshold of 1 GiB, both sides keep their pages, as a long-running server's allocator does.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
TRIM_THRESHOLD = 2**30


def steady_malloc() -> str:
    """Fix this process's malloc thresholds (glibc); returns what was set, for the run's environment, or why
    nothing was (another C library: its own allocator, left as it is)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "not glibc: the C library's allocator as it is"
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return "glibc refused mallopt: its default, adaptive thresholds"
    return f"glibc mmap threshold {MMAP_THRESHOLD >> 20} MiB, trim threshold {TRIM_THRESHOLD >> 20} MiB"
