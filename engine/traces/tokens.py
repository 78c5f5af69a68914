"""Token ids of rendered prompts that mostly extend the previous one, tokenizing only what changed.

A fast tokenizer splits its input at added tokens (`<|im_start|>`, `<|im_end|>`, ...) before anything
else, so the ids of `A + B`, where A ends in such a token, are the ids of A followed by those of B. Each
key (a session) keeps its last text, ids and offsets; a new text reuses the ids up to the last added
token inside the part it shares with that text and tokenizes the rest. Added tokens that strip
whitespace around them, or a tokenizer for which the split is not exact on a probe text, make every
call a full tokenization (same ids, slower).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from engine.prompts.literal import tokenize_chat
from engine.prompts.regions import common_prefix


@dataclass
class TokenizedText:
    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]  # (char start, char end) of every token in `text`
    cuts: list[tuple[int, int]]  # (char end, token count) right after every safe added token, ascending
    literal: tuple[int, ...] = ()  # where control-token strings a client sent start: text, not tokens


class IncrementalEncoder:
    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        added = tokenizer.added_tokens_decoder.items()
        self.cut_ids = {i for i, t in added if not (t.lstrip or t.rstrip or t.single_word or t.normalized)}
        self.last: dict[str, TokenizedText] = {}
        self.incremental = bool(self.cut_ids) and self._split_is_exact()
        self.reused_tokens = 0  # ids taken from an earlier text instead of tokenized again (for reports)

    def _tokenize(
        self, text: str, base: int = 0, literal: tuple[int, ...] = ()
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """`text` (the part of a whole text from character `base` on) tokenized; `literal` as the whole
        text's (engine/prompts/literal.py)."""
        return tokenize_chat(self.tokenizer, text, [p - base for p in literal if p >= base], base)

    def _split_is_exact(self) -> bool:
        marker = self.tokenizer.convert_ids_to_tokens(min(self.cut_ids))
        probe = f"Hello world{marker}  next line\n {marker}\nend"
        cut = probe.index(marker) + len(marker)
        return self._tokenize(probe)[0] == self._tokenize(probe[:cut])[0] + self._tokenize(probe[cut:])[0]

    def _cuts(self, ids: list[int], offsets: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
        return [(offsets[k][1], k + 1) for k in range(start, len(ids)) if ids[k] in self.cut_ids]

    def encode(
        self, text: str, key: str = "", keep: bool = True, literal: tuple[int, ...] = ()
    ) -> TokenizedText:
        """The ids of `text` (exactly as one tokenizer call gives them, the control-token strings starting
        at `literal` tokenized as text) and their character offsets; kept as the key's last text unless
        `keep` is False (`remember` then keeps it, once it is wanted)."""
        prev = self.last.get(key) if self.incremental else None
        shared = common_prefix(prev.text, text) if prev is not None else 0
        if prev is not None and prev.literal != literal:  # reuse only what was tokenized the same way
            differ = set(prev.literal) ^ set(literal)
            shared = min(shared, min(differ))
        at = bisect.bisect_right(prev.cuts, (shared, len(prev.ids) + 1)) if prev is not None else 0
        if prev is None or at == 0:
            ids, offsets = self._tokenize(text, 0, literal)
            cuts = self._cuts(ids, offsets, 0) if self.incremental else []
            out = TokenizedText(text, ids, offsets, cuts, literal)
        else:
            char, count = prev.cuts[at - 1]
            tail_ids, tail_offsets = self._tokenize(text[char:], char, literal)
            ids, offsets = prev.ids[:count] + tail_ids, prev.offsets[:count] + tail_offsets
            cuts = prev.cuts[:at] + self._cuts(ids, offsets, count)
            out = TokenizedText(text, ids, offsets, cuts, literal)
            self.reused_tokens += count
        if keep:
            self.remember(key, out)
        return out

    def remember(self, key: str, tokenized: TokenizedText, most: int | None = None) -> None:
        """Make `tokenized` the key's last text: the next text of the key reuses its ids. `most`: at most
        this many keys are kept, the least recently remembered dropped."""
        self.last.pop(key, None)
        self.last[key] = tokenized
        while most is not None and len(self.last) > most:
            del self.last[next(iter(self.last))]
