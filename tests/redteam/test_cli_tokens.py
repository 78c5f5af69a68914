"""`bench tokens --files`: a FIFO and a device refused before anything is read (a FIFO blocked forever,
/dev/zero was read until the kernel killed the process), and a kind given twice refused (one file was
dropped)."""

from __future__ import annotations

import os
import threading

import pytest

from engine.bench.__main__ import main
from tests.redteam.cli import one_error_line


def test_a_fifo_is_refused_not_waited_on(tmp_path, capsys) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = threading.Event()
    # a reader blocked on the FIFO is released after 30 s by a writer that closes at once (the test then
    # fails on the "is empty" line instead of hanging)
    threading.Thread(
        target=lambda: done.wait(30) or os.close(os.open(fifo, os.O_WRONLY)), daemon=True
    ).start()
    try:
        line = one_error_line(
            capsys, main, ["tokens", "--files", f"x={fifo}", "--out", str(tmp_path / "run")]
        )
    finally:
        done.set()
    assert f"{fifo} is a FIFO: give a regular file" in line and "--files x=" in line


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused_not_read(tmp_path, capsys, device) -> None:
    line = one_error_line(capsys, main, ["tokens", "--files", f"x={device}", "--out", str(tmp_path / "run")])
    assert f"{device} is a character device: give a regular file" in line


def test_a_folder_is_refused(tmp_path, capsys) -> None:
    line = one_error_line(
        capsys, main, ["tokens", "--files", f"x={tmp_path}", "--out", str(tmp_path / "run")]
    )
    assert "is a folder" in line


@pytest.mark.parametrize("second", ["x", " x", "x "])
def test_a_kind_given_twice_is_refused(tmp_path, capsys, second) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("alpha " * 10)
    b.write_text("beta " * 10)
    argv = ["tokens", "--files", f"x={a}", f"{second}={b}", "--out", str(tmp_path / "run")]
    line = one_error_line(capsys, main, argv)
    assert "kind 'x' given twice" in line and str(a) in line and str(b) in line
    assert not (tmp_path / "run").exists()
