"""Options and fixtures of the benchmark suite (`python -m pytest benchmarks`; never part of `python -m pytest`).

--devices cpu,cuda   which devices (default: every available one: cpu, cuda, mps)
--model synthetic:…  the weights: a synthetic preset, so nothing is downloaded (default qwen2.5-0.5b); the
                     lengths its context cannot hold are left out (the run's header names them)
--long-model …       the long-context cases' model (default synthetic:qwen2.5-0.5b-128k: YaRN, 131,072 tokens)
--dtype …            default per device: float32 on CPU, bfloat16 on CUDA, float16 on MPS
--quick              small shapes and a short time budget: a smoke run in a few minutes (= --shapes quick)
--shapes NAME        full (default), quick, device (prefill 512 / 2k / 8k, S+V at 2k and 8k: GPU checks),
                     smoke (tiny: the CPU run of scripts/device_check.sh) or long (full, plus prefills of
                     8k / 16k / 32k, warm/cold at 32k and the analysis of 128k-token prompts)
--budget SECONDS     time per benchmark (rounds = budget / one call, at least 2)
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import torch

from benchmarks.harness import SHAPES, Pair, Shapes, Solo, available_devices
from benchmarks.steady_malloc import steady_malloc
from engine.errors import EngineError
from engine.loading.sources import resolve

os.environ.setdefault("HF_HUB_OFFLINE", "1")
LOAD_AT_START = os.getloadavg()
MALLOC = steady_malloc()  # before any tensor: every large block's pages kept (benchmarks/steady_malloc.py)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvtestbed benchmarks")
    group.addoption("--devices", default="auto", help="comma-separated cpu,cuda,mps (default: all available)")
    group.addoption(
        "--model", default="synthetic:qwen2.5-0.5b", help="model (default synthetic:qwen2.5-0.5b)"
    )
    group.addoption(
        "--long-model",
        default="synthetic:qwen2.5-0.5b-128k",
        help="the long-context cases' model (default synthetic:qwen2.5-0.5b-128k)",
    )
    group.addoption("--dtype", default=None, help="float32, bfloat16 or float16 (default: by device)")
    group.addoption("--quick", action="store_true", help="small shapes, short budget (= --shapes quick)")
    group.addoption(
        "--shapes", choices=list(SHAPES), default="full", help="full (default), quick, device or smoke"
    )
    group.addoption("--budget", type=float, default=None, help="seconds per benchmark")


def shapes_name(config: pytest.Config) -> str:
    return "quick" if config.getoption("quick") else config.getoption("shapes")


def shapes_of(config: pytest.Config) -> Shapes:
    """The run's shapes, fitted to `--model`'s context (`Shapes.within`)."""
    return fitted_shapes(config)[0]


def fitted_shapes(config: pytest.Config) -> tuple[Shapes, list[str]]:
    """The shapes named by the options, less the lengths `--model`'s context cannot hold, and those left out."""
    shapes = SHAPES[shapes_name(config)]
    budget = config.getoption("budget")
    if budget is not None:
        shapes = replace(shapes, budget_s=budget)
    model = config.getoption("model")
    try:
        return shapes.within(model_context(model))
    except (EngineError, ValueError) as e:
        raise pytest.UsageError(f"--model {model}: {e}") from None


@functools.cache
def model_context(model: str) -> int:
    """The context length a model serves, from its config (no weights read)."""
    return resolve(model).config.max_position_embeddings


def pytest_report_header(config: pytest.Config) -> str | None:
    _, left_out = fitted_shapes(config)
    if not left_out:
        return None
    context = model_context(config.getoption("model"))
    return f"left out, over {config.getoption('model')}'s {context:,}-token context: " + "; ".join(left_out)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parameters by name, from the options: every benchmark runs per device and per shape."""
    shapes, wanted = shapes_of(metafunc.config), metafunc.config.getoption("devices")
    devices = available_devices() if wanted == "auto" else wanted.split(",")
    params: dict[str, list[Any]] = {
        "device": devices,
        "impl": ["ours", "transformers"],
        "length": shapes.prefill_lengths,
        "cold": shapes.alternating_lengths,
        "context": list(shapes.contexts),
        "cached_new": shapes.cached_new,
        "block_size": list(shapes.block_sizes),
        "batch": list(shapes.batch),
        "step_batch": list(shapes.step_batch),
        "warm_peer": list(shapes.warm_peer),
        "long": list(shapes.long),
        "longest": list(shapes.long[-1:]),  # none outside --shapes long: the case is not collected
    }
    for name, values in params.items():
        if name in metafunc.fixturenames:
            ids = [f"{s}+{v}" for s, v in values] if name == "cached_new" else [str(v) for v in values]
            metafunc.parametrize(name, values, ids=ids)


@pytest.fixture(scope="session")
def shapes(pytestconfig: pytest.Config) -> Shapes:
    return shapes_of(pytestconfig)


@pytest.fixture(scope="session")
def pairs(pytestconfig: pytest.Config, shapes: Shapes) -> Callable[[str], Pair]:
    """pairs(device) -> our engine and transformers on the same weights, built once per device."""
    built: dict[str, Pair] = {}

    def get(device: str) -> Pair:
        if device not in built:
            built[device] = Pair(
                pytestconfig.getoption("model"), device, pytestconfig.getoption("dtype"), shapes
            )
        return built[device]

    return get


@pytest.fixture
def pair(pairs: Callable[[str], Pair], device: str) -> Pair:
    return pairs(device)


@pytest.fixture(scope="session")
def solos(pytestconfig: pytest.Config, shapes: Shapes) -> Callable[[str], Solo]:
    """solos(device) -> our engine of `--long-model` alone, with a pool for two of the longest prompts."""
    built: dict[str, Solo] = {}

    def get(device: str) -> Solo:
        if device not in built:
            options = pytestconfig.getoption
            cache_tokens = 2 * max(shapes.long) + 4096
            built[device] = Solo(options("long_model"), device, options("dtype"), cache_tokens)
        return built[device]

    return get


@pytest.fixture
def solo(solos: Callable[[str], Solo], device: str) -> Solo:
    return solos(device)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    import transformers

    machine_info.update(
        torch=torch.__version__,
        transformers=transformers.__version__,
        torch_threads=torch.get_num_threads(),
        quick=bool(config.getoption("quick")),
        shapes=shapes_name(config),
        shapes_left_out=fitted_shapes(config)[1],
        load_average_start=[round(x, 2) for x in LOAD_AT_START],
        load_average_end=[round(x, 2) for x in os.getloadavg()],
        malloc=MALLOC,
    )
    if torch.cuda.is_available():
        machine_info["cuda_device"] = torch.cuda.get_device_name()
