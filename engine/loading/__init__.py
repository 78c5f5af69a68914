"""Model strings to weights and tokenizers: `sources` (folders, hub ids, GGUF files, aliases, synthetic
presets), `weights` (safetensors and synthetic readers, loading checked against the config), `gguf`
(GGUF converted once to safetensors), `tokenizer` (Hugging Face tokenizers, Qwen's BPE built offline) and
`paths` (the user cache folder). Nothing is ever unpickled."""
