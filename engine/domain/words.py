"""Counts in English words, for messages and pages: "1 monitor", "2 monitors"."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``n`` and ``word`` (a regular noun) in English number: "1 day", "0 days", "2 days"."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
