"""vLLM's own code, read from its wheels without installing vLLM or torch: `vllm/distributed/kv_events.py`
(`KVEventBatch`, the decoder vLLM's examples/online_serving/kv_events_subscriber.py uses) and
`vllm/v1/core/kv_cache_utils.py` with `vllm/utils/hashing.py` (`hash_block_tokens`, `init_none_hash`), each
loaded by path from the wheel with only the vllm modules they import that pull in torch stubbed.

The wheels are those scripts/install_consumers.sh downloads into the user cache (`consumers/`); a test that
needs one skips, saying which, when it is not there.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import types
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine.loading.paths import cache_root

NEWEST, LEGACY = "0.34.0", "0.23.0"  # tagged maps; positional arrays (the last before maps)


def wheel(version: str) -> Path:
    """vLLM's wheel of `version`, or the test skips saying how to get it."""
    found = sorted((cache_root() / "consumers").glob(f"vllm-{version}-*.whl"))
    if not found:
        pytest.skip(
            f"vllm {version}'s wheel is not in {cache_root() / 'consumers'}: bash scripts/install_consumers.sh"
        )
    return found[-1]


def needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: bash scripts/install_consumers.sh")


class Stub(types.ModuleType):
    """A vllm module the loaded file imports but does not use at import time: any name is a new class."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {})
        setattr(self, name, value)
        return value


@contextmanager
def stubbed(real: dict[str, types.ModuleType]) -> Iterator[None]:
    """sys.modules with `real` and a Stub for every other vllm module imported meanwhile; restored after."""
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}

    class Finder:
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
            if name == "vllm" or name.startswith("vllm."):
                return importlib.util.spec_from_loader(name, self)  # type: ignore[arg-type]
            return None

        def create_module(self, spec: Any) -> types.ModuleType:
            module = Stub(spec.name)
            module.__path__ = []  # type: ignore[attr-defined]
            return module

        def exec_module(self, module: types.ModuleType) -> None:
            pass

    finder = Finder()
    sys.modules.update(real)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def load(whl: Path, member: str, name: str, into: Path) -> types.ModuleType:
    """Execute `member` of the wheel as module `name` (under the stubs in force)."""
    with zipfile.ZipFile(whl) as z:
        path = Path(z.extract(member, into))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def kv_events(version: str, into: Path) -> types.ModuleType:
    """vLLM's vllm/distributed/kv_events.py of `version` (its block hash type is `bytes | int`)."""
    needs("msgspec")
    whl = wheel(version)
    utils = Stub("vllm.v1.core.kv_cache_utils")
    utils.ExternalBlockHash = bytes | int  # type: ignore[attr-defined]
    logger = Stub("vllm.logger")
    logger.init_logger = logging.getLogger  # type: ignore[attr-defined]
    with stubbed({"vllm.v1.core.kv_cache_utils": utils, "vllm.logger": logger}):
        return load(whl, "vllm/distributed/kv_events.py", "vllm.distributed.kv_events", into)


def block_hashing(version: str, into: Path) -> tuple[types.ModuleType, types.ModuleType]:
    """vLLM's kv_cache_utils (hash_block_tokens, init_none_hash) and hashing (sha256, sha256_cbor)."""
    needs("cbor2")
    whl = wheel(version)
    envs = Stub("vllm.envs")
    logger = Stub("vllm.logger")
    logger.init_logger = logging.getLogger  # type: ignore[attr-defined]
    with stubbed({"vllm.envs": envs, "vllm.logger": logger}):
        hashing = load(whl, "vllm/utils/hashing.py", "vllm.utils.hashing", into)
        utils = load(whl, "vllm/v1/core/kv_cache_utils.py", "vllm.v1.core.kv_cache_utils", into)
    return utils, hashing
