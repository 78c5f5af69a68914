"""How the bench commands drive the engine: conversations replayed turn by turn (`replayer`), approximate
plans scored against the exact recompute (`approx_runs`) and traces analysed without a model
(`trace_analysis`)."""
