"""What else the machine was doing while a pass was timed: the 1-minute load average and this process's CPU
time (user + system, all its threads) against wall time.

A pass is flagged contended when the load average (the higher of its start and end readings) less this run's
own share of it (its torch threads on a CPU run, up to the cores; one thread on a GPU run) exceeds half a core,
i.e. other work wanted the cores too, or, on a CPU run, when the process got less than half its torch threads'
worth of CPU time over the pass's busy time (it was waiting for cores). Busy time is wall time less what the
pass itself chose to wait (an open-loop driver's sleep until its next arrival), which the caller reports.
Both are heuristics that flag a busy machine, not proofs that a timing is off: flagged passes stay in every
statistic and are listed beside them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from engine.machine_load import load_averages

OTHERS_LIMIT = 0.5  # cores' worth of other runnable threads (load average) a pass tolerates


@dataclass(frozen=True)
class PassLoad:
    wall_s: float  # the pass's wall-clock time
    idle_s: float  # of which the pass chose to wait (sleeping until its next arrival), not asking for CPU
    cpu_s: float  # CPU time this process (every thread) used over the pass
    load_1m: float | None  # 1-minute load average, the higher of start and end (None: not available here)
    cores: int  # logical cores of the machine
    threads: int  # torch's intra-op threads
    contended: bool
    why: str  # what flagged it ("" when not contended)


def load_average() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    averages = load_averages()
    return None if averages is None else averages[0]


def start_pass(device: torch.device) -> Callable[..., PassLoad]:
    """Start watching one pass; call the returned function when it ends, with the seconds it chose to wait."""
    wall0, cpu0, load0 = time.perf_counter(), time.process_time(), load_average()

    def stop(idle_s: float = 0.0) -> PassLoad:
        wall, cpu, load1 = time.perf_counter() - wall0, time.process_time() - cpu0, load_average()
        loads = [x for x in (load0, load1) if x is not None]
        cores, threads = os.cpu_count() or 1, torch.get_num_threads()
        return judge(wall, cpu, max(loads) if loads else None, cores, threads, device, idle_s)

    return stop


def judge(
    wall_s: float,
    cpu_s: float,
    load_1m: float | None,
    cores: int,
    threads: int,
    device: torch.device,
    idle_s: float = 0.0,
) -> PassLoad:
    """The pass's record, flagged as the module docstring says."""
    reasons = []
    own = min(threads, cores) if device.type == "cpu" else 1  # the load this run itself adds
    if load_1m is not None and load_1m - own > OTHERS_LIMIT:
        reasons.append(
            f"load average {load_1m:.1f}, this run's {own} thread{'s' * (own != 1)} on {cores} cores"
        )
    busy_s = wall_s - idle_s
    if device.type == "cpu" and busy_s > 0 and cpu_s / busy_s < threads / 2:
        per = "busy s" if idle_s else "s"
        reasons.append(f"{cpu_s / busy_s:.2f} CPU-s per {per} for {threads} thread{'s' * (threads != 1)}")
    return PassLoad(wall_s, idle_s, cpu_s, load_1m, cores, threads, bool(reasons), "; ".join(reasons))


def busy_warning() -> str | None:
    """A warning line when the machine is already busier than its cores before a timed command starts."""
    load, cores = load_average(), os.cpu_count() or 1
    if load is None or load <= cores:
        return None
    return (
        f"warning: the 1-minute load average is {load:.1f} on {cores} cores: this machine is busy, timings "
        "will be contended (each report flags the contended passes)"
    )


def contention_note(loads: Sequence[PassLoad], unit: str = "passes") -> str:
    """One line for a report: how many of the `unit` were contended, and why."""
    flagged = [(i, x) for i, x in enumerate(loads) if x.contended]
    if not loads:
        return f"Contention: no {unit} finished."
    if not flagged:
        return (
            f"Contention: none of the {len(loads)} {unit} was contended (load average at most "
            f"{OTHERS_LIMIT} above this run's own threads, and at least half the threads' CPU time)."
        )
    listed = "; ".join(f"#{i}: {x.why}" for i, x in flagged[:6]) + ("; ..." if len(flagged) > 6 else "")
    return (
        f"Contention: **{len(flagged)} of {len(loads)} {unit} contended** (numbered from 0; {listed}): their "
        "timings are suspect."
    )
