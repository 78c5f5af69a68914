"""`python -m engine.generate --model M --prompt "..."`: stream an answer, then print usage and timing."""

from __future__ import annotations

import argparse
import sys

from engine.arguments import SEED_MAX, float_flag, int_flag
from engine.cli import add_model_args, docs_link, engine_options, run
from engine.errors import PromptError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.generate", description=__doc__, epilog=docs_link("python-api.md")
    )
    add_model_args(parser)
    parser.add_argument("--prompt", required=True, help="the user message")
    parser.add_argument(
        "--system",
        default=None,
        help="a system message (default none: the chat template's own default, if it has one)",
    )
    parser.add_argument(
        "--raw", action="store_true", help="send the prompt as raw text, without the chat template"
    )
    parser.add_argument("--max-new-tokens", type=int_flag(1), default=128)
    parser.add_argument("--temperature", type=float_flag(0.0), default=0.0)
    parser.add_argument("--top-p", type=float_flag(positive=True, maximum=1.0), default=1.0)
    parser.add_argument("--seed", type=int_flag(0, SEED_MAX), default=None)
    args = parser.parse_args(argv)
    if not args.prompt.strip():
        raise PromptError("empty prompt: --prompt has no text")

    from engine.runtime.loader import load  # after the flags: --help loads no torch

    engine = load(args.model, args.device, args.dtype, **engine_options(args))
    if engine.source.synthetic:
        print(
            f"[{args.model}: synthetic random weights; the text below is meaningless, the timings are real]",
            file=sys.stderr,
        )
    # --system "" is an empty system message, not none (which templates replace with a default one)
    messages = ([] if args.system is None else [{"role": "system", "content": args.system}]) + [
        {"role": "user", "content": args.prompt}
    ]
    prompt = args.prompt if args.raw else messages
    gen = engine.generate(
        prompt,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        on_token=lambda s: print(s, end="", flush=True),
    )
    u, t = gen.usage, gen.timing
    print(
        f"\n---\n{engine.info['model']} ({engine.info['dtype']}, {engine.info['device']}): "
        f"prompt {u.prompt_tokens} tokens, completion {u.completion_tokens} ({gen.finish_reason}), "
        f"TTFT {t.ttft_s * 1000:.1f} ms (arrival to first token; before it: template "
        f"{t.render_s * 1000:.1f} ms, tokenizer {t.tokenize_s * 1000:.1f} ms), "
        f"decode {t.decode_tokens_per_s:.1f} tokens/s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    run(main)
