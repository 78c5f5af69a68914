"""`bench doctor`: what breaks a trace's prefix (spans, causes), the rewrite for each cause, and its gain."""
