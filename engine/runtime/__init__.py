"""The request runtime: `Engine` (`engine`: a request's lifecycle: admit, prefill, decode, release),
`ModelRunner` (`runner`: the one chunked-prefill routine and the one decode loop), what a request returns
(`outputs`), `load()` (`loader`) and what every result records about model and machine (`identity`)."""
