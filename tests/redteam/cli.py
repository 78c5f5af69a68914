"""What the command-line cases share: a command run in process as `python -m` runs it, whose refusal must be
one clear error line on stderr (after argparse's usage, for a flag argparse checks) with exit status 2, never
a traceback."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine.cli import run


def one_error_line(capsys: pytest.CaptureFixture[str], main: Callable[..., int], argv: list[str]) -> str:
    """The one line `main(argv)` refuses with (exit status 2)."""
    with pytest.raises(SystemExit) as exited:
        run(main, argv)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert exited.value.code == 2 and len(errors) == 1 and "Traceback" not in err, err[-2000:]
    return errors[0]
