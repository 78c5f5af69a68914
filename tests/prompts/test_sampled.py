"""Assistant turns rendered as sampled (engine/prompts/sampled.py): a reply's sampled ids are spliced where the
template writes its text, the prompt's text unchanged and the rest tokenized as before; ids that do not
decode to the text, or a template that does not write it verbatim, leave the text tokenized (`text`); the
incremental encoder reuses a spliced prompt's ids as a fresh encode makes them."""

from __future__ import annotations

import pytest
from transformers import PreTrainedTokenizerBase

from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.chat import render_text
from engine.prompts.sampled import (
    TEXT,
    TOKENS,
    SampledReply,
    SampledUse,
    splices,
    substituted,
    tokenize_spliced,
)
from engine.traces.tokens import IncrementalEncoder

REPLY = "Hello world, the weather is fine."


@pytest.fixture(scope="module", params=["smollm2", "qwen2.5"])
def tokenizer(request: pytest.FixtureRequest) -> PreTrainedTokenizerBase:
    if request.param == "qwen2.5":
        return load_tokenizer(qwen_tokenizer_dir())
    return request.getfixturevalue("smollm2").tokenizer


def conversation(reply: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "Thanks."},
    ]


def cut_otherwise(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """`text` as tokens no tokenizer call makes: each character on its own."""
    return [i for c in text for i in tokenizer(c, add_special_tokens=False).input_ids]


def test_sampled_ids_are_spliced_where_the_template_writes_the_text(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    sampled = cut_otherwise(tokenizer, REPLY)
    assert sampled != tokenizer(REPLY, add_special_tokens=False).input_ids
    reply = SampledReply("r1", REPLY, (*sampled, eos), {})
    messages = substituted(conversation(REPLY), [SampledUse(1, reply, TOKENS)])
    text = render_text(tokenizer, messages)
    (splice,), (use,) = splices(tokenizer, messages, None, [SampledUse(1, reply, TOKENS)], text, [eos])
    assert use.how == TOKENS and text[splice.start : splice.end] == REPLY and splice.ids == tuple(sampled)
    ids, offsets = tokenize_spliced(tokenizer, text, (), 0, [splice])
    plain = tokenizer(text, add_special_tokens=False).input_ids
    head = plain[: len(tokenizer(text[: splice.start], add_special_tokens=False).input_ids)]
    assert ids[: len(head)] == head and ids[len(head) : len(head) + len(sampled)] == sampled
    assert tokenizer.decode(ids) == text and len(offsets) == len(ids)
    assert all(a <= b for a, b in offsets) and offsets[-1][1] == len(text)
    assert ids[len(head) + len(sampled)] == eos  # the template's end of turn follows


def test_ids_that_are_not_the_text_leave_it_tokenized(tokenizer: PreTrainedTokenizerBase) -> None:
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    other = SampledReply(
        "r1", REPLY, tuple(tokenizer("Hello there.", add_special_tokens=False).input_ids), {}
    )
    messages = conversation(REPLY)
    text = render_text(tokenizer, messages)
    found, (use,) = splices(tokenizer, messages, None, [SampledUse(1, other, TOKENS)], text, [eos])
    assert found == () and use.how == TEXT
    padded = conversation(" " + REPLY)  # rendered otherwise than the reply's text: no splice either
    reply = SampledReply("r1", REPLY, tuple(cut_otherwise(tokenizer, REPLY)), {})
    text = render_text(tokenizer, padded)
    assert splices(tokenizer, padded, None, [SampledUse(1, reply, TOKENS)], text, [eos])[0] == ()


def test_the_incremental_encoder_reuses_spliced_ids(tokenizer: PreTrainedTokenizerBase) -> None:
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    reply = SampledReply("r1", REPLY, (*cut_otherwise(tokenizer, REPLY), eos), {})
    uses = [SampledUse(1, reply, TOKENS)]
    encoder, fresh = IncrementalEncoder(tokenizer), IncrementalEncoder(tokenizer)
    short = substituted(conversation(REPLY), uses)
    longer = [*short, {"role": "assistant", "content": "Welcome."}, {"role": "user", "content": "Bye."}]
    for messages in (short, longer):
        text = render_text(tokenizer, messages)
        spliced = splices(tokenizer, messages, None, uses, text, [eos])[0]
        got = encoder.encode(text, "s", spliced=spliced)
        assert got.ids == fresh.encode(text, f"fresh-{len(messages)}", spliced=spliced).ids
        at = next(k for k, (a, _) in enumerate(got.offsets) if a >= spliced[0].start)
        assert got.ids[at : at + len(reply.ids) - 1] == list(reply.ids[:-1])
    assert encoder.reused_tokens > 0
