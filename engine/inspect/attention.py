"""Attention probabilities from the engine's own queries and keys, for chosen layers, heads and query rows.

A plain causal forward from position 0 runs with the `observe` hook; in each chosen layer the hook
recomputes softmax(q·Kᵀ / sqrt(head_dim)) for the chosen rows only, query head h reading KV head
h // (heads // kv_heads), in float32. Nothing of size length × length is ever built unless every row is
asked for: a result costs 4 × layers × heads × rows × length bytes, and one that would exceed
`max_bytes` is refused before any compute. Generated tokens are just more positions: their rows are what
the decode steps computed, labelled by the "generated" region.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedTokenizerBase

from engine.errors import AttentionTooLargeError, InvalidArgumentError, PromptError
from engine.kv.step import StepContext
from engine.prompts.encoder import PromptEncoder
from engine.prompts.regions import Region, RenderedPrompt

if TYPE_CHECKING:
    from engine.model.decoder import Decoder

MAX_BYTES = 2**30  # default ceiling on one capture's result
CHUNK_BYTES = 2**28  # transient scores per step: query rows are processed in chunks of at most this size
WHITESPACE = str.maketrans({"\n": "\\n", "\t": "\\t", "\r": "\\r", " ": "␣"})

# Receives (layer, first row index, probs float32 [heads, chunk rows, length]) for consecutive row chunks.
RowSink = Callable[[int, int, torch.Tensor], None]


@dataclass
class AttentionMaps:
    probs: torch.Tensor  # float32 [layers, heads, rows, length]; 0 on keys after the row; rows sum to 1
    layers: list[int]
    heads: list[int]
    rows: list[int]  # absolute query positions
    tokens: list[str]  # a display label for every position 0..length-1
    regions: list[Region]  # cover 0..length in order; decoded tokens form the "generated" region
    token_ids: list[int]

    @property
    def region_labels(self) -> list[str]:
        """Distinct region labels in order of first appearance (a label may name several spans)."""
        return list(dict.fromkeys(r.label for r in self.regions))

    def region_shares(self) -> torch.Tensor:
        """[layers, heads, rows, len(region_labels)]: each row's attention mass per region label; sums 1."""
        labels = self.region_labels
        which = torch.empty(self.probs.shape[-1], dtype=torch.long)
        for r in self.regions:
            which[r.start : r.end] = labels.index(r.label)
        shares = self.probs.new_zeros(*self.probs.shape[:-1], len(labels))
        return shares.index_add_(-1, which, self.probs)

    def share(self, labels: Sequence[str]) -> torch.Tensor:
        """[layers, heads, rows]: the attention mass on the union of the given region labels; a label this
        prompt has no region of is refused by name, with the labels it has."""
        known = self.region_labels
        missing = [label for label in labels if label not in known]
        if missing:
            raise InvalidArgumentError(
                f"share: this prompt has no {', '.join(map(repr, missing))} region; its regions are "
                f"{', '.join(known)} (a message opening with <agent_status> is the status region)"
            )
        return self.region_shares()[..., [known.index(label) for label in labels]].sum(-1)


def attention_rows(
    model: Decoder,
    ids: torch.Tensor,
    layers: Sequence[int],
    heads: Sequence[int],
    rows: Sequence[int],
    sink: RowSink,
) -> None:
    """One causal forward over `ids`; each chosen layer's probabilities for `rows` go to `sink`, by chunks."""
    cfg = model.config
    wanted = set(layers)
    head = torch.tensor(list(heads), device=ids.device)
    kv_head = head // (cfg.num_heads // cfg.num_kv_heads)
    row = torch.tensor(list(rows), device=ids.device)
    length = ids.shape[0]
    step = max(1, CHUNK_BYTES // (4 * len(head) * length))
    scale = cfg.head_dim**-0.5
    keys = torch.arange(length, device=ids.device)

    def observe(layer: int, q: torch.Tensor, k: torch.Tensor) -> None:
        if layer not in wanted:
            return
        for first in range(0, len(row), step):
            r = row[first : first + step]
            scores = head_scores(q[r], k, head, kv_head, scale)  # [heads, rows, length]
            scores.masked_fill_(
                keys[None, None, :] > r[None, :, None], float("-inf")
            )  # causal: row r sees 0..r
            sink(layer, first, scores.softmax(-1).cpu())

    model(ids, StepContext.plain(len(ids), observe=observe))


def head_scores(
    q: torch.Tensor, k: torch.Tensor, heads: torch.Tensor, kv_head: torch.Tensor, scale: float
) -> torch.Tensor:
    """Float32 scaled scores `[heads, rows, keys]` of queries q `[rows, all heads, head_dim]` against keys
    k `[keys, kv_heads, head_dim]`: query head heads[i] reads KV head kv_head[i]. With every head chosen,
    query heads are grouped by their KV head (h = kv × group + j) and K is read in place, not gathered."""
    rows, all_heads, dim = q.shape
    kv_heads = k.shape[1]
    if heads.numel() == all_heads and bool((heads == torch.arange(all_heads, device=heads.device)).all()):
        group = all_heads // kv_heads
        grouped = q.float().view(rows, kv_heads, group, dim).permute(1, 2, 0, 3).reshape(kv_heads, -1, dim)
        scores = (grouped * scale) @ k.float().permute(1, 2, 0)  # [kv_heads, group × rows, keys]
        return scores.view(all_heads, rows, -1)
    keys = k[:, kv_head].float().transpose(0, 1)  # [heads, keys, head_dim]
    return (q[:, heads].float().transpose(0, 1) * scale) @ keys.transpose(1, 2)


def capture(
    model: Decoder,
    prompts: PromptEncoder,
    prompt: RenderedPrompt,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    rows: Sequence[int] | None = None,
    max_bytes: int = MAX_BYTES,
) -> AttentionMaps:
    """Attention of the chosen layers, heads and rows (None: all; negative indices count from the end)."""
    cfg, ids = model.config, prompt.token_ids
    prompts.check_context(len(ids), 0)
    layers = _indices("layer", layers, cfg.num_layers)
    heads = _indices("head", heads, cfg.num_heads)
    rows = _indices("row", rows, len(ids))
    need = 4 * len(layers) * len(heads) * len(rows) * len(ids)
    if need > max_bytes:
        raise AttentionTooLargeError(
            f"attention for {len(layers)} layers x {len(heads)} heads x {len(rows)} rows x {len(ids)} keys "
            "needs "
            f"{need / 2**30:.2f} GiB (float32), over the {max_bytes / 2**30:.2f} GiB limit; "
            f"ask for fewer layers, heads or rows (e.g. the last 64 rows)"
        )
    probs = torch.empty(len(layers), len(heads), len(rows), len(ids))
    slot = {layer: i for i, layer in enumerate(layers)}

    def keep(layer: int, first: int, p: torch.Tensor) -> None:
        probs[slot[layer], :, first : first + p.shape[1]] = p

    attention_rows(model, torch.tensor(ids, device=model.embed.device), layers, heads, rows, keep)
    tokens = token_labels(prompts.loaded_tokenizer, ids)
    return AttentionMaps(probs, layers, heads, rows, tokens, prompt.regions, list(ids))


def token_labels(tokenizer: PreTrainedTokenizerBase | None, ids: Sequence[int]) -> list[str]:
    """Readable one-line labels: special tokens by name, whitespace escaped (\\n, \\t, ␣ for a space), and
    a token holding only part of a multi-byte character shown as text with those bytes as <0xE4>."""
    if tokenizer is None:
        return [f"#{t}" for t in ids]
    special = set(tokenizer.all_special_ids)
    labels = []
    for t in ids:
        text = tokenizer.convert_ids_to_tokens(t) if t in special else tokenizer.decode([t])
        if "\ufffd" in text:  # a piece of a multi-byte character
            text = partial_utf8(tokenizer.convert_ids_to_tokens(t))
        labels.append(text.translate(WHITESPACE))
    return labels


def _byte_alphabet() -> dict[str, int]:
    """Byte-level BPE's alphabet (GPT-2, Qwen, SmolLM2): the printable character standing for each byte,
    mapped back to the byte. Printable Latin-1 bytes stand for themselves; the rest are shifted past 255."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    return {chr(b): b for b in kept} | {chr(256 + i): b for i, b in enumerate(shifted)}


BYTE_OF = _byte_alphabet()


def partial_utf8(token: str) -> str:
    """A byte-level token as text, each byte of an incomplete UTF-8 character written <0xNN> (`ä½` is the
    first two bytes of 你: <0xE4><0xBD>); a token in another alphabet is returned as it is."""
    if not all(c in BYTE_OF for c in token):
        return token
    text = bytes(BYTE_OF[c] for c in token).decode("utf-8", errors="surrogateescape")
    return "".join(f"<0x{ord(c) - 0xDC00:02X}>" if "\udc80" <= c <= "\udcff" else c for c in text)


def _indices(what: str, chosen: Sequence[int] | None, n: int) -> list[int]:
    if chosen is None:
        return list(range(n))
    bad = [i for i in chosen if not -n <= i < n]
    if bad:
        raise PromptError(f"{what} {bad[0]} is out of range: there are {n} {what}s (0..{n - 1})")
    if not chosen:
        raise PromptError(f"no {what}s chosen")
    return [i % n for i in chosen]
