"""The model math, written out: the config (`config`, what is refused in `config_checks`, `synthetic:` shapes
in `presets`), the building blocks (`layers`: RMSNorm, grouped-query attention, SwiGLU; `rotary`: RoPE;
`rope_scaling`: YaRN and Llama 3 scaling), one sequence's causal attention (`causal_attention`), the paged
attention backends over block tables (`attention`: torch, FlashInfer, flash-attn), the `Decoder`
(`decoder`) and next-token choice (`sampling`)."""
