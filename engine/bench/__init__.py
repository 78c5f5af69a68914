"""Layout, replay, status-bar, compaction and attention-sink experiments run through the engine."""
