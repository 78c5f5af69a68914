"""`PromptEncoder`'s token-id prompts: any integers inside the vocabulary, refused otherwise in one line, and a
list of plain ints checked without an abstract-base-class check per id (a long prompt's host cost)."""

from __future__ import annotations

import cProfile
import pstats

import numpy as np
import pytest

from engine.errors import PromptError
from engine.model.presets import SYNTHETIC_PRESETS
from engine.prompts.encoder import PromptEncoder


@pytest.fixture(scope="module")
def encoder() -> PromptEncoder:
    return PromptEncoder(None, "synthetic:qwen2.5-0.5b", SYNTHETIC_PRESETS["qwen2.5-0.5b"])


def test_integers_of_any_kind_inside_the_vocabulary(encoder: PromptEncoder) -> None:
    assert encoder.ids([5, 7, 151935]) == [5, 7, 151935]
    assert encoder.ids(np.array([3, 4], dtype=np.int64).tolist() + [np.int64(9)]) == [3, 4, 9]
    assert encoder.ids(range(3, 6)) == [3, 4, 5]
    with pytest.raises(PromptError, match=r"token id 151936 is outside the vocabulary \[0, 151936\)"):
        encoder.ids([1, 151936, -1])
    with pytest.raises(PromptError, match="token id -1 is outside"):
        encoder.ids([np.int64(-1)])
    with pytest.raises(PromptError, match="got True"):
        encoder.ids([1, True])
    with pytest.raises(PromptError, match="got 1.5"):
        encoder.ids([1, 1.5])


def test_a_long_list_of_ints_is_checked_by_type(encoder: PromptEncoder) -> None:
    ids = list(range(3, 8195))
    profile = cProfile.Profile()
    profile.runcall(encoder.ids, ids)
    called = {name for (_, _, name) in pstats.Stats(profile).stats}  # type: ignore[attr-defined]
    assert "__instancecheck__" not in called and "_abc_instancecheck" not in " ".join(called)
