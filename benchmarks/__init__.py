"""The benchmark suite: our engine against `transformers` on the same weights, device and dtype.

`engine` is imported first, before any benchmark loads torch, so the suite's OpenMP threads wait as a user's
do (engine/openmp.py)."""

import engine  # noqa: F401
