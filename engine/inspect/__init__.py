"""Looking inside the model: attention probabilities from its own queries and keys (`attention`), attention
sink shares (`sinks`) and prefill FLOPs with the ideal cached/full ratio (`flops`)."""
