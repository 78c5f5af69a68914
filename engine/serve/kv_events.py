"""`--kv-events tcp://HOST:PORT`: the prefix cache's changes published as vLLM publishes its KV cache events,
so a router that indexes vLLM replicas by their events (llm-d's precise prefix scorer, NVIDIA Dynamo's KV
router) can index this server.

The wire format is vLLM's (vllm/distributed/kv_events.py, `ZmqEventPublisher`):
- a ZMQ PUB socket bound at the URL sends multipart messages `[topic, sequence, payload]`: the topic
  (`--kv-events-topic`, default empty), the batch's sequence number (8 bytes, big-endian, from 0), and
  the batch as msgpack: `[ts, events, data_parallel_rank]` (seconds since the epoch of its first event;
  rank 0);
- events are tagged arrays: `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
  lora_id, medium, lora_name]`, `["BlockRemoved", block_hashes, medium]`, `["AllBlocksCleared"]`; block
  hashes are 64-bit integers (the low 64 bits of the engine's 128-bit chain hash, as vLLM converts its
  own), the parent None for a chain's first block, lora_id and lora_name None, the medium "GPU" (vLLM's
  name for the engine's own KV pool, whatever the device);
- with `--kv-events-replay tcp://HOST:PORT`, a ROUTER socket there answers a request carrying a start
  sequence number (8 bytes, big-endian) with every buffered batch from it on (`[sequence, payload]`
  each, the last `REPLAY_BUFFER` batches are kept) and then `[-1 as 8 signed bytes, b""]`.

This module is the format (no ZMQ here: engine/serve/kv_publisher.py sends it): the block manager's
notifications as vLLM's events, and the index a subscriber rebuilds from them. A batch holds the events
queued since the previous one, in the order they happened; one `publish` of a sequence's blocks is one
`BlockStored` per run of chained blocks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MEDIUM = "GPU"


def external_hash(h: bytes) -> int:
    """A block hash as vLLM sends it to subscribers: its low 64 bits, an unsigned integer."""
    return int.from_bytes(h, "big") & ((1 << 64) - 1)


def encode_events(items: list[tuple[str, list]], block_size: int) -> list[list[Any]]:
    """The block manager's notifications (`(kind, items)`, in order) as vLLM's tagged event arrays."""
    out: list[list[Any]] = []
    for kind, blocks in items:
        if kind == "cleared":
            out.append(["AllBlocksCleared"])
        elif kind == "removed":
            hashes = [external_hash(h) for h in blocks]
            if out and out[-1][0] == "BlockRemoved":
                out[-1][1].extend(hashes)
            else:
                out.append(["BlockRemoved", hashes, MEDIUM])
        else:
            for h, parent, tokens in blocks:
                last = out[-1] if out else None
                if (
                    last
                    and last[0] == "BlockStored"
                    and parent is not None
                    and last[1][-1] == external_hash(parent)
                ):
                    last[1].append(external_hash(h))
                    last[3].extend(tokens)
                else:
                    up = None if parent is None else external_hash(parent)
                    out.append(
                        ["BlockStored", [external_hash(h)], up, list(tokens), block_size, None, MEDIUM, None]
                    )
    return out


class BlockIndex:
    """What a subscriber rebuilds from the events: every block a replica can serve, by hash, with its
    parent and token ids (as llm-d's and Dynamo's indexers keep them)."""

    def __init__(self) -> None:
        self.blocks: dict[int, tuple[int | None, tuple[int, ...]]] = {}

    def apply(self, event: list[Any]) -> None:
        tag = event[0]
        if tag == "AllBlocksCleared":
            self.blocks.clear()
        elif tag == "BlockRemoved":
            for h in event[1]:
                self.blocks.pop(h, None)
        elif tag == "BlockStored":
            hashes, parent, tokens, size = event[1], event[2], event[3], event[4]
            for i, h in enumerate(hashes):
                self.blocks[h] = (parent, tuple(tokens[i * size : (i + 1) * size]))
                parent = h
        else:
            raise ValueError(f"unknown KV event {tag!r}")


def served_index(
    entries: Iterable[tuple[bytes, bytes, tuple[int, ...]]], roots: set[bytes]
) -> dict[int, tuple[int | None, tuple[int, ...]]]:
    """The engine's cached blocks (`Engine.cache_index`) as `BlockIndex.blocks` holds them: a parent that is
    one of `roots` (the chains' starts, one per served model name) is None."""
    return {
        external_hash(h): (None if parent in roots else external_hash(parent), tokens)
        for h, parent, tokens in entries
    }
