"""What a request may give out of its decoded text: whole characters, nothing from a stop string on."""

from __future__ import annotations

from engine.runtime.request import visible_text


def test_cut_before_the_earliest_stop_string() -> None:
    assert visible_text("say Paris or Rome", ("Rome", "Paris"), finished=False) == ("say ", "Paris")


def test_a_tail_that_may_become_a_stop_string_is_held_back() -> None:
    assert visible_text("the capital is Pa", ("Paris",), finished=False) == ("the capital is ", None)
    assert visible_text("the capital is Pa", ("Paris",), finished=True) == ("the capital is Pa", None)


def test_a_partial_character_is_held_back_then_dropped_at_the_end() -> None:
    assert visible_text("ok \ufffd", (), finished=False) == ("ok ", None)
    assert visible_text("ok \ufffd\ufffd", (), finished=True) == ("ok ", None)
