"""The benchmark suite: our engine against `transformers` on the same weights, device and dtype."""
