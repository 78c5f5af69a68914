"""The red-team harness: the hostile inputs of the bad-input rounds, each case a test that fails while the
case is not a clear error or the right answer in bounded time and memory. `test_serve_*.py`: the server
(`python -m engine.serve`'s app, in process: conftest.py, hostile.py); `test_cli_*.py`: the commands and
scripts. Run it alone with `python -m pytest tests/redteam`."""
