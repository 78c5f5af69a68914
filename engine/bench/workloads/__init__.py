"""What the bench commands replay and how it is laid out: scenarios, conversations, layouts, compaction
policies, cost models."""
