"""What a request may give out of its decoded text: whole characters, nothing from a stop string on; the
stop matcher and the detokenizer see each character and token once."""

from __future__ import annotations

from engine.kv.sequence import SequenceState
from engine.runtime.detokenizer import IncrementalDetokenizer
from engine.runtime.request import Request, SamplingParams
from engine.runtime.stop_strings import StopMatcher, failure_table


def fed(stops: tuple[str, ...], pieces: list[str]) -> tuple[tuple[int, str] | None, int]:
    """The first hit over the pieces, and the held-back tail after the last one."""
    m = StopMatcher(stops)
    for piece in pieces:
        hit = m.feed(piece)
        if hit is not None:
            return hit, m.partial
    return None, m.partial


def test_cut_before_the_earliest_stop_string() -> None:
    assert fed(("Rome", "Paris"), ["say Paris or Rome"]) == ((4, "Paris"), 0)
    assert fed(("Rome", "Paris"), ["say Pa", "r", "is"])[0] == (4, "Paris")
    # across pieces, the earliest start wins; ties go to the smaller string (as min() of pairs does)
    assert fed(("b", "aby"), ["xa", "by"])[0] == (1, "aby")
    assert fed(("ab", "abc"), ["xabc"])[0] == (1, "ab")


def test_a_tail_that_may_become_a_stop_string_is_held_back() -> None:
    assert fed(("Paris",), ["the capital is Pa"]) == (None, 2)
    assert fed(("aab",), ["aaaa"]) == (None, 2)  # KMP: the longest prefix that ends the text
    assert fed(("Paris",), ["the capital is Pa", "lo"]) == (None, 0)


def test_failure_table() -> None:
    assert failure_table("abab") == [0, 0, 1, 2]
    assert failure_table("aaab") == [0, 1, 2, 0]


class Counted(str):
    """A stop string that counts the characters read from it by index (as the matcher reads it)."""

    reads = 0

    def __getitem__(self, key):  # noqa: ANN001, ANN204
        Counted.reads += 1
        return super().__getitem__(key)


def test_matching_is_linear_in_the_text_and_the_stop_strings() -> None:
    """A 4,096-character stop string that almost matches every piece (the quadratic case of checking every
    prefix per token): each character fed costs at most three reads of the stop string (KMP's amortised
    bound), where checking every prefix would read ~8 million."""
    long_stop = Counted("a" * 4095 + "b")
    m = StopMatcher((long_stop,))
    Counted.reads = 0  # after the failure table, made once
    for _ in range(2000):
        assert m.feed("aa") is None
    assert m.partial == 4000
    assert Counted.reads <= 3 * 4000


class Bytes:
    """A byte-level tokenizer: token i is byte i; decode as UTF-8 with replacement (as BPE decoders do)."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, ids: list[int]) -> str:
        self.calls.append(len(ids))
        return bytes(ids).decode("utf-8", errors="replace")


def test_detokenizer_gives_whole_characters_and_decodes_a_short_window() -> None:
    text = "héllo 🌟 wörld " * 50
    decode = Bytes()
    d = IncrementalDetokenizer(decode)
    pieces = [d.push(b) for b in text.encode()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)
    assert max(decode.calls) <= 8  # the window never grows with the reply


def test_detokenizer_holds_a_partial_character_and_gives_invalid_bytes_once_followed() -> None:
    d = IncrementalDetokenizer(Bytes())
    star = "🌟".encode()
    assert [d.push(b) for b in star[:3]] == ["", "", ""]
    assert d.push(star[3]) == "🌟"
    assert d.push(0xFF) == ""  # invalid: held while it is the last character
    assert d.push(ord("x")) == "\ufffdx"
    assert IncrementalDetokenizer(None).push(5) == ""


def test_a_long_reply_is_read_once_and_held_back_only_at_its_tail() -> None:
    """A 100,000-token reply of one character a token: the stop matcher is fed each character once, the text
    held back never reaches the stop string's length, and the text given out is kept as its pieces (no
    copy of the whole reply per token)."""
    req = Request(
        "r",
        SequenceState([1, 2, 3]),
        SamplingParams(max_new_tokens=100_001, stop=("cab!",)),
        0.0,
        decode=lambda ids: "".join(chr(97 + i % 3) for i in ids),
    )
    fed: list[int] = []
    feed = req.stops.feed
    req.stops.feed = lambda piece: fed.append(len(piece)) or feed(piece)  # type: ignore[method-assign]
    held = 0
    for i in range(100_000):
        req.accept(i, False, None, 0.0, 0.0)  # type: ignore[arg-type]
        held = max(held, len(req.held))
    assert sum(fed) == 100_000 and held < len("cab!")
    assert req.given_chars + len(req.held) == 100_000
    assert max(map(len, req.given)) <= len("cab!")  # pieces as given out, never the reply joined
    assert req.text == ("abc" * 33_334)[: req.given_chars]
