"""The test suite. `engine` is imported before any test module or fixture loads torch, so torch's OpenMP
threads wait passively in the tests too (engine/openmp.py): CI runners are busy machines."""

import engine  # noqa: F401
