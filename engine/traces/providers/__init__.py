"""What each prompt cache would serve for a request: the hosted providers' documented rules (OpenAI,
Anthropic, DeepSeek, Gemini), each a small dated table with its source, and the local engine's own."""
