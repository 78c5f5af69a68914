"""KV storage and the prefix cache: the paged pool (`pool.KVCache`), one sequence's contiguous attention
context (`window.KVWindow`), what one forward step reads and writes (`step.StepContext`), which block holds
which tokens and which full blocks are reused by hash (`block_manager.BlockManager`), and a request's tokens
and block table (`sequence.SequenceState`)."""
