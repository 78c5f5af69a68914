"""The sink experiment's prompts: built-in ones (a one-line question, a multi-turn chat, a long document) or
the user's own files, each run with and without a leading special token."""

from __future__ import annotations

import json
from pathlib import Path
from pydoc_data.topics import topics
from typing import TYPE_CHECKING

from engine.errors import PromptError
from engine.prompts.chat import Message

if TYPE_CHECKING:
    from engine.runtime.engine import Engine

PROMPTS: dict[str, list[Message]] = {
    "fixed": [{"role": "user", "content": "What is the capital of France?"}],
    "chat": [
        {
            "role": "system",
            "content": "You are a patient cooking assistant. Answer in short, practical steps "
            "and mention food safety when it matters.",
        },
        {"role": "user", "content": "I have leftover rice from yesterday. Can I make fried rice with it?"},
        {
            "role": "assistant",
            "content": "Yes: day-old rice is ideal because it is drier. Keep it refrigerated "
            "until you cook, break up the clumps, and fry it in a very hot pan with "
            "a little oil so the grains stay separate.",
        },
        {
            "role": "user",
            "content": "What should I add? I have eggs, frozen peas, a carrot, soy sauce and "
            "some spring onions.",
        },
        {
            "role": "assistant",
            "content": "Dice the carrot small and fry it first for two minutes, add the peas, "
            "push everything aside and scramble two eggs, then add the rice and "
            "soy sauce. Finish with sliced spring onions.",
        },
        {
            "role": "user",
            "content": "How long can I keep the leftovers, and is it safe to reheat them twice?",
        },
    ],
    "document": [
        {
            "role": "user",
            "content": "Summarise this section of the Python reference in three "
            "sentences.\n\n" + topics["execmodel"],
        }
    ],
}


def load_prompt(engine: Engine, spec: str) -> list[int]:
    """A built-in prompt name, a .json file of chat messages, or a .txt file of raw text."""
    if spec in PROMPTS:
        return engine.render(PROMPTS[spec])
    path = Path(spec)
    if path.suffix not in (".json", ".txt"):
        raise PromptError(
            f"--prompts: {spec!r} is neither a built-in ({', '.join(PROMPTS)}) nor a .json/.txt file"
        )
    if not path.is_file():
        raise PromptError(f"--prompts: {path} does not exist")
    if path.suffix == ".txt":
        return engine.prompt_ids(path.read_text())
    try:
        return engine.prompt_ids(json.loads(path.read_text()))
    except json.JSONDecodeError as e:
        raise PromptError(f"--prompts: {path} is not valid JSON ({e})") from None


def variants(engine: Engine, ids: list[int]) -> dict[str, list[int]]:
    """The prompt with its leading special token(s), and without them; BOS is prepended to a prompt with
    none."""
    special = set(engine.tokenizer.all_special_ids)
    bare = list(ids)
    while bare and bare[0] in special:
        bare.pop(0)
    bos = engine.tokenizer.bos_token_id
    lead = ids if ids[0] in special else [bos, *ids] if bos is not None else None
    return ({"leading special": lead} if lead else {}) | {"no leading special": bare}
