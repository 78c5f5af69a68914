"""`StopMatcher`: stop strings found in text that arrives a piece at a time, in time linear in the text.

Each stop string runs a Knuth-Morris-Pratt automaton over the characters as they come: its state is the
longest prefix of the stop string that ends the text so far. A state equal to the string's length is a
match; the largest state over all strings is the tail that may still grow into one (held back from a
stream). Preparing a string costs O(its length) once; each new character costs amortised O(1) per string,
so a reply of n characters costs O(n x stop strings) in all, whatever the strings' lengths (bounded by
`engine.arguments.MAX_STOP_STRINGS` and `MAX_STOP_CHARS`).
"""

from __future__ import annotations


def failure_table(s: str) -> list[int]:
    """KMP's prefix function: entry i is the length of the longest proper prefix of s[: i + 1] that is also
    a suffix of it."""
    table, k = [0] * len(s), 0
    for i in range(1, len(s)):
        while k and s[i] != s[k]:
            k = table[k - 1]
        if s[i] == s[k]:
            k += 1
        table[i] = k
    return table


class StopMatcher:
    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.tables = [failure_table(s) for s in stops]
        self.states = [0] * len(stops)
        self.length = 0  # characters fed so far

    def feed(self, text: str) -> tuple[int, str] | None:
        """Consume the next characters; the earliest stop string that now occurs in the whole text fed, as
        (index where it starts, the string), ties to the smaller string, or None. Only the first
        occurrence of each string counts: feeding stops mattering once one is found."""
        hits = []
        for i, (stop, table) in enumerate(zip(self.stops, self.tables, strict=True)):
            state = self.states[i]
            for j, ch in enumerate(text):
                while state and stop[state] != ch:
                    state = table[state - 1]
                if stop[state] == ch:
                    state += 1
                if state == len(stop):
                    hits.append((self.length + j + 1 - len(stop), stop))
                    state = table[state - 1]
                    break
            self.states[i] = state
        self.length += len(text)
        return min(hits) if hits else None

    @property
    def partial(self) -> int:
        """How many characters at the end of the text could still become the start of a stop string."""
        return max(self.states, default=0)
