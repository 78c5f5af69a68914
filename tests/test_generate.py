"""`python -m engine.generate`: the messages it sends; `--system ""` is an empty system message, never the
chat template's default one."""

from __future__ import annotations

import pytest

from engine.generate import main
from engine.runtime.engine import Engine


@pytest.mark.parametrize(
    ("system", "sent"),
    [
        ([], []),  # no --system: none sent, the template may add its own default
        (["--system", ""], [{"role": "system", "content": ""}]),
    ],
)
def test_the_system_flag_is_sent_as_given(tiny_dir, monkeypatch, system, sent) -> None:
    prompts = []
    real = Engine.generate

    def spy(self, prompt, *args, **kwargs):
        prompts.append(prompt)
        return real(self, prompt, *args, **kwargs)

    monkeypatch.setattr(Engine, "generate", spy)
    model = str(tiny_dir("qwen2", tokenizer=True))
    argv = ["--model", model, "--prompt", "hi", "--max-new-tokens", "1", "--cache-tokens", "64", *system]
    assert main(argv) == 0
    assert prompts == [[*sent, {"role": "user", "content": "hi"}]]
