"""Prompts: chat messages and tools as users hand them in (`messages`), rendered with the model's chat
template (`chat`), encoded and checked against the model (`encoder`), and split into regions: system,
tools, each message, status bar, generated text (`regions`)."""
