"""Engine.generate: streaming, stop strings, sampling, usage and timing fields."""

from __future__ import annotations

import pytest
import torch

from engine.model.sampling import sample_rows

QUESTION = [{"role": "user", "content": "Name three colours."}]


def test_streamed_pieces_add_up_to_the_text(smollm2) -> None:
    pieces: list[str] = []
    gen = smollm2.generate(QUESTION, max_new_tokens=20, on_token=pieces.append, cache=False)
    assert "".join(pieces) == gen.text and len(pieces) > 3


def test_stop_string_ends_generation(smollm2) -> None:
    full = smollm2.generate(QUESTION, max_new_tokens=30, cache=False)
    word = full.text.split()[2]
    cut = smollm2.generate(QUESTION, max_new_tokens=30, stop=[word], cache=False)
    assert cut.finish_reason == "stop" and word not in cut.text
    assert full.text.startswith(cut.text) and len(cut.token_ids) < len(full.token_ids)


def test_max_new_tokens_is_respected(smollm2) -> None:
    gen = smollm2.generate("Once upon a time", max_new_tokens=5)
    assert len(gen.token_ids) == 5 and gen.finish_reason == "length"
    assert gen.usage.completion_tokens == 5


def test_seeded_sampling_is_reproducible(smollm2) -> None:
    a = smollm2.generate("The weather today", max_new_tokens=12, temperature=1.0, top_p=0.9, seed=3)
    b = smollm2.generate("The weather today", max_new_tokens=12, temperature=1.0, top_p=0.9, seed=3)
    assert a.token_ids == b.token_ids


def test_top_p_keeps_only_the_nucleus() -> None:
    logits = torch.log(torch.tensor([0.6, 0.3, 0.05, 0.05]))
    draws = {sample_rows(logits[None], [(1.0, 0.8, torch.Generator().manual_seed(i))])[0] for i in range(200)}
    assert draws == {0, 1}
    assert sample_rows(logits[None], [(0.0, 1.0, None)]) == [0]


def test_usage_and_timing_are_filled(smollm2) -> None:
    gen = smollm2.generate(QUESTION, max_new_tokens=8, cache=False)
    u, t = gen.usage, gen.timing
    assert u.prompt_tokens == len(smollm2.render(QUESTION)) and u.cached_tokens == 0
    assert u.computed_tokens == u.prompt_tokens
    assert 0 < t.lookup_s < t.ttft_s and 0 < t.prefill_s < t.ttft_s
    assert t.decode_tokens_per_s > 0


def test_render_passes_template_options(smollm2) -> None:
    with_prompt = smollm2.render(QUESTION)
    without = smollm2.render(QUESTION, add_generation_prompt=False)
    assert with_prompt[: len(without)] == without and len(with_prompt) > len(without)


@pytest.mark.parametrize("bad", [0, -1])
def test_max_new_tokens_must_be_positive(smollm2, bad: int) -> None:
    from engine.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="max_new_tokens must be at least 1"):
        smollm2.generate("hi", max_new_tokens=bad)


def test_a_stop_string_ends_the_text_the_stream_and_the_request_alike(smollm2) -> None:
    """The text and the stream end before the stop string (nothing of it is ever sent); token_ids keep every
    token the model generated, the last one completing the stop string, which `stop_string` names."""
    pieces: list[str] = []
    question = [{"role": "user", "content": "What is the capital of France?"}]
    gen = smollm2.generate(question, max_new_tokens=30, stop="Paris", on_token=pieces.append, cache=False)
    assert (gen.finish_reason, gen.stop_string) == ("stop", "Paris")
    assert "".join(pieces) == gen.text == "The capital of France is "
    assert smollm2.tokenizer.decode(gen.token_ids).endswith("Paris")


def test_a_character_cut_by_the_length_limit_is_dropped(smollm2) -> None:
    """Four tokens of a run of 4-byte emojis end inside the second one: the text keeps the whole first."""
    ask = [{"role": "user", "content": "Reply with three emojis that show happiness, nothing else."}]
    gen = smollm2.generate(ask, max_new_tokens=4, cache=False)
    assert smollm2.tokenizer.decode(gen.token_ids).endswith("\ufffd")  # what a plain decode gives
    assert gen.text == "🌟" and gen.finish_reason == "length"
