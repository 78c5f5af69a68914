"""An alternative eviction policy to compare with the engine's LRU: evict the cached block that the fewest
requests reused, the deepest (latest in its chain) of those first, and the least recently freed among
ties. Conversation tails that nobody came back to go first; shared system prompts and tool sections,
reused by every request, stay.
"""

from __future__ import annotations

import heapq

from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState


class FewestReusesBlockManager(BlockManager):
    def __init__(self, num_blocks: int, block_size: int, namespace: bytes) -> None:
        super().__init__(num_blocks, block_size, namespace)
        self.reuses = [0] * num_blocks  # requests that were served the block since it was filled
        self.depth = [0] * num_blocks  # the block's index in its sequence when it was published
        self.version = [0] * num_blocks  # heap entries of an older version are stale
        self.heap: list[tuple[int, int, int, int]] = []  # (reuses, -depth, order, block) of freed blocks
        self.order = 0

    def _ref(self, block_id: int) -> None:
        super()._ref(block_id)
        self.reuses[block_id] += 1

    def publish(self, seq: SequenceState) -> None:
        first = len(seq.block_hashes)
        super().publish(seq)
        for i in range(first, len(seq.block_hashes)):
            self.depth[seq.block_table[i]] = i

    def release(self, seq: SequenceState) -> None:
        held = list(seq.block_table)
        super().release(seq)
        for b in held:
            if self.blocks[b].ref_count == 0 and self.blocks[b].hash is not None:
                self.version[b] = self.order
                heapq.heappush(self.heap, (self.reuses[b], -self.depth[b], self.order, b))
                self.order += 1

    def _take_free(self) -> int:
        first = next(iter(self.free))
        if self.blocks[first].hash is None:  # empty blocks (never filled, or left unhashed) go first
            return super()._take_free()
        while True:
            _, _, order, b = heapq.heappop(self.heap)
            if b in self.free and self.version[b] == order:
                del self.free[b]
                self.reuses[b] = 0
                return b

    def reset(self) -> None:
        super().reset()
        self.heap.clear()
        self.reuses = [0] * self.num_blocks
