"""`python -m engine.bench kv-edit` end to end on a tiny model: files, the exact path's perfect scores, and
token accounting that tells exact from approximate reuse."""

from __future__ import annotations

import json

from engine.bench.__main__ import main
from engine.bench.commands.kv_edit import VARIANTS


def test_kv_edit_writes_results_and_labels_every_variant(tiny_dir, tmp_path) -> None:
    out = tmp_path / "run"
    model = str(tiny_dir("qwen2", tokenizer=True))
    argv = [
        "kv-edit",
        "--model",
        model,
        "--pairs",
        "3",
        "--turns",
        "2",
        "--policies",
        "2",
        "--answer-tokens",
        "2",
        "--cot-tokens",
        "3",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    for name in (
        "kv_edit.json",
        "pairs.csv",
        "summary.csv",
        "layout.csv",
        "report.md",
        "decision_agreement.png",
        "layer_cosine.png",
    ):
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "kv_edit.json").read_text())
    rows = {(r["pair"], r["variant"]): r for r in data["pairs"]}
    assert len(data["pairs"]) == 2 * 3 * 6 and {a["pairs"] for a in data["agreement"]} == {3}
    for (_, variant), r in rows.items():
        assert r["prompt_tokens"] == r["cached_tokens"] + r["approximate_tokens"] + r["computed_tokens"]
        assert (r["forwards"], r["forward_rows"]) == (1, [r["computed_tokens"]]), variant  # one forward
        if variant == "exact":
            assert (r["centred_cosine"], r["kl"], r["agree"], r["computed_tokens"]) == (
                1.0,
                0.0,
                True,
                r["prompt_tokens"],
            )
        if variant in ("edit", "edit+W"):
            assert r["approximate_tokens"] > 0 and r["cached_tokens"] > 0
        if variant in ("exact-prefix", "erratum", "stale"):  # exact reuse only (stale: of the old prompt)
            assert r["approximate_tokens"] == 0 and r["cached_tokens"] > 0
    assert {rows[(1, v)]["position"] for v in VARIANTS} == set(range(6)) and rows[(1, "exact")][
        "position"
    ] == 5
    assert len(data["loads"]) == 6 and "Contention:" in (out / "report.md").read_text()
    edit, wider = rows[(0, "edit")], rows[(0, "edit+W")]
    assert wider["computed_tokens"] == edit["computed_tokens"] + 16
    layout = {r["variant"]: r for r in data["layout"]}
    assert all(r["forwards"] == 1 for r in data["layout"] + data["summary"] + data["layout_summary"])
    for name in ("pairs.csv", "summary.csv", "layout.csv"):
        assert "forwards" in (out / name).read_text().splitlines()[0].split(","), name
    assert layout["stable-first"]["cached_tokens"] > layout["timestamp-first"]["cached_tokens"]
    assert layout["timestamp-first+edit"]["approximate_tokens"] > 0
    assert layout["timestamp-first+edit"]["computed_tokens"] < layout["timestamp-first"]["computed_tokens"]


def test_kv_edit_ctrl_c_keeps_the_finished_runs_marked_partial(
    tiny_dir, tmp_path, monkeypatch, capsys
) -> None:
    import engine.bench.commands.kv_edit as command
    import engine.bench.harness.approx_runs as runs

    real, calls = runs.run_plan, []

    def run_plan(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3 * len(command.VARIANTS) + 1:  # the 4th (pair, step-by-step) run is cut short
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runs, "run_plan", run_plan)
    out = tmp_path / "run"
    model = str(tiny_dir("qwen2", tokenizer=True))
    argv = ["kv-edit", "--model", model, "--pairs", "2", "--policies", "1", "--answer-tokens", "1"]
    assert main([*argv, "--cot-tokens", "1", "--out", str(out)]) == 130
    assert (
        capsys.readouterr().err.splitlines()[-1]
        == f"interrupted: kept 3 finished pair runs in {out} (partial)"
    )
    data = json.loads((out / "kv_edit.json").read_text())
    assert data["environment"]["partial"] is True and data["layout"] == []
    assert [(r["pair"], r["cot"]) for r in data["pairs"][:: len(command.VARIANTS)]] == [
        (0, False),
        (0, True),
        (1, False),
    ]
    assert {(a["cot"], a["pairs"]) for a in data["agreement"]} == {(False, 2), (True, 1)}
    assert "**Partial run**" in (out / "report.md").read_text()
