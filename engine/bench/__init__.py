"""Experiments run through the engine: `flags/` (each `python -m engine.bench <command>`'s description and
flags, loading no torch), `commands/` (the same names: each command's run, imported once its flags are
parsed), `workloads/` (what is replayed and how it is laid out), `harness/` (how runs drive the engine),
`reporting/` (statistics, results folders, reports and plots) and `args` (the default-model rule, the engine
and traces a command runs on)."""
