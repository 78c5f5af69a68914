"""Agent traces: reading what an agent sent (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages)
into one normalized request type, and what hosted prompt caches would have served for it."""
