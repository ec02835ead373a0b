"""The parts of assertion validation every URL scheme shares: the error collector, the walk
over an ``assertions`` list with its field names (``assertions.{i}``), numbers, and the
checks of a text target (length, NUL, an RE2 pattern), each with the same words.

A scheme's rules (:mod:`engine.monitors.requests`, ``stream_scheme``, ``dnsmonitors``,
``icmp_scheme``) keep what differs: their sources, comparisons and targets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from engine.probes.patterns import PatternRefused, check_regex

MAX_ASSERTIONS: Final = 20
MAX_TARGET: Final = 1024

Errors = dict[str, list[str]]
# One assertion's rules: (the raw assertion, its field path, errors) -> its stored form,
# or None when refused (the words are in errors).
AssertionRule = Callable[[Any, str, Errors], "dict[str, Any] | None"]


def fail(errors: Errors, field: str, message: str) -> None:
    """Add ``message`` to the words under ``field``."""
    errors.setdefault(field, []).append(message)


def walk(raw: Any, errors: Errors, rule: AssertionRule) -> list[dict[str, Any]]:
    """The stored form of an ``assertions`` list: ``rule`` applied to each item under
    ``assertions.{i}``, the refused ones left out; a list of at most
    :data:`MAX_ASSERTIONS` (else [] and the words under ``assertions``)."""
    if not isinstance(raw, list):
        fail(errors, "assertions", "The assertions field must be a list.")
        return []
    if len(raw) > MAX_ASSERTIONS:
        fail(errors, "assertions", f"At most {MAX_ASSERTIONS} assertions are allowed.")
        return []
    out = []
    for i, a in enumerate(raw):
        got = rule(a, f"assertions.{i}", errors)
        if got is not None:
            out.append(got)
    return out


def as_number(v: Any) -> float | None:
    """A finite number from a JSON number or its text; None for anything else (a
    boolean, NaN, an infinity, other text)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            return None
    if isinstance(v, int | float):
        try:
            f = float(v)
        except OverflowError:  # an int past a float's range
            return None
        return f if math.isfinite(f) else None
    return None


def stored_number(number: float) -> int | float:
    """A number as stored: whole numbers as int."""
    return int(number) if number == int(number) else number


def check_text(errors: Errors, field: str, target: str, *, pattern: bool = False) -> None:
    """A text target's rules, the first broken one's words under ``field``: at most
    :data:`MAX_TARGET` characters, no NUL, and with ``pattern`` a regular expression RE2
    accepts."""
    if len(target) > MAX_TARGET:
        fail(errors, field, f"The target may be at most {MAX_TARGET} characters.")
    elif "\0" in target:
        fail(errors, field, "The target may not contain NUL.")
    elif pattern:
        check_pattern(errors, field, target)


def check_pattern(errors: Errors, field: str, target: str) -> None:
    """Words under ``field`` when ``target`` is not a regular expression RE2 accepts."""
    try:
        check_regex(target)
    except PatternRefused as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fail(errors, field, f"Not a regular expression RE2 accepts: {text[:200].rstrip('.')}.")


__all__ = [
    "MAX_ASSERTIONS", "MAX_TARGET", "AssertionRule", "Errors", "as_number", "check_pattern",
    "check_text", "fail", "stored_number", "walk",
]
