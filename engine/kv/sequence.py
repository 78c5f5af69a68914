"""`SequenceState`: one request's tokens and the KV blocks that hold them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SequenceState:
    """Token ids of a request (prompt, then generated tokens as they come) and their block table.

    Invariants:
    - positions [0, num_kv) have their K/V written in the blocks of `block_table`, in order;
    - `block_hashes[i]` is the chained hash of block i, known for the first len(block_hashes) full blocks;
    - at its latest admission the first `num_cached` tokens were served from the prefix cache (a multiple of
      the block size);
    - `num_written` counts the prompt's blocks this sequence published that no cached block held already.
    """

    token_ids: list[int]
    salt: str = ""
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[bytes] = field(default_factory=list)
    num_cached: int = 0
    num_kv: int = 0
    num_prompt: int = 0
    num_written: int = 0  # prompt tokens in full blocks this sequence entered in the prefix cache

    def __post_init__(self) -> None:
        self.num_prompt = len(self.token_ids)

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def generated(self) -> list[int]:
        return self.token_ids[self.num_prompt :]
