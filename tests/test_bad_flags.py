"""Issue 12's bad command-line numbers: every numeric flag of every command, out of its range, gives one
error line naming the flag and exit status 2. Run in-process: parsing fails before any model loads."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from engine.cli import run

# (arguments after `python -m engine.generate --model smollm2-135m --prompt hi`, the error line it gives)
GENERATE = [
    (("--max-new-tokens", "0"), r"--max-new-tokens: value must be at least 1, got 0"),
    (("--temperature", "-1"), r"--temperature: value must be at least 0\.0, got -1\.0"),
    (("--temperature", "nan"), r"--temperature: value must be a finite number, got nan"),
    (("--top-p", "0"), r"--top-p: value must be greater than 0, got 0\.0"),
    (("--top-p", "1.5"), r"--top-p: value must be at most 1\.0, got 1\.5"),
    (("--seed", "abc"), r"--seed: not an integer: 'abc'"),
    (
        ("--seed", str(2**70)),
        r"--seed: value must be at most 18446744073709551615, got 1180591620717411303424",
    ),
    (
        ("--cache-tokens", "64", "--cache-gb", "1"),
        r"argument --cache-gb: not allowed with argument --cache-tokens",
    ),
    (("--block-size", "0"), r"--block-size: value must be at least 1, got 0"),
    (("--block-size", "-16"), r"--block-size: value must be at least 1, got -16"),
    (("--cache-tokens", "0"), r"--cache-tokens: value must be at least 1, got 0"),
    (("--cache-gb", "0"), r"--cache-gb: value must be greater than 0, got 0\.0"),
    (("--cache-gb", "1e6"), r"^error: a KV cache of [\d,]+ tokens needs 1,000,000\.00 GiB but only"),
]
# (arguments after `python -m engine.bench`, the error line)
BENCH = [
    (("layout", "--turns", "0"), r"--turns: value must be at least 1, got 0"),
    (("layout", "--repeats", "0"), r"--repeats: value must be at least 1, got 0"),
    (("layout", "--seed", "-1"), r"--seed: value must be at least 0, got -1"),
    (("layout", "--seed", str(2**64)), r"--seed: value must be at most 18446744073709551615"),
    (("replay", "t.json", "--repeats", "0"), r"--repeats: value must be at least 1, got 0"),
    (("compaction", "--turns", "0"), r"--turns: value must be at least 1, got 0"),
    (("compaction", "--budget", "-5"), r"--budget: value must be at least 1, got -5"),
    (("compaction", "--result-tokens", "0"), r"--result-tokens: value must be at least 1, got 0"),
    (("statusbar", "--steps", "0"), r"--steps: value must be at least 1, got 0"),
    (("statusbar", "--status-tokens", "-1"), r"--status-tokens: value must be at least 1, got -1"),
    (("statusbar", "--between-tokens", "0"), r"--between-tokens: value must be at least 1, got 0"),
    (("statusbar", "--sweep-steps", "4", "0"), r"--sweep-steps: value must be at least 1, got 0"),
    (("sink", "--min-row", "-1"), r"--min-row: value must be at least 0, got -1"),
    (("sink", "--first-k", "0"), r"--first-k: value must be at least 1, got 0"),
    (("sink", "--epsilon", "2"), r"--epsilon: value must be at most 1\.0, got 2\.0"),
    (("status-attention", "--max-new-tokens", "0"), r"--max-new-tokens: value must be at least 1, got 0"),
    (("needle", "--lengths", "1000", "10"), r"--lengths: value must be at least 64, got 10"),
    (("needle", "--positions", "bottom"), r"--positions: invalid choice: 'bottom'"),
    (("needle", "--facts", "0"), r"--facts: value must be at least 1, got 0"),
]
# (arguments after `python -m engine.viz heatmap --model smollm2-135m --prompt hi`, the error line)
HEATMAP = [
    (("--layer", "-1"), r"--layer: value must be at least 0, got -1"),
    (("--head", "-2"), r"--head: value must be at least 0, got -2"),
    (("--max-new-tokens", "-1"), r"--max-new-tokens: value must be at least 0, got -1"),
]


def cases() -> list:
    from engine.bench.__main__ import main as bench
    from engine.generate import main as generate
    from engine.viz.__main__ import main as viz

    model = ["--model", "smollm2-135m", "--prompt", "hi"]
    commands: list[tuple[str, Callable[[list[str] | None], int], list[str], list]] = [
        ("generate", generate, model, GENERATE),
        ("bench", bench, [], BENCH),
        ("heatmap", viz, ["heatmap", *model], HEATMAP),
    ]
    return [
        pytest.param(main, [*fixed, *argv], message, id=f"{name} {' '.join(argv)}")
        for name, main, fixed, table in commands
        for argv, message in table
    ]


@pytest.mark.parametrize(("main", "argv", "message"), cases())
def test_bad_flags_give_one_error_line_and_exit_2(capsys, main, argv, message) -> None:
    with pytest.raises(SystemExit) as exited:
        run(main, argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exited.value.code == 2 and len(errors) == 1, errors
    assert re.search(message, errors[0]), errors[0]
