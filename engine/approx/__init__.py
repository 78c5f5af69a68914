"""Approximate K/V reuse, opt-in and labelled, never served as an exact hit: exact K/V of a prompt
(`snapshot`), prompts assembled from reused and computed runs in a private window (`assembly`), edit and
splice plans (`plans`) and their distance from the exact recompute (`fidelity`)."""
