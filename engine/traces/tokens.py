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


@dataclass
class TokenizedText:
    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]  # (char start, char end) of every token in `text`
    cuts: list[tuple[int, int]]  # (char end, token count) right after every safe added token, ascending


class IncrementalEncoder:
    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        added = tokenizer.added_tokens_decoder.items()
        self.cut_ids = {i for i, t in added if not (t.lstrip or t.rstrip or t.single_word or t.normalized)}
        self.last: dict[str, TokenizedText] = {}
        self.incremental = bool(self.cut_ids) and self._split_is_exact()
        self.reused_tokens = 0  # ids taken from an earlier text instead of tokenized again (for reports)

    def _tokenize(self, text: str, base: int = 0) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), [(s + base, e + base) for s, e in enc["offset_mapping"]]

    def _split_is_exact(self) -> bool:
        marker = self.tokenizer.convert_ids_to_tokens(min(self.cut_ids))
        probe = f"Hello world{marker}  next line\n {marker}\nend"
        cut = probe.index(marker) + len(marker)
        return self._tokenize(probe)[0] == self._tokenize(probe[:cut])[0] + self._tokenize(probe[cut:])[0]

    def _cuts(self, ids: list[int], offsets: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
        return [(offsets[k][1], k + 1) for k in range(start, len(ids)) if ids[k] in self.cut_ids]

    def encode(self, text: str, key: str = "", keep: bool = True) -> TokenizedText:
        """The ids of `text` (exactly as one tokenizer call gives them) and their character offsets; kept as
        the key's last text unless `keep` is False (`remember` then keeps it, once it is wanted)."""
        prev = self.last.get(key) if self.incremental else None
        shared = common_prefix(prev.text, text) if prev is not None else 0
        at = bisect.bisect_right(prev.cuts, (shared, len(prev.ids) + 1)) if prev is not None else 0
        if prev is None or at == 0:
            ids, offsets = self._tokenize(text)
            out = TokenizedText(text, ids, offsets, self._cuts(ids, offsets, 0) if self.incremental else [])
        else:
            char, count = prev.cuts[at - 1]
            tail_ids, tail_offsets = self._tokenize(text[char:], base=char)
            ids, offsets = prev.ids[:count] + tail_ids, prev.offsets[:count] + tail_offsets
            out = TokenizedText(text, ids, offsets, prev.cuts[:at] + self._cuts(ids, offsets, count))
            self.reused_tokens += count
        if keep:
            self.remember(key, out)
        return out

    def remember(self, key: str, tokenized: TokenizedText) -> None:
        """Make `tokenized` the key's last text: the next text of the key reuses its ids."""
        self.last[key] = tokenized
