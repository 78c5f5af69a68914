"""Rules by name: `local` always first, duplicates dropped, unknown names refused."""

from __future__ import annotations

import pytest

from engine.errors import TraceError
from engine.traces.providers.registry import ALL, HOSTED, rule_names


def test_rule_names() -> None:
    assert rule_names("openai, anthropic,openai") == ["local", "openai", "anthropic"]
    assert rule_names(ALL) == ["local", *HOSTED]
    with pytest.raises(TraceError, match="unknown cache rule 'azure'; choose from local,openai"):
        rule_names("local,azure")


@pytest.mark.parametrize("name", list(HOSTED))
def test_every_hosted_rule_is_named_as_registered(name: str) -> None:
    assert HOSTED[name]().name == name
