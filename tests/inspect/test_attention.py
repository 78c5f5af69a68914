"""Attention capture: parity with transformers' eager attention (float32; ours on the run's device and dtype,
tolerance from tests/precision.py), row and region invariants, refusals."""

from __future__ import annotations

import functools

import pytest
import torch

from engine.errors import AttentionTooLargeError, InvalidArgumentError, PromptError
from engine.inspect.attention import partial_utf8, token_labels
from engine.prompts.regions import render_prompt
from tests.conftest import build_hf_model

CHAT = [
    {"role": "system", "content": "You answer in one word."},
    {"role": "user", "content": "Capital of Italy?"},
    {"role": "assistant", "content": "Rome."},
    {"role": "user", "content": "And of Spain?"},
]
TOOLS = [
    {"type": "function", "function": {"name": "lookup", "description": "Look a word up.", "parameters": {}}}
]


@pytest.fixture(scope="module", params=["qwen2", "qwen3", "llama"])
def pair(request, tiny_dir, load, precision):
    """(transformers in float32 on CPU, ours on the device in the dtype, the probability tolerance, a report)"""
    kind = request.param
    observe = functools.partial(precision.observe, kind, "attention")
    ours = load(tiny_dir(kind), cache_tokens=512)
    return build_hf_model(kind), ours, precision.attention_tol(kind), observe


def _reference(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return torch.stack(model(torch.tensor([ids]), output_attentions=True).attentions)[:, 0]


def test_full_capture_matches_transformers(pair) -> None:
    ref_model, ours, tol, observe = pair
    ids = torch.randint(0, 512, (41,), generator=torch.Generator().manual_seed(3)).tolist()
    maps = ours.attention(ids)
    assert maps.probs.dtype == torch.float32 and maps.probs.shape == (2, 4, 41, 41)
    assert observe((maps.probs - _reference(ref_model, ids)).abs().max().item()) <= tol


def test_chosen_layers_heads_rows_match_transformers(pair) -> None:
    ref_model, ours, tol, observe = pair
    ids = torch.randint(0, 512, (30,), generator=torch.Generator().manual_seed(4)).tolist()
    maps = ours.attention(ids, layers=[-1], heads=[3, 0], rows=[-1, 7, 0])
    assert (maps.layers, maps.heads, maps.rows) == ([1], [3, 0], [29, 7, 0])
    expected = _reference(ref_model, ids)[1][[3, 0]][:, [29, 7, 0]]
    assert observe((maps.probs[0] - expected).abs().max().item()) <= tol


def test_generated_rows_match_transformers_at_their_positions(pair) -> None:
    ref_model, ours, tol, observe = pair
    ids = torch.randint(0, 512, (12,), generator=torch.Generator().manual_seed(5)).tolist()
    maps = ours.attention(ids, rows=[-3, -2, -1], max_new_tokens=6)
    generated = ours.generate(ids, max_new_tokens=6, cache=False).token_ids
    assert maps.token_ids == ids + generated
    assert maps.regions[-1].kind == "generated" and maps.regions[-1].start == len(ids)
    assert maps.rows == [len(maps.token_ids) - 3 + i for i in range(3)]
    expected = _reference(ref_model, maps.token_ids)[:, :, maps.rows]
    assert observe((maps.probs - expected).abs().max().item()) <= tol


def test_rows_are_causal_distributions(smollm2_on_device) -> None:
    maps = smollm2_on_device.attention(CHAT, layers=[0, 24], rows=range(0, 40, 3))
    assert torch.allclose(maps.probs.sum(-1), torch.ones(maps.probs.shape[:-1]), atol=1e-5)
    after = torch.arange(maps.probs.shape[-1])[None, :] > torch.tensor(maps.rows)[:, None]
    assert maps.probs[..., after].abs().max().item() == 0.0
    assert maps.probs[:, :, 0, 0].eq(1.0).all()  # row 0 sees only itself


def test_region_shares_sum_to_one_and_group_by_label(smollm2_on_device) -> None:
    prompt = render_prompt(smollm2_on_device.tokenizer, CHAT, TOOLS)
    maps = smollm2_on_device.attention(prompt, layers=[5], rows=[-1, -10])
    shares = maps.region_shares()
    labels = maps.region_labels
    assert [r.label for r in maps.regions].count("system") == 2 and labels.count("system") == 1
    assert shares.shape == (1, smollm2_on_device.config.num_heads, 2, len(labels))
    assert torch.allclose(shares.sum(-1), torch.ones(1, smollm2_on_device.config.num_heads, 2), atol=1e-5)
    system = sum(maps.probs[..., r.start : r.end].sum(-1) for r in maps.regions if r.label == "system")
    assert torch.allclose(shares[..., labels.index("system")], system)
    assert torch.allclose(maps.share(["system", "tools"]), system + shares[..., labels.index("tools")])
    with pytest.raises(
        InvalidArgumentError, match="this prompt has no 'status' region; its regions are system"
    ):
        maps.share(["system", "status"])  # no message opens with <agent_status>


def test_text_and_token_prompts_are_one_region(smollm2_on_device) -> None:
    maps = smollm2_on_device.attention("The quick brown fox", layers=[0], heads=[0])
    assert [(r.label, r.start, r.end) for r in maps.regions] == [("prompt", 0, len(maps.token_ids))]
    again = smollm2_on_device.attention(maps.token_ids, layers=[0], heads=[0])
    assert torch.equal(again.probs, maps.probs)


def test_oversize_request_is_refused_with_its_size(smollm2_on_device) -> None:
    ids = list(range(100, 1124))  # 30 layers x 9 heads x 1024 x 1024 x 4 bytes = 1.05 GiB
    with pytest.raises(AttentionTooLargeError, match=r"needs 1\.05 GiB.*over the 1\.00 GiB limit"):
        smollm2_on_device.attention(ids)
    small = smollm2_on_device.attention(ids, layers=[3], rows=range(-4, 0))  # the last rows stay cheap
    assert small.probs.shape == (1, 9, 4, 1024)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"layers": [30]}, "layer 30 is out of range"),
        ({"heads": [-10]}, "head -10 is out of range"),
        ({"rows": [5000]}, "row 5000 is out of range"),
        ({"rows": []}, "no rows chosen"),
    ],
)
def test_bad_indices_are_refused(smollm2_on_device, kwargs: dict, message: str) -> None:
    with pytest.raises(PromptError, match=message):
        smollm2_on_device.attention("Hello there", **kwargs)


def test_token_labels_escape_whitespace_and_name_specials(smollm2_on_device) -> None:
    ids = smollm2_on_device.render([{"role": "user", "content": "a b\n\tc"}])
    labels = token_labels(smollm2_on_device.tokenizer, ids)
    assert labels[0] == "<|im_start|>" and "<|im_end|>" in labels
    assert all("\n" not in label and " " not in label for label in labels)
    assert "␣b" in labels and any("\\n" in label for label in labels)
    assert token_labels(None, [7, 8]) == ["#7", "#8"]


def test_token_labels_of_cjk_and_emoji_are_text_or_escaped_bytes(smollm2) -> None:
    from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir

    qwen = load_tokenizer(qwen_tokenizer_dir())
    ids = qwen("你好 緻 😀", add_special_tokens=False).input_ids
    # whole characters are text; 緻 is split over two tokens, each showing its bytes
    assert token_labels(qwen, ids) == ["你好", "␣<0xE7>", "<0xB7><0xBB>", "␣😀"]
    ids = smollm2.tokenizer("你好 😀", add_special_tokens=False).input_ids  # bytes split differently here
    labels = token_labels(smollm2.tokenizer, ids)
    assert labels[:2] == ["<0xE4><0xBD>", "<0xA0>"] and "␣<0xF0><0x9F><0x98>" in labels
    assert not any(c in label for label in labels for c in "äĠðŁ")  # no byte-level BPE stand-ins


def test_partial_utf8_decodes_byte_level_tokens() -> None:
    assert partial_utf8("ä½") == "<0xE4><0xBD>"  # the first two bytes of 你
    assert partial_utf8("ä½ł") == "你" and partial_utf8("ĠðŁĺĢ") == " 😀"
    assert partial_utf8("▁hello") == "▁hello"  # not the byte-level alphabet: unchanged
