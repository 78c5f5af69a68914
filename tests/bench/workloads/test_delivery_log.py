"""The delivery log and its scoring: records from a seed, sizes and positions in tokens, answers scored
right, wrong (with whose number it was) or not a number."""

from __future__ import annotations

import json

import pytest

from engine.bench.workloads.delivery_log import POSITIONS, build_log
from engine.bench.workloads.delivery_questions import log_offset, messages, score
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.chat import render_text


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(qwen_tokenizer_dir())


@pytest.fixture(scope="module")
def count(tokenizer):
    return lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)


def test_records_come_from_the_seed_and_keep_their_invariants(count) -> None:
    log = build_log(count, 600, "middle", 8, seed=1)
    assert log == build_log(count, 600, "middle", 8, seed=1)
    assert log.text != build_log(count, 600, "middle", 8, seed=2).text
    parsed = [json.loads(line) for line in log.text.split("\n")]
    assert [list(p) for p in parsed[:1]] == [["order", "flavor", "tubs", "at"]]
    assert len({p["order"] for p in parsed}) == len(parsed)  # order ids unique
    assert len({log.records[i].tubs for i in log.facts}) == 8  # the facts' counts differ
    assert log.facts == list(range(log.facts[0], log.facts[0] + 8))  # one block
    times = [p["at"] for p in parsed]
    assert times == sorted(times) and len(set(times)) == len(times)  # a log in time order


@pytest.mark.parametrize("length", [300, 1000])
def test_a_log_fills_its_length_in_tokens_and_never_passes_it(count, length) -> None:
    for position in POSITIONS:
        log = build_log(count, length, position, 4, seed=0)
        assert log.tokens == count(log.text) <= length
        longest_line = max(count(r.line() + "\n") for r in log.records)
        assert log.tokens > length - 2 * longest_line  # whole records: no more than one short of it


def test_positions_are_fractions_of_the_log_in_tokens(count) -> None:
    starts = {}
    for position, fraction in POSITIONS.items():
        log = build_log(count, 2000, position, 8, seed=0)
        first, last = log.char_span(log.facts[0]), log.char_span(log.facts[-1])
        before, after = count(log.text[: first[0]]), log.tokens - count(log.text[: last[1]])
        free = before + after  # the tokens of the fillers around the block
        line = count(log.records[0].line() + "\n")
        assert abs(before - fraction * free) <= line  # the nearest record boundary
        starts[position] = before
    assert starts["top"] == 0 and log.facts[-1] == len(log.records) - 1  # `end`: the block closes the log
    assert list(starts.values()) == sorted(starts.values())


def test_too_short_a_log_for_its_facts_is_refused(count) -> None:
    with pytest.raises(ValueError, match="facts alone take"):
        build_log(count, 64, "top", 8, seed=0)
    with pytest.raises(ValueError, match="unknown position"):
        build_log(count, 500, "bottom", 8, seed=0)


def test_the_log_sits_verbatim_in_the_rendered_prompt(tokenizer, count) -> None:
    log = build_log(count, 300, "end", 3, seed=0)
    text = render_text(tokenizer, messages(log, log.facts[0]))
    at = log_offset(text, log)
    a, b = log.char_span(log.facts[1])
    assert text[at + a : at + b] == log.records[log.facts[1]].line()


def test_scoring(count) -> None:
    log = build_log(count, 500, "quarter", 4, seed=3)
    fact, other = log.facts[0], log.facts[1]
    record = log.records[fact]
    right = score(f"Order {record.order} had {record.tubs} tubs.", log, fact)
    assert (right.verdict, right.number) == ("right", record.tubs)
    assert right.number_at == len(f"Order {record.order} had ")  # the asked id's digits are skipped
    theirs = score(str(log.records[other].tubs), log, fact)
    assert (theirs.verdict, theirs.source) == ("wrong number", "another fact")
    assert theirs.holders[0] == log.records[other].order
    asked = {log.records[j].tubs for j in log.facts}
    filler_tubs = next(r.tubs for r in log.records if r.tubs not in asked)
    assert score(f"{filler_tubs}", log, fact).source == "a filler"
    assert score(record.order.removeprefix("A-"), log, fact).source == "its own id or time"
    assert record.order != "A-9999" and score("9999", log, fact).source == "no record"  # tubs are 1-48
    blank = score("I cannot tell.", log, fact)
    assert (blank.verdict, blank.number, blank.number_at) == ("not a number", None, -1)
