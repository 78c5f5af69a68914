"""scripts/bench.sh: the suite once in float32, and again in bfloat16 where the CPU computes it natively, each run
compared with the baseline of its own dtype. Run against a stand-in interpreter that records its calls (the
suite itself takes half an hour)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml  # transformers' dependency

REPO = Path(__file__).resolve().parents[2]
FAKE = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/calls.log"
case "$*" in
  *cpu_bf16_flags*) echo "$BF16_FLAGS" ;;
  "-m pytest"*) exit "${PYTEST_STATUS:-0}" ;;
esac
"""


def bench_sh(
    tmp_path: Path,
    flags: str,
    name: str = "run",
    strict: str = "0",
    baseline: bool = True,
    status: int = 0,
    dtypes: str | None = None,
    pytest_status: int = 0,
) -> list[str]:
    (tmp_path / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "bench.sh", tmp_path / "scripts" / "bench.sh")
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    (tmp_path / "results" / "bench" / "cpu").mkdir(parents=True)
    if baseline:
        (tmp_path / "results" / "bench" / "cpu" / "baseline.json").write_text("{}")
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHON": str(fake),
        "DEVICE": "cpu",
        "BF16_FLAGS": flags,
        "STRICT": strict,
        "PYTEST_STATUS": str(pytest_status),
    }
    if dtypes is not None:
        env["DTYPES"] = dtypes
    proc = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "bench.sh"), name, "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == status, proc.stderr
    return [c for c in (tmp_path / "calls.log").read_text().splitlines() if "cpu_bf16_flags" not in c]


def test_float32_only_without_bf16_instructions(tmp_path) -> None:
    calls = bench_sh(tmp_path, "")
    suite = [c for c in calls if c.startswith("-m pytest")]
    assert len(suite) == 1 and "--dtype" not in suite[0] and "--quick" in suite[0]
    assert any("bench_compare.py" in c and "run.json" in c and "baseline.json" in c for c in calls)


def test_bfloat16_too_where_the_cpu_has_it(tmp_path) -> None:
    calls = bench_sh(tmp_path, "AMX-BF16")
    suite = [c for c in calls if c.startswith("-m pytest")]
    assert len(suite) == 2 and "--dtype" not in suite[0]
    assert "--dtype bfloat16" in suite[1] and "run-bfloat16.json" in suite[1] and "--quick" in suite[1]
    # no bfloat16 baseline yet: reported, and nothing compared against the float32 one
    assert not any("bench_compare.py" in c and "run-bfloat16.json" in c for c in calls)


def test_a_baseline_run_writes_both_baselines(tmp_path) -> None:
    calls = bench_sh(tmp_path, "AVX512-BF16", name="baseline")
    suite = [c for c in calls if c.startswith("-m pytest")]
    assert [s.split("--benchmark-json ")[1].split()[0] for s in suite] == [
        "results/bench/cpu/baseline.json",
        "results/bench/cpu/baseline-bfloat16.json",
    ]
    assert not any("bench_compare.py" in c for c in calls)


def test_dtypes_picks_one_baseline_at_a_time(tmp_path) -> None:
    """DTYPES=default on a bfloat16 CPU runs float32 alone; DTYPES=bfloat16 the other half; anything else is
    refused before the suite runs."""
    calls = bench_sh(tmp_path / "f32", "AMX-BF16", name="baseline", dtypes="default")
    suite = [c for c in calls if c.startswith("-m pytest")]
    assert len(suite) == 1 and "--dtype" not in suite[0] and "baseline.json" in suite[0]
    calls = bench_sh(tmp_path / "bf16", "AMX-BF16", name="baseline", dtypes="bfloat16")
    suite = [c for c in calls if c.startswith("-m pytest")]
    assert len(suite) == 1 and "--dtype bfloat16" in suite[0] and "baseline-bfloat16.json" in suite[0]
    (tmp_path / "bad" / "calls.log").parent.mkdir()
    (tmp_path / "bad" / "calls.log").write_text("")
    calls = bench_sh(tmp_path / "bad", "AMX-BF16", dtypes="float16", status=2)
    assert not [c for c in calls if c.startswith("-m pytest")]


def test_strict_fails_without_a_baseline_and_compares_strict(tmp_path) -> None:
    """A gate with nothing to compare against fails (exit 3) where a developer's run only says so; with a
    baseline, the comparison itself runs strict."""
    bench_sh(tmp_path / "developer", "", baseline=False)
    bench_sh(tmp_path / "gate", "", strict="1", baseline=False, status=3)
    calls = bench_sh(tmp_path / "strict", "", strict="1")
    assert any("bench_compare.py" in c and c.endswith("baseline.json --strict") for c in calls)


def test_a_case_failing_its_own_assertion_keeps_every_timing(tmp_path) -> None:
    """pytest's exit 1 (a case's own target failed, as test_neighbour's on 2 cores): both dtypes still run,
    are reported and compared, and the script ends with 4; a run that stops otherwise (2: interrupted, a
    usage error) ends the script with pytest's status, nothing reported."""
    calls = bench_sh(tmp_path / "target", "AMX-BF16", pytest_status=1, status=4)
    assert len([c for c in calls if c.startswith("-m pytest")]) == 2
    assert len([c for c in calls if "bench_report.py" in c]) == 2
    assert any("bench_compare.py" in c and "run.json" in c for c in calls)
    calls = bench_sh(tmp_path / "stopped", "AMX-BF16", pytest_status=2, status=2)
    assert len([c for c in calls if c.startswith("-m pytest")]) == 1
    assert not any("bench_report.py" in c for c in calls)


def test_the_workflows_gate_on_the_same_comparison() -> None:
    """CI's benchmark job and the GPU workflow run scripts/bench.sh strict, whose exit status is
    bench_compare's."""
    root = Path(__file__).resolve().parents[2]
    ci = yaml.safe_load((root / ".github/workflows/ci.yml").read_text())
    gpu = yaml.safe_load((root / ".github/workflows/gpu-bench.yml").read_text())
    for job, device in ((ci["jobs"]["benchmarks"], "cpu"), (gpu["jobs"]["bench"], "cuda")):
        steps = [s for s in job["steps"] if "scripts/bench.sh run" in s.get("run", "")]
        assert len(steps) == 1 and steps[0]["env"]["DEVICE"] == device and "||" not in steps[0]["run"]
        assert steps[0]["env"]["STRICT"] == "1"
    script = (root / "scripts/bench.sh").read_text()
    assert (
        'scripts/bench_compare.py "$OUT/$run.json" "$OUT/$base.json" ${strict[@]+"${strict[@]}"} ||' in script
    )
    assert script.rstrip().endswith("exit $status")
