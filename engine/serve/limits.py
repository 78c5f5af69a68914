"""How much a client may send, and how slowly, before the server refuses it: the defaults and bounds of
`python -m engine.serve`'s `--max-body-mb` and `--body-timeout-s` (and of `build_state`)."""

from __future__ import annotations

MAX_BODY_MB = 32  # a larger request body is refused (413)
BODY_TIMEOUT_S = 30.0  # a request body with no bytes for this long is refused (408)
BODY_TIMEOUT_MAX_S = (
    3600.0  # the longest wait --body-timeout-s may set: a silent client holds no connection longer
)
