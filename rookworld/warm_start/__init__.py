"""Warm-start rounds: one command continues the shipped warm start on new self-play positions within one
time-limited GPU job and ships the result only when a paired test says it is better (docs/warm-start.md)."""
