"""Every error a user can cause, as one typed exception with a one-line message.

The command-line entry points catch `EngineError` and print its message; anything else is a bug.
"""

from __future__ import annotations


class EngineError(Exception):
    """Base class: a problem with the user's input or environment, explained in one line."""


class ModelNotFoundError(EngineError):
    """The model string names nothing that can be loaded here."""


class UnsupportedModelError(EngineError):
    """The model exists but its architecture or a feature of its config is not implemented."""


class WeightsError(EngineError):
    """Weight files are corrupt, truncated, missing tensors, or the wrong shape."""


class TokenizerMissingError(EngineError):
    """A text API was called on a model loaded without tokenizer files."""


class DeviceError(EngineError):
    """Unknown, absent or unsupported device or dtype."""


class InvalidArgumentError(EngineError):
    """An argument of a public function or a command-line flag has the wrong type or is out of range."""


class PromptError(EngineError):
    """The prompt is empty or malformed."""


class ContextOverflowError(EngineError):
    """Prompt plus requested new tokens exceed the model's context; refused, never truncated."""


class CacheCapacityError(EngineError):
    """The KV cache cannot be made (no memory for it) or cannot hold a request even after evicting all it may."""


class NumericalError(EngineError):
    """The model produced NaN or infinite values at run time (weights are checked when loading)."""


class AttentionTooLargeError(EngineError):
    """An attention capture would need more memory than allowed."""


class CompactionError(EngineError):
    """A compaction dropped a durable line or cannot fit the context into its budget."""


class TraceError(EngineError):
    """A user-supplied trace file is unreadable or not in the expected format."""


class CacheFolderError(EngineError):
    """The user cache folder (`$KVTESTBED_CACHE`) cannot be written where a conversion must be stored."""


class OutputError(EngineError):
    """A results path cannot be written, or would overwrite what is there without --overwrite."""


class KVPlanError(EngineError):
    """An approximate K/V plan does not fit its prompt (wrong tokens, wrong length, nothing left to compute)."""


class EndpointError(EngineError):
    """An --endpoint URL that cannot be used, or a live server that cannot be identified or asked."""
