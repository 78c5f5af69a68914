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

from engine.prompts.regions import common_prefix
from engine.prompts.sampled import Splice, tokenize_spliced


@dataclass
class TokenizedText:
    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]  # (char start, char end) of every token in `text`
    cuts: list[tuple[int, int]]  # (char end, token count) right after every safe added token, ascending
    literal: tuple[int, ...] = ()  # where control-token strings a client sent start: text, not tokens
    spliced: tuple[Splice, ...] = ()  # text given the ids a model sampled (engine/prompts/sampled.py)


class IncrementalEncoder:
    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        added = tokenizer.added_tokens_decoder.items()
        self.cut_ids = {i for i, t in added if not (t.lstrip or t.rstrip or t.single_word or t.normalized)}
        self.last: dict[str, TokenizedText] = {}
        self.incremental = bool(self.cut_ids) and self._split_is_exact()
        self.reused_tokens = 0  # ids taken from an earlier text instead of tokenized again (for reports)

    def _tokenize(
        self, text: str, base: int = 0, literal: tuple[int, ...] = (), spliced: tuple[Splice, ...] = ()
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """`text` (the part of a whole text from character `base` on) tokenized; `literal` and `spliced` as
        the whole text's (engine/prompts/literal.py, engine/prompts/sampled.py)."""
        return tokenize_spliced(
            self.tokenizer,
            text,
            [p - base for p in literal if p >= base],
            base,
            [Splice(s.start - base, s.end - base, s.ids) for s in spliced if s.start >= base],
        )

    def _split_is_exact(self) -> bool:
        marker = self.tokenizer.convert_ids_to_tokens(min(self.cut_ids))
        probe = f"Hello world{marker}  next line\n {marker}\nend"
        cut = probe.index(marker) + len(marker)
        return self._tokenize(probe)[0] == self._tokenize(probe[:cut])[0] + self._tokenize(probe[cut:])[0]

    def _cuts(
        self, ids: list[int], offsets: list[tuple[int, int]], start: int, spliced: tuple[Splice, ...]
    ) -> list[tuple[int, int]]:
        """Where a later text may start tokenizing again: after each safe added token, never inside a
        splice."""
        return [
            (offsets[k][1], k + 1)
            for k in range(start, len(ids))
            if ids[k] in self.cut_ids and not any(s.start < offsets[k][1] < s.end for s in spliced)
        ]

    def encode(
        self,
        text: str,
        key: str = "",
        keep: bool = True,
        literal: tuple[int, ...] = (),
        spliced: tuple[Splice, ...] = (),
    ) -> TokenizedText:
        """The ids of `text` (exactly as one tokenizer call gives them, the control-token strings starting
        at `literal` tokenized as text, each of `spliced` given its ids) and their character offsets; kept
        as the key's last text unless `keep` is False (`remember` then keeps it, once it is wanted)."""
        prev = self.last.get(key) if self.incremental else None
        shared = common_prefix(prev.text, text) if prev is not None else 0
        if prev is not None and prev.literal != literal:  # reuse only what was tokenized the same way
            differ = set(prev.literal) ^ set(literal)
            shared = min(shared, min(differ))
        if prev is not None and prev.spliced != spliced:
            shared = min(shared, min(s.start for s in set(prev.spliced) ^ set(spliced)))
        at = bisect.bisect_right(prev.cuts, (shared, len(prev.ids) + 1)) if prev is not None else 0
        if prev is None or at == 0:
            ids, offsets = self._tokenize(text, 0, literal, spliced)
            cuts = self._cuts(ids, offsets, 0, spliced) if self.incremental else []
            out = TokenizedText(text, ids, offsets, cuts, literal, spliced)
        else:
            char, count = prev.cuts[at - 1]
            tail_ids, tail_offsets = self._tokenize(text[char:], char, literal, spliced)
            ids, offsets = prev.ids[:count] + tail_ids, prev.offsets[:count] + tail_offsets
            cuts = prev.cuts[:at] + self._cuts(ids, offsets, count, spliced)
            out = TokenizedText(text, ids, offsets, cuts, literal, spliced)
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
