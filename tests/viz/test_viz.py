"""Heatmaps: transforms and masking, the three views written as PNGs, and the CLI's one-line errors."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

import pytest
import torch

from engine.errors import AttentionTooLargeError, OutputError, PromptError
from engine.viz import __main__ as cli
from engine.viz import command, flags
from engine.viz.heatmap import TRANSFORMS, drawable, head_view, transformed

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky blue?"}]


@pytest.fixture(scope="module")
def maps(smollm2):
    return smollm2.attention(CHAT, layers=[2, 20], rows=range(-12, 0))


@pytest.fixture
def viz(smollm2, monkeypatch):
    """Run the CLI in-process on the session's already loaded model."""
    monkeypatch.setattr(command, "load", lambda *args, **kwargs: smollm2)
    return lambda *argv: cli.main(["heatmap", "--model", "smollm2-135m", *map(str, argv)])


def test_upper_triangle_is_masked_not_zero(maps) -> None:
    data = transformed(maps, maps.probs, "none")
    for i, row in enumerate(maps.rows):
        assert data[..., i, row + 1 :].isnan().all() and not data[..., i, : row + 1].isnan().any()


def test_transforms(maps) -> None:
    p = maps.probs
    assert torch.allclose(transformed(maps, p, "sqrt").nan_to_num() ** 2, p, atol=1e-6)
    log = transformed(maps, p, "log").nan_to_num()
    assert log.max() <= math.log10(1001) + 1e-6 and torch.allclose(10**log - 1, 1000 * p, atol=1e-3)
    rest = transformed(maps, p, "exclude-sink")
    assert rest[..., 0].isnan().all()
    assert torch.allclose(rest.nan_to_num().sum(-1), torch.ones(p.shape[:-1]), atol=1e-5)
    assert set(TRANSFORMS) == {"none", "log", "sqrt", "exclude-sink"}


def test_head_views(maps) -> None:
    assert head_view(maps, "all")[0].shape == maps.probs.shape
    mean, names = head_view(maps, "mean")
    assert mean.shape[1] == 1 and names == ["mean of 9 heads"]
    assert torch.allclose(mean.sum(-1), torch.ones(mean.shape[:-1]), atol=1e-5)
    assert torch.equal(head_view(maps, "max")[0][:, 0], maps.probs.amax(1))


@pytest.mark.parametrize(
    "argv",
    [
        ["--layer", "29", "--head", "2", "--transform", "log"],  # one large panel
        [
            "--layer",
            "all",
            "--head",
            "mean",
            "--rows",
            "last:8",
            "--transform",
            "sqrt",
        ],  # one panel per layer
        [
            "--layer",
            "0",
            "--head",
            "all",
            "--transform",
            "exclude-sink",
            "--max-new-tokens",
            "3",
        ],  # heads grid
    ],
)
def test_views_are_written(viz, tmp_path, argv: list[str]) -> None:
    out = tmp_path / "map.png"
    assert viz("--prompt", "Why is the sky blue?", *argv, "--out", out) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_messages_file_with_tools(viz, tmp_path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps({"messages": CHAT, "tools": [{"type": "function", "function": {"name": "f"}}]})
    )
    assert viz("--messages", path, "--layer", "3", "--rows", "last:4", "--out", tmp_path / "m.png") == 0


def test_labels_without_a_glyph_are_escaped() -> None:
    assert drawable("你好 😀 ü ⟂") == "\\u4f60\\u597d 😀 ü \\u27c2"  # DejaVu Sans has no CJK, nor ⟂


def test_non_latin_prompts_draw_without_missing_glyphs(viz, tmp_path, recwarn) -> None:
    assert viz("--prompt", "你好，世界！中文 😀 Grüße", "--layer", "0", "--out", tmp_path / "cjk.png") == 0
    assert not [w for w in recwarn if "Glyph" in str(w.message)]


def test_out_folder_default_name_and_overwrite(viz, tmp_path, monkeypatch, capsys) -> None:
    argv = ("--prompt", "hi", "--layer", "0")
    assert viz(*argv, "--out", tmp_path) == 0  # a folder: the default file name inside it
    assert capsys.readouterr().out == f"wrote {tmp_path / 'attention.png'}\n"
    with pytest.raises(OutputError, match="attention.png exists: pass --overwrite"):
        viz(*argv, "--out", tmp_path)
    assert viz(*argv, "--out", tmp_path, "--overwrite") == 0
    with pytest.raises(OutputError, match="must be a folder or a .png file name"):
        viz(*argv, "--out", tmp_path / "map.jpeg")
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    assert viz(*argv) == 0  # no --out: a new run folder under ./results
    [written] = (tmp_path / "results").glob("heatmap-smollm2-135m-cpu-*/attention.png")
    assert capsys.readouterr().out == f"wrote {written.relative_to(tmp_path)}\n"


@pytest.mark.parametrize(
    "argv, error, message",
    [
        (["--prompt", "hi", "--layer", "30"], PromptError, "layer 30 is out of range"),
        (["--prompt", "hi", "--layer", "0", "--head", "9"], PromptError, "head 9 is out of range"),
        (["--messages", "/no/such.json"], PromptError, "does not exist"),
        (["--prompt", "hi " * 1100, "--layer", "all", "--head", "all"], AttentionTooLargeError, "GiB"),
    ],
)
def test_bad_requests_raise_typed_errors(viz, argv: list[str], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        viz(*argv)


@pytest.mark.parametrize(
    "spec, text",
    [
        (flags.rows_spec, "first:3"),
        (flags.rows_spec, "last:0"),
        (flags.head_spec, "median"),
        (flags.head_spec, "-1"),
        (flags.layer_spec, "x"),
        (flags.layer_spec, "-1"),  # refused: no negative indexing on the command line
    ],
)
def test_bad_specs_are_argument_errors(spec, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        spec(text)


def test_the_default_view_is_one_late_layer_on_a_log_scale(viz, tmp_path, monkeypatch) -> None:
    drawn = []
    monkeypatch.setattr(
        command, "draw", lambda maps, view, transform, out, title: drawn.append((maps, transform))
    )
    assert viz("--prompt", "Why is the sky blue?", "--out", tmp_path / "map.png") == 0
    ((maps, transform),) = drawn
    assert maps.layers == [24] and transform == "log"  # SmolLM2: 30 layers


def test_specs() -> None:
    assert (
        flags.rows_spec("last:16"),
        flags.rows_spec("all"),
        flags.layer_spec("29"),
        flags.layer_spec("all"),
    ) == (
        16,
        None,
        29,
        None,
    )
    assert flags.layer_spec("late") == "late" and flags.late_layer(30) == 24
    assert (flags.head_spec("3"), flags.head_spec("max")) == (3, "max")


@pytest.mark.parametrize("argv", [["--rows", "first:3", "--prompt", "hi"], ["--messages", "/no/such.json"]])
def test_cli_errors_are_one_line_with_exit_2(argv: list[str]) -> None:
    args = [sys.executable, "-m", "engine.viz", "heatmap", "--model", "smollm2-135m", *argv]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "error:" in line]) == 1, proc.stderr
