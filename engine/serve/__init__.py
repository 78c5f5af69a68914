"""`python -m engine.serve`: an OpenAI- and Anthropic-compatible HTTP server over one `Engine`, answering every
request with what the prefix cache did for it (the `kvtestbed` extension object), recording a replayable trace,
and showing requests on a live page and in Prometheus metrics. See docs/serve.md."""
