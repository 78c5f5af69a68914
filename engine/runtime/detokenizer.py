"""`IncrementalDetokenizer`: a request's generated tokens as text, a constant number of decodes per token.

Offset-based, as vLLM detokenizes: each token decodes a short window of the latest tokens (from `start`),
and the text it adds is what that window decodes to beyond the text already given out. The window moves
on whenever its text ends on a whole character, so it holds the few tokens since the last such point:
the per-token cost does not grow with the reply. The text given out is always the decode of all the
generated tokens (special tokens skipped) without a trailing incomplete character (U+FFFD of a partial
UTF-8 sequence), which a later token may complete; it is never taken back.
"""

from __future__ import annotations

from collections.abc import Callable

INCOMPLETE = "\ufffd"


class IncrementalDetokenizer:
    def __init__(self, decode: Callable[[list[int]], str] | None) -> None:
        self.decode = decode  # token ids -> text; None: no tokenizer, no text
        self.ids: list[int] = []
        self.start = 0  # the window's first token
        self.mark = 0  # tokens [start, mark) decode to `base` characters, already given out
        self.base = 0
        self.given = 0  # characters beyond `base` given out from the current window

    def push(self, token: int) -> str:
        """Take the next generated token; the whole characters it completes (may be "")."""
        self.ids.append(token)
        if self.decode is None:
            return ""
        text = self.decode(self.ids[self.start :])
        stable = text.rstrip(INCOMPLETE)
        delta = stable[self.base + self.given :]
        self.given += len(delta)
        if len(stable) == len(text):  # a whole-character boundary: the window restarts at `mark`
            self.start, self.mark = self.mark, len(self.ids)
            self.base = len(self.decode(self.ids[self.start : self.mark]))
            self.given = 0
        return delta
