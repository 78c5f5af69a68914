"""scripts/device_check.py without a GPU: the plan per device, refusals, step timeouts, and the summary of a
committed benchmark run."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import device_check  # noqa: E402
from bench_compare import load_run, metrics  # noqa: E402
from device_check_summary import summarize  # noqa: E402

JUNIT = '<testsuites><testsuite name="pytest" errors="1" failures="2" skipped="3" tests="40"/></testsuites>'


def alive(pid: int) -> bool:
    """A zombie (killed, not yet reaped by its new parent) counts as dead."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except ProcessLookupError:
        return False
    except OSError:  # no /proc: the signal reached a live process
        return True


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_gpu_dry_run_prints_every_step_within_eight_minutes(device: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "check"
    assert device_check.main([device, "--dry-run", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    dtype = device_check.PLANS[device].dtype
    assert (
        "tests/runtime/test_prefix_cache.py tests/kv/test_pool_and_window.py" in text
        and f"--device {device} --dtype {dtype}" in text
    )
    for model in ("qwen2.5-0.5b", "qwen2.5-7b"):
        assert f"--model synthetic:{model} --shapes device" in text and f"{out}/bench-{model}.json" in text
    assert "--scale large" in text and f"--out {out}/layout" in text
    planned = device_check.steps(device, device_check.PLANS[device], out)
    timed = [step for step in planned if step.name != "warm-up"]
    assert sum(step.timeout_s for step in timed) <= 8 * 60
    assert [s.name for s in planned if s not in timed] == (["warm-up"] if device == "cuda" else [])
    assert not out.exists(), "a dry run writes nothing"


def test_cpu_runs_the_same_steps_with_smaller_shapes(tmp_path: Path) -> None:
    cpu, cuda = (device_check.steps(d, device_check.PLANS[d], tmp_path) for d in ("cpu", "cuda"))
    assert [s.name for s in cpu] == ["tests", "kernels", "bench-qwen2.5-0.5b", "layout"]
    assert cpu[0].argv[3:11] == cuda[1].argv[3:11] == device_check.TESTS
    assert "--shapes" in cpu[2].argv and cpu[2].argv[cpu[2].argv.index("--shapes") + 1] == "smoke"
    assert cpu[1].argv[-4:-2] == ["--length", "256"] and cuda[2].argv[-4:-2] == ["--length", "2048"]
    # CUDA warms the kernels up first, then checks the library backend auto picks and the torch fallback
    assert [s.name for s in cuda][:4] == ["warm-up", "tests", "kernels", "kernels-torch"]
    assert "--warm-up" in cuda[0].argv and cuda[3].argv[cuda[3].argv.index("--attention") + 1] == "torch"


def test_an_absent_device_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    absent = [
        d
        for d, here in (("cuda", torch.cuda.is_available()), ("mps", torch.backends.mps.is_available()))
        if not here
    ]
    if not absent:
        pytest.skip("this machine has both CUDA and MPS")
    assert device_check.main([absent[0], "--out", str(tmp_path / "check")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not available" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "check").exists()


def test_an_earlier_check_is_never_overwritten(tmp_path: Path, capsys) -> None:
    (tmp_path / "summary.md").write_text("an earlier check")
    assert device_check.main(["cpu", "--out", str(tmp_path)]) == 2
    assert "already holds results" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]


def test_a_step_over_its_cap_is_stopped_with_what_it_started(tmp_path: Path) -> None:
    sleeper = [
        sys.executable,
        "-c",
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); print(p.pid, flush=True); p.wait()",
    ]
    result = device_check.run_step(device_check.Step("slow", sleeper, 3, ()), tmp_path)
    assert result["status"] == "timeout" and result["seconds"] < 30
    grandchild = int((tmp_path / "slow.log").read_text())
    for _ in range(50):  # killed with its group
        if not alive(grandchild):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the step's own child outlived the timeout")
    ok = device_check.run_step(
        device_check.Step("ok", [sys.executable, "-c", "print('hi')"], 30, ()), tmp_path
    )
    assert ok["status"] == "passed" and (tmp_path / "ok.log").read_text() == "hi\n"


def test_summary_reads_the_tests_and_a_benchmark_run(tmp_path: Path) -> None:
    baseline = SCRIPTS.parent / "results" / "bench" / "cpu" / "baseline.json"
    shutil.copy(baseline, tmp_path / "bench-qwen2.5-0.5b.json")
    (tmp_path / "tests.xml").write_text(JUNIT)
    results = [
        {"step": s, "status": "passed", "seconds": 1.0, "timeout_s": 9}
        for s in ("tests", "bench-qwen2.5-0.5b")
    ]
    summary = summarize(tmp_path, "cuda", "a GPU", "bfloat16", 2048, "abc1234+dirty", results)
    data, ratios = summary["data"], metrics(load_run(baseline))
    assert data["tests"] == {"tests": 40, "failures": 2, "errors": 1, "skipped": 3, "passed": 34}
    assert (data["commit"], data["dirty"]) == ("abc1234", True)
    bench = data["benchmarks"]["bench-qwen2.5-0.5b"]
    assert bench["decode"] == ratios["ours/transformers decode @2048"]
    assert bench["prefill"]["prefill 2048"] == ratios["ours/transformers prefill 2048"]
    decode_met = ratios["ours/transformers decode @2048"] <= 1 / 3
    assert bench["targets_met"] is (decode_met and max(bench["prefill"].values()) <= 1.1)
    row = next(
        line for line in summary["markdown"].splitlines() if line.startswith("| synthetic:qwen2.5-0.5b")
    )
    verdict = "met" if bench["targets_met"] else "NOT met"
    assert f"| {ratios['ours/transformers decode @2048']:.3f} |" in row and row.endswith(f"| {verdict} |")
    assert "warm-up" not in summary["markdown"]  # none ran
    warm = {"device": "cuda", "attention": "FlashInfer 0.4", "warm_up_s": 71.25, "graphs_s": 3.5}
    (tmp_path / "warm-up.json").write_text(json.dumps(warm))
    markdown = summarize(tmp_path, "cuda", "a GPU", "bfloat16", 2048, "abc1234", results)["markdown"]
    assert "warm-up (FlashInfer 0.4): 71.2 s, capturing the decode graphs 3.5 s." in markdown
