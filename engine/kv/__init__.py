"""KV storage and the prefix cache: the paged pool (`pool.KVCache`) and its slot arithmetic (`slots`), what one
forward step reads and writes and the attention seam over block tables (`step`), which block holds which tokens
and which full blocks are reused by hash (`block_manager.BlockManager`), a request's tokens and block table
(`sequence.SequenceState`), and the private contiguous context of the approximate experiments
(`window.KVWindow`)."""
