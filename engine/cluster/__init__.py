"""Many replicas behind a router: the prefix cache and the clock of each, simulated from a trace (`bench
cluster`)."""
