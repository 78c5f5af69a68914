"""Issue 12's bad command-line numbers: every numeric flag of every command, out of its range, gives one
error line naming the flag and exit status 2. Run in-process: parsing fails before any model loads."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from engine.cli import run


def bench(*argv: str) -> tuple[Callable[[list[str] | None], int], list[str]]:
    from engine.bench.__main__ import main

    return main, list(argv)


def generate(*argv: str) -> tuple[Callable[[list[str] | None], int], list[str]]:
    from engine.generate_cli import main

    return main, ["--model", "smollm2-135m", "--prompt", "hi", *argv]


def heatmap(*argv: str) -> tuple[Callable[[list[str] | None], int], list[str]]:
    from engine.viz.__main__ import main

    return main, ["heatmap", "--model", "smollm2-135m", "--prompt", "hi", *argv]


# Every numeric flag of every command, given a value out of its range; the message each gives.
CLI_CASES = [
    pytest.param(
        *generate("--max-new-tokens", "0"),
        r"--max-new-tokens: value must be at least 1, got 0",
        id="gen tokens 0",
    ),
    pytest.param(
        *generate("--temperature", "-1"),
        r"--temperature: value must be at least 0\.0, got -1\.0",
        id="temp -1",
    ),
    pytest.param(
        *generate("--temperature", "nan"),
        r"--temperature: value must be a finite number, got nan",
        id="temp nan",
    ),
    pytest.param(*generate("--top-p", "0"), r"--top-p: value must be greater than 0, got 0\.0", id="top-p 0"),
    pytest.param(
        *generate("--top-p", "1.5"), r"--top-p: value must be at most 1\.0, got 1\.5", id="top-p 1.5"
    ),
    pytest.param(*generate("--seed", "abc"), r"--seed: not an integer: 'abc'", id="seed abc"),
    pytest.param(
        *generate("--block-size", "0"), r"--block-size: value must be at least 1, got 0", id="block-size 0"
    ),
    pytest.param(
        *generate("--block-size", "-16"), r"--block-size: value must be at least 1, got -16", id="bs -16"
    ),
    pytest.param(
        *generate("--cache-tokens", "0"), r"--cache-tokens: value must be at least 1, got 0", id="tokens 0"
    ),
    pytest.param(
        *generate("--cache-gb", "0"), r"--cache-gb: value must be greater than 0, got 0\.0", id="gb 0"
    ),
    pytest.param(
        *generate("--cache-gb", "1e6"),
        r"^error: a KV cache of [\d,]+ tokens needs 1,000,000\.00 GiB",
        id="gb 1e6",
    ),
    pytest.param(
        *bench("layout", "--turns", "0"), r"--turns: value must be at least 1, got 0", id="layout turns 0"
    ),
    pytest.param(
        *bench("layout", "--repeats", "0"), r"--repeats: value must be at least 1, got 0", id="repeats 0"
    ),
    pytest.param(*bench("layout", "--seed", "-1"), r"--seed: value must be at least 0, got -1", id="seed -1"),
    pytest.param(
        *bench("replay", "t.json", "--repeats", "0"), r"--repeats: value must be at least 1", id="replay 0"
    ),
    pytest.param(
        *bench("compaction", "--turns", "0"), r"--turns: value must be at least 1, got 0", id="compaction 0"
    ),
    pytest.param(
        *bench("compaction", "--budget", "-5"), r"--budget: value must be at least 1, got -5", id="budget -5"
    ),
    pytest.param(
        *bench("compaction", "--result-tokens", "0"), r"--result-tokens: value must be at least 1", id="rt 0"
    ),
    pytest.param(
        *bench("statusbar", "--steps", "0"), r"--steps: value must be at least 1, got 0", id="steps 0"
    ),
    pytest.param(
        *bench("statusbar", "--status-tokens", "-1"), r"--status-tokens: value must be at least 1", id="S -1"
    ),
    pytest.param(
        *bench("statusbar", "--between-tokens", "0"), r"--between-tokens: value must be at least 1", id="R 0"
    ),
    pytest.param(
        *bench("statusbar", "--sweep-steps", "4", "0"), r"--sweep-steps: value must be at least 1", id="sweep"
    ),
    pytest.param(
        *bench("sink", "--min-row", "-1"), r"--min-row: value must be at least 0, got -1", id="min-row -1"
    ),
    pytest.param(
        *bench("sink", "--first-k", "0"), r"--first-k: value must be at least 1, got 0", id="first-k 0"
    ),
    pytest.param(
        *bench("sink", "--epsilon", "2"), r"--epsilon: value must be at most 1\.0, got 2\.0", id="epsilon 2"
    ),
    pytest.param(
        *bench("status-attention", "--max-new-tokens", "0"),
        r"--max-new-tokens: value must be at least 1",
        id="sa 0",
    ),
    pytest.param(*heatmap("--layer", "-1"), r"--layer: value must be at least 0, got -1", id="layer -1"),
    pytest.param(*heatmap("--head", "-2"), r"--head: value must be at least 0, got -2", id="head -2"),
    pytest.param(
        *heatmap("--max-new-tokens", "-1"), r"--max-new-tokens: value must be at least 0", id="heatmap -1"
    ),
]


@pytest.mark.parametrize(("main", "argv", "message"), CLI_CASES)
def test_bad_flags_give_one_error_line_and_exit_2(capsys, main, argv, message) -> None:
    with pytest.raises(SystemExit) as exited:
        run(main, argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exited.value.code == 2 and len(errors) == 1, errors
    assert re.search(message, errors[0]), errors[0]
