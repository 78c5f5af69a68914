"""`--kv-events tcp://HOST:PORT`: the prefix cache's changes published as vLLM publishes its KV cache events,
so a router that indexes vLLM replicas by their events (NVIDIA Dynamo's KV indexer and router, llm-d's
precise prefix scorer, vLLM's own `KVEventBatch` decoder) can index this server.

The wire format is vLLM's (vllm/distributed/kv_events.py, `ZmqEventPublisher`; engine/serve/kv_publisher.py
sends it): a batch is the msgpack array `[ts, events, data_parallel_rank]` (seconds since the epoch of its
first event; rank 0); its events are
- `--kv-events-format vllm` (the default; vLLM 0.24 and later, checked against 0.34): tagged maps,
  `{"type": "BlockStored", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
  "medium", "lora_name", "extra_keys", "group_idx"}`, `{"type": "BlockRemoved", "block_hashes", "medium",
  "group_idx"}`, `{"type": "AllBlocksCleared"}`;
- `vllm-array` (vLLM 0.23 and earlier): the same fields as positional arrays after the tag.

Block hashes are 64-bit integers (the low 64 bits of the block's hash, as vLLM converts its own), the parent
None for a chain's first block, `lora_id`/`lora_name` None, `medium` "GPU" (vLLM's name for the engine's own
KV pool, whatever the device), `group_idx` 0, and `extra_keys` one entry per block as vLLM publishes them:
`[cache_salt]` on a chain's first block when its namespace has a salt (every served model name but the first,
and every client under --isolate-cache), else None. A batch holds the events queued since the previous one,
in the order they happened; one `publish` of a sequence's blocks is one `BlockStored` per run of chained blocks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MEDIUM = "GPU"
GROUP = 0  # the KV cache group: one, every layer full attention
FORMATS = ("vllm", "vllm-array")
# vLLM's field order (array_like: positional; vllm/distributed/kv_events.py), after the tag
FIELDS = {
    "BlockStored": (
        "block_hashes",
        "parent_block_hash",
        "token_ids",
        "block_size",
        "lora_id",
        "medium",
        "lora_name",
        "extra_keys",
        "group_idx",
    ),
    "BlockRemoved": ("block_hashes", "medium", "group_idx"),
    "AllBlocksCleared": (),
}


def external_hash(h: bytes) -> int:
    """A block hash as vLLM sends it to subscribers: its low 64 bits, an unsigned integer."""
    return int.from_bytes(h, "big") & ((1 << 64) - 1)


def encode_events(items: list[tuple[str, list]], block_size: int, fmt: str = "vllm") -> list[Any]:
    """The block manager's notifications (`(kind, items)`, in order) as vLLM's events: tagged maps
    (`fmt="vllm"`), or tagged arrays (`"vllm-array"`, vLLM 0.23 and earlier)."""
    out: list[dict[str, Any]] = []
    for kind, blocks in items:
        if kind == "cleared":
            out.append({"type": "AllBlocksCleared"})
        elif kind == "removed":
            hashes = [external_hash(h) for h in blocks]
            if out and out[-1]["type"] == "BlockRemoved":
                out[-1]["block_hashes"].extend(hashes)
            else:
                out.append(
                    {"type": "BlockRemoved", "block_hashes": hashes, "medium": MEDIUM, "group_idx": GROUP}
                )
        else:
            for h, parent, tokens, salt in blocks:
                last = out[-1] if out else None
                extra = None if salt is None else (salt,)
                if (
                    last
                    and last["type"] == "BlockStored"
                    and parent is not None
                    and last["block_hashes"][-1] == external_hash(parent)
                ):
                    last["block_hashes"].append(external_hash(h))
                    last["token_ids"].extend(tokens)
                    last["extra_keys"].append(extra)
                else:
                    out.append(
                        {
                            "type": "BlockStored",
                            "block_hashes": [external_hash(h)],
                            "parent_block_hash": None if parent is None else external_hash(parent),
                            "token_ids": list(tokens),
                            "block_size": block_size,
                            "lora_id": None,
                            "medium": MEDIUM,
                            "lora_name": None,
                            "extra_keys": [extra],
                            "group_idx": GROUP,
                        }
                    )
    if fmt == "vllm-array":
        return [[e["type"], *(e[f] for f in FIELDS[e["type"]])] for e in out]
    return out


def as_map(event: Any) -> dict[str, Any]:
    """An event in either format as a map (an array's missing trailing fields None)."""
    if isinstance(event, dict):
        return event
    tag, values = event[0], list(event[1:])
    names = FIELDS.get(tag)
    if names is None:
        raise ValueError(f"unknown KV event {tag!r}")
    values = values[: len(names)] + [None] * (len(names) - len(values))
    return {"type": tag, **dict(zip(names, values, strict=True))}


class BlockIndex:
    """What a subscriber rebuilds from the events: every block a replica can serve, by hash, with its
    parent and token ids (as llm-d's and Dynamo's indexers keep them), and the cache salt published on a
    chain's first block."""

    def __init__(self) -> None:
        self.blocks: dict[int, tuple[int | None, tuple[int, ...]]] = {}
        self.salts: dict[int, str] = {}

    def apply(self, event: Any) -> None:
        e = as_map(event)
        tag = e["type"]
        if tag == "AllBlocksCleared":
            self.blocks.clear()
            self.salts.clear()
        elif tag == "BlockRemoved":
            for h in e["block_hashes"]:
                self.blocks.pop(h, None)
                self.salts.pop(h, None)
        elif tag == "BlockStored":
            parent, tokens, size = e["parent_block_hash"], e["token_ids"], e["block_size"]
            extra = e.get("extra_keys") or [None] * len(e["block_hashes"])
            for i, (h, keys) in enumerate(zip(e["block_hashes"], extra, strict=True)):
                self.blocks[h] = (parent, tuple(tokens[i * size : (i + 1) * size]))
                if keys:
                    self.salts[h] = keys[0]
                parent = h
        else:
            raise ValueError(f"unknown KV event {tag!r}")


def served_index(
    entries: Iterable[tuple[bytes, bytes | None, tuple[int, ...]]],
) -> dict[int, tuple[int | None, tuple[int, ...]]]:
    """The engine's cached blocks (`Engine.cache_index`) as `BlockIndex.blocks` holds them."""
    return {
        external_hash(h): (None if parent is None else external_hash(parent), tokens)
        for h, parent, tokens in entries
    }
