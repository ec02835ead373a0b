"""Regular expressions (RE2) for the assertions of :mod:`engine.probes.request` and the
``match()``/``search()`` of their JSONPaths (:mod:`engine.probes.jsonpaths`), with a bounded
compile.

RE2 builds a program of instructions from a pattern; what it costs is in that program, not
in the pattern's length (``\\p{L}{1000}``, 11 characters, is a million instructions). A
pattern is refused when its program would exceed what :data:`MAX_PROGRAM_MEMORY` holds
(about seven thousand instructions: ``\\p{L}{6}`` passes, ``\\p{L}{7}`` does not), and RE2
stops building as soon as it does, so a compile, accepted or refused, takes a few
milliseconds at most. Results, refusals included, are kept in a bounded LRU cache: the same
pattern sent again costs nothing.

Probes search with the same program and RE2's default memory for its DFA
(:func:`compile_regex`); the limit applies where patterns are accepted
(:func:`regex_or_refusal`, :func:`check_regex`).

Not compiled with mypyc (see ``engine/probes/jsonpaths.py``, which subclasses library
classes and imports this module).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from typing import Any, Final

import re2

# RE2's max_mem while accepting a pattern: two thirds of it go to the program.
MAX_PROGRAM_MEMORY: Final = 128 << 10
CACHE_SIZE: Final = 4096


class PatternRefused(ValueError):
    """A pattern RE2 does not accept under the limit; ``str()`` says why."""


def _options(max_mem: int | None) -> Any:
    options = re2.Options()
    # The C++ library would also log a refusal to stderr; the caller reports it.
    options.log_errors = False
    if max_mem is not None:
        options.max_mem = max_mem
    return options


_ACCEPT: Final = _options(MAX_PROGRAM_MEMORY)
_RUN: Final = _options(None)


def _words(exc: Exception) -> str:
    text = str(exc)
    if text.startswith(("b'", 'b"')):
        text = text[2:-1]
    if "pattern too large" in text:
        return ("the pattern is too large once compiled (RE2 program over "
                f"{MAX_PROGRAM_MEMORY >> 10} KiB; counted repetitions of Unicode classes,"
                " like \\p{L}{50}, grow fastest)")
    return text.splitlines()[0][:200] if text else type(exc).__name__


class TooManyPatterns(Exception):
    """More compiling of new patterns (regexes and JSONPaths not in the cache) than the
    :func:`allowance` in force lets one request do."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} units of pattern compiling")
        self.limit = limit


# The allowance in force in this context: [compiles left, the limit], or None: no limit.
_ALLOWANCE: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "pattern_allowance", default=None)


@contextlib.contextmanager
def allowance(limit: int) -> Iterator[None]:
    """Within the block, compiles may spend at most ``limit`` units (a JSONPath or a small
    regex 1, a large regex up to about 30; cached patterns are free); going over raises
    :class:`TooManyPatterns`. For a bulk request, so that its validation is bounded."""
    token = _ALLOWANCE.set([limit, limit])
    try:
        yield
    finally:
        _ALLOWANCE.reset(token)


class CompileWanted(Exception):
    """A new pattern (not in the cache) would be compiled inside :func:`cached_only`."""


# True while only cached patterns may be used (validation on the event loop).
_CACHED_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "patterns_cached_only", default=False)


@contextlib.contextmanager
def cached_only() -> Iterator[None]:
    """Within the block, a pattern not in the cache raises :class:`CompileWanted` before
    any compiling; cached ones (accepted or refused) answer as always. For work on the event
    loop that must stay cheap: the caller redoes it where compiling may take its time."""
    token = _CACHED_ONLY.set(True)
    try:
        yield
    finally:
        _CACHED_ONLY.reset(token)


def compiling() -> None:
    """Called first by a cached compile on a cache miss; raises inside :func:`cached_only`."""
    if _CACHED_ONLY.get():
        raise CompileWanted


def spend(units: int = 1) -> None:
    """Count a compile against the allowance in force (see :func:`allowance`)."""
    left = _ALLOWANCE.get()
    if left is not None:
        left[0] -= units
        if left[0] < 0:
            raise TooManyPatterns(left[1])


# Allowance units of a compile: 1, and one per this many instructions of its program (a
# compile takes about a microsecond per instruction).
UNIT_INSTRUCTIONS: Final = 200
# What a refused pattern is counted as: about the largest program accepted (RE2 stops there).
_LARGEST: Final = 8000


@functools.lru_cache(maxsize=CACHE_SIZE)
def regex_or_refusal(pattern: str) -> Any:
    """The pattern compiled under the limit, or a :class:`PatternRefused` saying why.
    Cached (both outcomes), thread-safe."""
    compiling()
    try:
        compiled = re2.compile(pattern, _ACCEPT)
    except re2.error as exc:
        words = _words(exc)
        spend(1 + (_LARGEST // UNIT_INSTRUCTIONS if "too large" in words else 0))
        return PatternRefused(words)
    except (TypeError, ValueError) as exc:
        spend()
        return PatternRefused(_words(exc))
    spend(1 + compiled.programsize // UNIT_INSTRUCTIONS)
    return compiled


def check_regex(pattern: str) -> None:
    """Raises :class:`PatternRefused` when the pattern is not accepted."""
    got = regex_or_refusal(pattern)
    if isinstance(got, PatternRefused):
        raise got


def compile_regex(pattern: str) -> Any:
    """A compiled RE2 pattern for a probe (an accepted pattern: the same program, with RE2's
    default memory for searching); raises :class:`PatternRefused` when not accepted."""
    check_regex(pattern)
    return re2.compile(pattern, _RUN)
