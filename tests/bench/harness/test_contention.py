"""Contention per pass: the load average against the cores and the process's CPU time against wall time
flag a busy machine, a warning line before a run on one, and the report's line."""

from __future__ import annotations

import os
import time

import torch

from engine.bench.harness import contention
from engine.bench.harness.contention import busy_warning, contention_note, judge, start_pass

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_a_quiet_pass_is_not_flagged_and_a_busy_one_is_with_its_reason() -> None:
    quiet = judge(wall_s=10.0, cpu_s=19.0, load_1m=1.9, cores=2, threads=2, device=CPU)
    assert not quiet.contended and quiet.why == ""
    # the run's own two threads make a load of about 2 on 2 cores: not contention
    assert not judge(wall_s=10.0, cpu_s=19.0, load_1m=2.4, cores=2, threads=2, device=CPU).contended
    loaded = judge(wall_s=10.0, cpu_s=19.0, load_1m=5.5, cores=2, threads=2, device=CPU)
    assert loaded.contended and loaded.why == "load average 5.5, this run's 2 threads on 2 cores"
    assert judge(wall_s=10.0, cpu_s=19.0, load_1m=1.6, cores=2, threads=1, device=CPU).contended
    starved = judge(wall_s=10.0, cpu_s=6.0, load_1m=None, cores=2, threads=2, device=CPU)
    assert starved.contended and starved.why == "0.60 CPU-s per s for 2 threads"
    # time the pass chose to wait (an open-loop driver sleeping until its next arrival) is not starvation
    thinking = judge(wall_s=10.0, cpu_s=6.0, load_1m=None, cores=2, threads=2, device=CPU, idle_s=6.0)
    assert not thinking.contended and thinking.idle_s == 6.0 and thinking.wall_s == 10.0
    starved = judge(wall_s=10.0, cpu_s=1.0, load_1m=None, cores=2, threads=2, device=CPU, idle_s=6.0)
    assert starved.contended and starved.why == "0.25 CPU-s per busy s for 2 threads"
    # a GPU run waits on the device, so its CPU time says nothing: only the load average counts there
    assert not judge(wall_s=10.0, cpu_s=1.0, load_1m=1.0, cores=16, threads=16, device=CUDA).contended


def test_start_pass_measures_wall_and_cpu_time_of_this_process() -> None:
    stop = start_pass(CPU)
    spent = time.process_time() + 0.1
    while time.process_time() < spent:  # busy until this process has used 0.1 s of CPU
        pass
    time.sleep(0.1)  # idle: wall time only
    load = stop()
    assert 0.1 <= load.cpu_s < 0.5 and load.wall_s >= load.cpu_s + 0.09
    assert load.cores == os.cpu_count() and load.threads == torch.get_num_threads()


def test_a_warning_before_a_run_on_a_busy_machine(monkeypatch) -> None:
    cores = os.cpu_count() or 1
    monkeypatch.setattr(contention, "load_average", lambda: cores + 3.0)
    assert busy_warning() == (
        f"warning: the 1-minute load average is {cores + 3.0:.1f} on {cores} cores: this machine is busy, "
        "timings will be contended (each report flags the contended passes)"
    )
    monkeypatch.setattr(contention, "load_average", lambda: cores - 0.5)
    assert busy_warning() is None
    monkeypatch.setattr(contention, "load_average", lambda: None)  # a platform without load averages
    assert busy_warning() is None


def test_the_report_line_counts_the_contended_passes() -> None:
    quiet = judge(10.0, 19.0, 1.0, 2, 2, CPU)
    busy = judge(10.0, 19.0, 4.0, 2, 2, CPU)
    assert contention_note([]) == "Contention: no passes finished."
    assert contention_note([quiet, quiet]).startswith("Contention: none of the 2 passes was contended")
    line = contention_note([quiet, busy, quiet], "prompts")
    assert (
        "**1 of 3 prompts contended** (numbered from 0; #1: load average 4.0, this run's 2 threads on 2 cores)"
        in line
    )
