"""The process's peak resident memory, restartable per benchmark case (the long-context cases record it)."""

from __future__ import annotations


def reset_peak_rss() -> str:
    """Restart the process's peak-RSS count (Linux: VmHWM, reset through /proc/self/clear_refs). Returns what
    `peak_rss_bytes` will then cover: "since reset", or "whole process" where it cannot be reset."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return "since reset"
    except OSError:
        return "whole process"


def peak_rss_bytes() -> int:
    """The process's peak resident memory: VmHWM on Linux, else getrusage's ru_maxrss (bytes on macOS)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
