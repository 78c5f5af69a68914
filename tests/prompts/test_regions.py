"""Prompt regions: every token labelled, in order, with the message it came from, for two chat templates
(SmolLM2's ChatML without tool support, where tools are folded into the system text, and Qwen2.5's with
it)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.prompts.chat import render_text
from engine.prompts.regions import Region, RenderedPrompt, render_prompt

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
MESSAGES = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Is it raining in Oslo?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
        ],
    },
    {"role": "tool", "content": '{"rain": true, "mm": 3}'},
    {"role": "assistant", "content": "Yes, 3 mm of rain."},
    {"role": "user", "content": "And tomorrow?"},
    {"role": "user", "content": "<agent_status>get_weather invoked 1 time</agent_status>"},
]


@pytest.fixture(scope="module", params=["smollm2", "qwen2.5"])
def tokenizer(request):
    if request.param == "qwen2.5":
        return load_tokenizer(qwen_tokenizer_dir())
    return request.getfixturevalue("smollm2").tokenizer


def _check_cover(prompt: RenderedPrompt) -> None:
    """Regions are non-empty, contiguous, in order, and cover every token exactly once."""
    assert prompt.regions[0].start == 0 and prompt.regions[-1].end == len(prompt.token_ids)
    for a, b in zip(prompt.regions, prompt.regions[1:], strict=False):
        assert a.start < a.end == b.start < b.end
        assert a.label != b.label  # neighbours with one label would have been merged


def _text(tokenizer, prompt: RenderedPrompt, label: str) -> str:
    return "".join(
        tokenizer.decode(prompt.token_ids[r.start : r.end]) for r in prompt.regions if r.label == label
    )


def test_tokens_are_those_of_the_rendered_text(tokenizer) -> None:
    prompt = render_prompt(tokenizer, MESSAGES, TOOLS)
    assert prompt.text == render_text(tokenizer, MESSAGES, TOOLS)
    assert prompt.token_ids == tokenizer(prompt.text, add_special_tokens=False).input_ids
    _check_cover(prompt)


def test_every_message_has_its_own_labelled_region(tokenizer) -> None:
    prompt = render_prompt(tokenizer, MESSAGES, TOOLS)
    labels = list(dict.fromkeys(r.label for r in prompt.regions))
    assert labels == [
        "system",
        "tools",
        "user #1",
        "assistant #2",
        "tool #3",
        "assistant #4",
        "latest user",
        "status",
        "generation prompt",
    ]
    kinds = {r.label: r.kind for r in prompt.regions}
    assert (kinds["status"], kinds["latest user"], kinds["tool #3"]) == ("status", "latest_user", "history")
    assert "You are a weather bot." in _text(tokenizer, prompt, "system")
    assert "get_weather" in _text(tokenizer, prompt, "tools") and "Oslo" not in _text(
        tokenizer, prompt, "tools"
    )
    assert "Is it raining in Oslo?" in _text(tokenizer, prompt, "user #1")
    assert "Oslo" in _text(tokenizer, prompt, "assistant #2")  # the tool call's arguments
    assert '"mm": 3' in _text(tokenizer, prompt, "tool #3")
    assert "And tomorrow?" in _text(tokenizer, prompt, "latest user")
    assert "<agent_status>" in _text(tokenizer, prompt, "status")
    assert "assistant" in _text(tokenizer, prompt, "generation prompt")


def test_without_tools_there_is_no_tools_region(tokenizer) -> None:
    prompt = render_prompt(tokenizer, MESSAGES[:2])
    assert [r.label for r in prompt.regions] == ["system", "latest user", "generation prompt"]


def test_generated_tokens_form_the_last_region(tokenizer) -> None:
    prompt = render_prompt(tokenizer, MESSAGES[:2])
    more = prompt.with_generated([11, 12, 13])
    n = len(prompt.token_ids)
    assert more.token_ids == prompt.token_ids + [11, 12, 13]
    assert more.regions[-1] == Region("generated", "generated", n, n + 3)
    assert more.region_at(n + 2).label == "generated" and more.region_at(0).label == "system"
    assert prompt.with_generated([]).regions == prompt.regions


_text_st = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30)
_message = st.tuples(st.sampled_from(["user", "assistant"]), _text_st)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(system=st.booleans(), turns=st.lists(_message, min_size=1, max_size=5))
def test_any_conversation_is_covered(tokenizer, system: bool, turns: list[tuple[str, str]]) -> None:
    messages = [{"role": "system", "content": "Be brief."}] * system + [
        {"role": r, "content": c} for r, c in turns
    ]
    prompt = render_prompt(tokenizer, messages)
    _check_cover(prompt)
    assert prompt.regions[-1].label == "generation prompt"


def test_a_system_prompt_the_template_writes_is_its_own_region(tokenizer) -> None:
    """Both templates write a default system prompt when the first message is not a system message; with
    tools, SmolLM2's gets the system message that carries them."""
    for tools in (None, TOOLS):
        prompt = render_prompt(tokenizer, MESSAGES[1:2], tools)
        _check_cover(prompt)
        labels = list(dict.fromkeys(r.label for r in prompt.regions))
        assert labels == ["default system", *(["tools"] * bool(tools)), "latest user", "generation prompt"]
        assert _text(tokenizer, prompt, "latest user").startswith("<|im_start|>user\nIs it raining in Oslo?")
        assert {r.kind for r in prompt.regions if r.label == "default system"} == {"system"}
    assert "You are" in _text(tokenizer, render_prompt(tokenizer, MESSAGES[1:2]), "default system")
