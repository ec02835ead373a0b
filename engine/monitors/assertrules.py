"""The parts of assertion validation every URL scheme shares: the error collector, the walk
over an ``assertions`` list with its field names (``assertions.{i}``), an assertion's start
(an object, a known source), the rules of the schemes whose sources each take their own
comparisons and no property (:class:`BySource`), numbers, and the checks of a text target
(length, NUL, an RE2 pattern), each with the same words.

A scheme's rules (:mod:`engine.monitors.requests`, ``stream_scheme``, ``dnsmonitors``,
``icmp_scheme``) keep what differs: their sources, comparisons and targets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from engine.probes.patterns import PatternRefused, check_regex

MAX_ASSERTIONS: Final = 20
MAX_TARGET: Final = 1024

Errors = dict[str, list[str]]
# One assertion's rules: (the raw assertion, its field path, errors) -> its stored form,
# or None when refused (the words are in errors).
AssertionRule = Callable[[Any, str, Errors], "dict[str, Any] | None"]
# A target's own rules, once it is given and its comparison takes one: (source, comparison,
# target, its field path, errors) -> the target as stored; a refusal's words go to errors.
TargetRule = Callable[[str, str, Any, str, Errors], Any]


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


def source_of(
    a: Any, at: str, errors: Errors, sources: Sequence[str], refused: str
) -> str | None:
    """The source of the assertion ``a`` at ``at``: how every scheme's rules start. None,
    the words in ``errors``, when ``a`` is not an object or its source is not one of
    ``sources`` (the words ``refused``, then the list of them)."""
    if not isinstance(a, dict):
        fail(errors, at, "An assertion must be an object.")
        return None
    source = a.get("source")
    if source not in sources:
        fail(errors, f"{at}.source", refused + ", ".join(sources) + ".")
        return None
    return source


@dataclass(frozen=True, slots=True)
class BySource:
    """The rules of a scheme whose assertions' sources each take their own comparisons and no
    property (tcp and its kin, dns://), as an :data:`AssertionRule` for :func:`walk`: a
    source (:func:`source_of`), a comparison of ``comparisons[source]``, no property, and a
    target unless the comparison is one of ``no_target`` (stored as None then), which
    ``target`` checks and stores. Stored as ``{"source", "property": None, "comparison",
    "target"}``; None when refused."""

    sources: Sequence[str]
    refused: str
    comparisons: Mapping[str, Sequence[str]]
    no_target: Collection[str]
    target: TargetRule

    def __call__(self, a: Any, at: str, errors: Errors) -> dict[str, Any] | None:
        source = source_of(a, at, errors, self.sources, self.refused)
        if source is None:
            return None
        n = len(errors)
        comparison = a.get("comparison")
        allowed = self.comparisons[source]
        if comparison not in allowed:
            fail(errors, f"{at}.comparison",
                 f"A {source} assertion's comparison must be one of " + ", ".join(allowed) + ".")
            return None
        if a.get("property") not in (None, ""):
            fail(errors, f"{at}.property", f"A {source} assertion takes no property.")
        target = a.get("target")
        if comparison in self.no_target:
            target = None
        elif target is None:
            fail(errors, f"{at}.target", f"The {comparison} comparison needs a target.")
        else:
            target = self.target(source, comparison, target, f"{at}.target", errors)
        if len(errors) != n:
            return None
        return {"source": source, "property": None, "comparison": comparison, "target": target}


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


def not_negative(errors: Errors, field: str, target: Any, refused: str) -> Any:
    """``target`` as a stored number when it is a number, 0 or more (:func:`as_number`);
    else the words ``refused`` under ``field``, and ``target`` as it was."""
    number = as_number(target)
    if number is None or number < 0:
        fail(errors, field, refused)
        return target
    return stored_number(number)


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
    "MAX_ASSERTIONS", "MAX_TARGET", "AssertionRule", "BySource", "Errors", "TargetRule",
    "as_number", "check_pattern", "check_text", "fail", "not_negative", "source_of",
    "stored_number", "walk",
]
