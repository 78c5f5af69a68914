"""Workload text sized in tokens of the model's own tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def lines_until(
    tokenizer: PreTrainedTokenizerBase,
    target: int,
    make_line: Callable[[int], str],
    text: Callable[[list[str]], str] = "\n".join,
) -> list[str]:
    """Lines make_line(0), make_line(1), ... appended until `text(lines)` (default: the lines joined by
    newlines) reaches `target` tokens; no lines when it already does."""
    lines: list[str] = []
    while len(tokenizer(text(lines), add_special_tokens=False).input_ids) < target:
        lines.append(make_line(len(lines)))
    return lines
