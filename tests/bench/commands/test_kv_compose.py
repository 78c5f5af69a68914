"""`python -m engine.bench kv-compose` end to end on a tiny model: files, and splices that compute only the
fresh tokens while recompute computes everything."""

from __future__ import annotations

import json

from engine.bench.__main__ import main


def test_kv_compose_writes_results_and_splices_blocks(tiny_dir, tmp_path) -> None:
    out = tmp_path / "run"
    model = str(tiny_dir("qwen2", tokenizer=True))
    argv = [
        "kv-compose",
        "--model",
        model,
        "--prompts",
        "4",
        "--repeat",
        "1",
        "--answer-tokens",
        "2",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    assert "Contention:" in (out / "report.md").read_text()
    for name in (
        "kv_compose.json",
        "prompts.csv",
        "summary.csv",
        "report.md",
        "ttft_vs_length.png",
        "layer_cosine.png",
    ):
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "kv_compose.json").read_text())
    rows = {(r["prompt"], r["variant"]): r for r in data["prompts"]}
    assert all((r["forwards"], r["forward_rows"]) == (1, [r["computed_tokens"]]) for r in data["prompts"])
    assert all(s["forwards"] == 1 for s in data["summary"])
    assert "forwards" in (out / "prompts.csv").read_text().splitlines()[0].split(",")
    for p in range(4):
        exact, splice, repaired = rows[(p, "recompute")], rows[(p, "splice")], rows[(p, "splice+15%")]
        assert (exact["centred_cosine"], exact["kl"], exact["topk_agree"]) == (1.0, 0.0, 1.0)
        assert exact["computed_tokens"] == exact["prompt_tokens"]
        assert sorted(
            rows[(p, v)]["position"] for v in ("recompute", "exact-prefix", "splice", "splice+15%")
        ) == [
            0,
            1,
            2,
            3,
        ]
        assert splice["prompt_tokens"] == exact["prompt_tokens"]
        assert splice["computed_tokens"] <= repaired["computed_tokens"] < exact["computed_tokens"]
        assert (
            splice["prompt_tokens"]
            == splice["cached_tokens"] + splice["approximate_tokens"] + splice["computed_tokens"]
        )
        if splice["blocks"] > 1:  # a second block never sits where it was computed: relocated, and repaired
            assert splice["approximate_tokens"] > repaired["approximate_tokens"] > 0
            assert splice["computed_tokens"] < repaired["computed_tokens"]


def test_kv_compose_ctrl_c_keeps_the_finished_prompts_marked_partial(
    tiny_dir, tmp_path, monkeypatch, capsys
) -> None:
    import engine.bench.harness.approx_runs as command

    real, calls = command.run_plan, []

    def run_plan(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4 + 2:  # four arms per prompt: the second prompt is cut short
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(command, "run_plan", run_plan)
    out = tmp_path / "run"
    model = str(tiny_dir("qwen2", tokenizer=True))
    argv = ["kv-compose", "--model", model, "--prompts", "3", "--repeat", "1", "--answer-tokens", "1"]
    assert main([*argv, "--out", str(out)]) == 130
    assert (
        capsys.readouterr().err.splitlines()[-1] == f"interrupted: kept 1 finished prompts in {out} (partial)"
    )
    data = json.loads((out / "kv_compose.json").read_text())
    assert data["environment"]["partial"] is True and {r["prompt"] for r in data["prompts"]} == {0}
    assert "**Partial run**" in (out / "report.md").read_text() and (out / "ttft_vs_length.png").is_file()
