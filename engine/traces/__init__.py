"""Agent traces: what an agent sent, read from request bodies (OpenAI Chat Completions `openai_chat`, OpenAI
Responses `responses`, Anthropic Messages `anthropic_messages`) or from the files harnesses, proxies and
tracers write (`claude_code`, `codex`, `proxy_capture`, `otel`) into one normalized request (`request`, with
the provider's recorded usage, `usage`; its chat messages validated by `engine.prompts.messages`); what the
engine's prefix cache does with them without a model (`analysis`), what hosted prompt caches would have served
(`providers`), where each miss came from (`miss_reasons`) and how the predictions agree with what was recorded
(`agreement`); hash-id traces without text (`mooncake`, `hash_replay`)."""
