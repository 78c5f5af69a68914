"""`bench cluster`: one replica serves every request exactly as `replay --analyze` does (hash ids and text),
the results folder holds the `runs` list and its plots, and bad flags are refused in one line."""

from __future__ import annotations

import csv
import json

import pytest

from engine.bench.__main__ import main


def rows(path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_one_replica_equals_replay_analyze_on_hash_ids(tmp_path) -> None:
    out, ref = tmp_path / "cluster", tmp_path / "analyze"
    assert (
        main(["replay", "example:mooncake", "--analyze", "--cache-tokens", "20480", "--out", str(ref)]) == 0
    )
    args = ["cluster", "example:mooncake", "--replicas", "1", "2", "--routers", "round-robin", "kv-cost"]
    assert main([*args, "--pool-tokens", "20480", "--out", str(out)]) == 0
    expected = [int(r["cached_tokens"]) for r in rows(ref / "requests.csv")]
    got = rows(out / "requests.csv")
    for router in ("round-robin", "kv-cost"):
        mine = [int(r["cached_tokens"]) for r in got if r["router"] == router and r["replicas"] == "1"]
        assert mine == expected
    runs = json.loads((out / "cluster.json").read_text())["runs"]
    assert {(r["router"], r["replicas"]) for r in runs} == {
        (a, n) for a in ("round-robin", "kv-cost") for n in (1, 2)
    }
    summary = json.loads((ref / "analysis.json").read_text())["summary"][0]
    one = next(r for r in runs if r["replicas"] == 1)
    assert (
        one["hit_rate"] == pytest.approx(summary["cached_share"])
        and one["evictions"] == summary["evictions"] > 0
    )
    assert {"ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "load_max_over_mean", "output_tokens_per_s"} <= set(one)
    assert (out / "hit_rate_vs_replicas.png").is_file() and (out / "ttft_p99_vs_rate.png").is_file()


def test_one_replica_equals_replay_analyze_on_text(tiny_dir, tmp_path) -> None:
    model = str(tiny_dir("qwen2", tokenizer=True))
    out, ref = tmp_path / "cluster", tmp_path / "analyze"
    common = ["example:anthropic", "--model", model, "--cache-tokens", "2048"]
    assert main(["replay", *common, "--analyze", "--rules", "local", "--out", str(ref)]) == 0
    argv = ["cluster", "example:anthropic", "--model", model, "--pool-tokens", "2048", "--replicas", "1"]
    assert (
        main([*argv, "--routers", "session", "--layouts", "as-sent", "timestamp-first", "--out", str(out)])
        == 0
    )
    expected = [int(r["local_cached"]) for r in rows(ref / "requests.csv")]
    got = rows(out / "requests.csv")
    assert [int(r["cached_tokens"]) for r in got if r["layout"] == "as-sent"] == expected and sum(
        expected
    ) > 0
    # a clock at the top: only the blocks before its first differing digit are shared (the date, at most)
    assert all(int(r["cached_tokens"]) <= 32 for r in got if r["layout"] == "timestamp-first")
    assert "What a timestamp-first layout costs the cluster" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--pool-tokens", "512"], "largest request"),
        (["--cost", "nowhere"], "shipped cost"),
        (["--replicas", "0"], "--replicas"),
        (["--routers", "random"], "--routers"),
    ],
)
def test_bad_flags_are_one_line(tmp_path, capsys, argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as e:
        from engine.cli import run

        run(main, ["cluster", "example:mooncake", *argv, "--out", str(tmp_path / "x")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
