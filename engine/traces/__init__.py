"""Agent traces: what an agent sent, read from OpenAI Chat Completions (`openai_chat`), OpenAI Responses
(`responses`) or Anthropic Messages (`anthropic_messages`) into one normalized request (`request`; its chat
messages validated by `engine.prompts.messages`); what the engine's prefix cache does with them without a model
(`analysis`); and what hosted prompt caches would have served (`providers`)."""
