"""An alternative eviction policy to compare with the engine's LRU: evict the cached block that the fewest
requests reused, the deepest (latest in its chain) of those first, and the least recently freed among
ties. Conversation tails that nobody came back to go first; shared system prompts and tool sections,
reused by every request, stay.
"""

from __future__ import annotations

import heapq

from engine.kv.block_manager import Block, BlockManager
from engine.kv.sequence import SequenceState


class FewestReusesBlockManager(BlockManager):
    def __init__(self, num_blocks: int, block_size: int, namespace: bytes) -> None:
        super().__init__(num_blocks, block_size, namespace)
        self.reuses: dict[int, int] = {}  # requests that were served the block since it was filled
        self.depth: dict[int, int] = {}  # the block's index in its sequence when it was published
        self.version: dict[int, int] = {}  # heap entries of an older version are stale
        self.heap: list[tuple[int, int, int, int]] = []  # (reuses, -depth, order, block) of freed blocks
        self.order = 0

    def _ref(self, block_id: int) -> None:
        super()._ref(block_id)
        self.reuses[block_id] = self.reuses.get(block_id, 0) + 1

    def publish(self, seq: SequenceState) -> None:
        first = len(seq.block_hashes)
        super().publish(seq)
        for i in range(first, len(seq.block_hashes)):
            self.depth[seq.block_table[i]] = i

    def _freed(self, block: Block) -> None:
        super()._freed(block)
        if block.hash is not None:
            self.version[block.id] = self.order
            entry = (self.reuses.get(block.id, 0), -self.depth.get(block.id, 0), self.order, block.id)
            heapq.heappush(self.heap, entry)
            self.order += 1

    def _victim(self) -> int:
        while True:
            _, _, order, b = heapq.heappop(self.heap)
            if b in self.cached and self.version[b] == order:
                self.reuses[b] = 0
                return b

    def reset(self) -> None:
        super().reset()
        self.heap.clear()
        self.reuses.clear()
