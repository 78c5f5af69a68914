"""bench tokens: characters per token per kind and tokenizer, the estimate's overshoot, user files, and
tokenizers that are missing (skipped by default, refused when named)."""

from __future__ import annotations

import json

import pytest

from engine.bench.__main__ import main
from engine.bench.commands import tokens
from engine.errors import InvalidArgumentError, ModelNotFoundError, PromptError
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir


def test_counts_per_kind_with_a_user_file(tmp_path) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text("SELECT order_id, SUM(tubs) FROM deliveries GROUP BY order_id;\n" * 20)
    out = tmp_path / "run"
    assert main(["tokens", "--tokenizers", "qwen2.5", "--files", f"sql={sql}", "--out", str(out)]) == 0
    rows = {r["kind"]: r for r in json.loads((out / "tokens.json").read_text())["rows"]}
    assert list(rows) == ["prose", "python", "json", "numeric log", "sql"]
    qwen = load_tokenizer(qwen_tokenizer_dir())
    text = sql.read_text()
    n = len(qwen(text, add_special_tokens=False).input_ids)
    assert rows["sql"]["tokens"] == n and rows["sql"]["chars_per_token"] == pytest.approx(len(text) / n)
    assert rows["sql"]["overshoot"] == pytest.approx(n / (len(text) / 4) - 1)
    # the shipped samples keep the chapter's order: digits one token each make a log the densest
    cpt = [rows[k]["chars_per_token"] for k in ("prose", "python", "json", "numeric log")]
    assert cpt == sorted(cpt, reverse=True) and rows["numeric log"]["overshoot"] > 1
    assert (out / "chars_per_token.png").stat().st_size > 0 and "chapter" in (out / "report.md").read_text()


def test_missing_tokenizers_are_skipped_by_default_and_refused_by_name(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(tokens, "DEFAULT_TOKENIZERS", ["qwen2.5", str(tmp_path / "no-model")])
    assert main(["tokens", "--out", str(tmp_path / "run")]) == 0
    env = json.loads((tmp_path / "run" / "tokens.json").read_text())["environment"]
    assert env["tokenizers"] == ["qwen2.5"] and "no-model" in env["skipped"][0]
    assert "[skipped" in capsys.readouterr().err
    with pytest.raises(ModelNotFoundError):
        main(["tokens", "--tokenizers", str(tmp_path / "no-model"), "--out", str(tmp_path / "run2")])


def test_bad_files_are_one_line(tmp_path) -> None:
    with pytest.raises(InvalidArgumentError, match="give KIND=PATH"):
        tokens.texts(["sql"])
    with pytest.raises(PromptError, match="does not exist"):
        tokens.texts([f"sql={tmp_path / 'missing.sql'}"])
