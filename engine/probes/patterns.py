"""JSONPath (RFC 9535, ``python-jsonpath`` in strict mode) and regular expressions (RE2) for
the assertions of :mod:`engine.probes.request`.

This module is deliberately NOT compiled with mypyc (it is not in
``engine.runtime.compiled.MODULES``): its classes subclass ``python-jsonpath``'s, and a
compiled module must not subclass a class of an interpreted library.
Compiled, ``_Rfc9535`` lost the attributes its base class sets in
``__init__`` (``'_Rfc9535' object has no attribute 'lexer'``) on a fresh install, failing every
json assertion. Only the compile step runs here (once per monitor configuration); the probe
calls the compiled query and pattern objects themselves.
"""

from __future__ import annotations

from typing import Any, Final

import re2
from jsonpath import JSONPathEnvironment, function_extensions


class _Re2Match(function_extensions.Match):
    """RFC 9535 ``match()`` on RE2: linear time for any pattern a monitor carries."""

    def check_cache(self, pattern: str) -> Any:
        return _re2_or_none(self.cache, pattern)


class _Re2Search(function_extensions.Search):
    """RFC 9535 ``search()`` on RE2."""

    def check_cache(self, pattern: str) -> Any:
        return _re2_or_none(self.cache, pattern)


def _re2_or_none(cache: Any, pattern: str) -> Any:
    try:
        return cache[pattern]
    except KeyError:
        pass
    try:
        compiled: Any = re2.compile(pattern)
    except re2.error:
        compiled = None  # RFC 9535: a bad pattern matches nothing
    cache[pattern] = compiled
    return compiled


class _Rfc9535(JSONPathEnvironment):
    def setup_function_extensions(self) -> None:
        JSONPathEnvironment.setup_function_extensions(self)
        self.function_extensions["match"] = _Re2Match()
        self.function_extensions["search"] = _Re2Search()


_JSONPATH: Final = _Rfc9535(strict=True)


def compile_jsonpath(path: str) -> Any:
    """A compiled RFC 9535 query; raises ``jsonpath.JSONPathError`` when it does not parse."""
    return _JSONPATH.compile(path)


# RE2's defaults, except that a pattern that does not compile is not also logged to stderr
# by the C++ library (the caller reports it: a 422, or ``upwatch apply``'s error lines).
_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False


def compile_regex(pattern: str) -> Any:
    """A compiled RE2 pattern; raises ``re2.error`` when it does not compile."""
    return re2.compile(pattern, _RE2_OPTIONS)
