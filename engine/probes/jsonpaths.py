"""JSONPath for the ``json`` assertions: RFC 9535 (``python-jsonpath`` in strict mode), with
a shape that cannot explode and an evaluation whose work is bounded, as RE2 bounds regexes.

:func:`compile_jsonpath` refuses, with :class:`JsonPathRefused` (its words name the position,
from 0), a query that does not parse and one whose cost could grow with the document
beyond a constant factor:

- more than one descendant segment (``..``), filters included: each multiplies the work by
  the depth of the document;
- a filter inside a filter: the inner one runs for every node the outer one tries;
- ``match()``/``search()`` with a pattern that is not a string literal, or one RE2 refuses
  (a pattern taken from the document would be compiled while probing).

:func:`first_match` evaluates a compiled query against a parsed document under a budget of
:data:`BUDGET` steps (a selector applied to a node, a member looked at by ``..``, a
member tried by a filter; a regex call costs its text's length times its program size over
:data:`RE2_STEP`): over the
budget it raises :class:`TooCostly` instead of going on. A step is well under a microsecond,
so no accepted query holds the event loop more than a few milliseconds on any body.

This module is NOT compiled with mypyc (it subclasses ``python-jsonpath``'s classes; see
``engine/probes/patterns.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from jsonpath import JSONPath, JSONPathEnvironment, JSONPathMatch, function_extensions
from jsonpath.exceptions import JSONPathError, JSONPathRecursionError
from jsonpath.filter import FilterQuery, FunctionExtension, StringLiteral
from jsonpath.segments import JSONPathChildSegment, JSONPathRecursiveDescentSegment
from jsonpath.selectors import (
    Filter,
    IndexSelector,
    NameSelector,
    SliceSelector,
    WildcardSelector,
)

from engine.probes import pathwords
from engine.probes.patterns import (
    CACHE_SIZE,
    PatternRefused,
    compiling,
    regex_or_refusal,
    spend,
)

BUDGET: Final = 2_000
# A regex call costs len(text) * program size / RE2_STEP steps: RE2's slowest path (its NFA,
# when the DFA's states do not fit) takes about 20 ns per byte and instruction.
RE2_STEP: Final = 50
# Nesting the descendant segment follows at most (the library's own recursion bound).
MAX_DEPTH: Final = 100


class JsonPathRefused(ValueError):
    """A query that is not accepted; ``str()`` says why in words, with the position."""


class TooCostly(Exception):
    """The evaluation would take more than :data:`BUDGET` steps."""


class _Budget:
    """Steps left to the evaluation running now (evaluations run one at a time on the
    loop's thread and never await)."""

    left = 0


def _charge(n: int) -> None:
    _Budget.left -= n
    if _Budget.left < 0:
        raise TooCostly


class _Node(JSONPathMatch):
    """A match without its normalized path (nothing here reads it): building that string
    was most of the cost of a step."""

    __slots__ = ()

    def new_child(self, obj: object, key: int | str) -> JSONPathMatch:
        return _Node(filter_context=self._filter_context, obj=obj, parent=self, path="",
                     parts=(), root=self.root)


class _Child(JSONPathChildSegment):
    __slots__ = ()

    def resolve(self, nodes: Iterable[JSONPathMatch]) -> Iterable[JSONPathMatch]:
        cost = len(self.selectors) or 1
        for node in nodes:
            _charge(cost)
            for selector in self.selectors:
                yield from selector.resolve(node)


class _Descendant(JSONPathRecursiveDescentSegment):
    __slots__ = ()

    def resolve(self, nodes: Iterable[JSONPathMatch]) -> Iterable[JSONPathMatch]:
        cost = len(self.selectors) or 1
        for node in nodes:
            for visited in self._visit(node):
                _charge(cost)
                for selector in self.selectors:
                    yield from selector.resolve(visited)

    def _visit(self, node: JSONPathMatch, depth: int = 1) -> Iterable[JSONPathMatch]:
        """The base class's pre-order walk, charged for every member it looks at."""
        if depth > MAX_DEPTH:
            raise JSONPathRecursionError("recursion limit exceeded", token=self.token)
        yield node
        obj = node.obj
        if isinstance(obj, Mapping):
            _charge(1 + len(obj))
            for name, val in obj.items():
                if isinstance(val, Mapping | list):
                    yield from self._visit(node.new_child(val, name), depth + 1)
        elif isinstance(obj, list):
            _charge(1 + len(obj))
            for i, item in enumerate(obj):
                if isinstance(item, Mapping | list):
                    yield from self._visit(node.new_child(item, i), depth + 1)


class _Filter(Filter):
    __slots__ = ()

    def resolve(self, node: JSONPathMatch) -> Iterable[JSONPathMatch]:
        obj = node.obj
        if isinstance(obj, Mapping | Sequence) and not isinstance(obj, str):
            _charge(1 + len(obj))
        return Filter.resolve(self, node)


def _regex_cost(value: object, pattern: object) -> Any:
    """The compiled literal pattern (None when not a string), charged for ``value``."""
    if not isinstance(value, str) or not isinstance(pattern, str):
        return None
    compiled = regex_or_refusal(pattern)
    if isinstance(compiled, PatternRefused):
        return None  # RFC 9535: a bad pattern matches nothing (refused at validation)
    _charge(1 + len(value) * compiled.programsize // RE2_STEP)
    return compiled


class _Re2Match(function_extensions.Match):
    """RFC 9535 ``match()`` on RE2, charged to the budget."""

    def __call__(self, value: object, pattern: object) -> bool:
        compiled = _regex_cost(value, pattern)
        return compiled is not None and compiled.fullmatch(value) is not None


class _Re2Search(function_extensions.Search):
    """RFC 9535 ``search()`` on RE2, charged to the budget."""

    def __call__(self, value: object, pattern: object) -> bool:
        compiled = _regex_cost(value, pattern)
        return compiled is not None and compiled.search(value) is not None


class _Rfc9535(JSONPathEnvironment):
    max_recursion_depth = MAX_DEPTH

    def setup_function_extensions(self) -> None:
        JSONPathEnvironment.setup_function_extensions(self)
        self.function_extensions["match"] = _Re2Match()
        self.function_extensions["search"] = _Re2Search()


# No filter caching: a cached filter tree would be a copy outside the budget's classes.
_ENV: Final = _Rfc9535(strict=True, filter_caching=False)
_SELECTORS: Final = (NameSelector, IndexSelector, SliceSelector, WildcardSelector, Filter)


def compile_jsonpath(text: str) -> JSONPath:
    """The compiled, bounded query; raises :class:`JsonPathRefused` with the reason.
    Both outcomes are cached (bounded LRU); a compiled query is shared and never changed."""
    got = _compiled(text)
    if isinstance(got, JsonPathRefused):
        raise got
    return got


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compiled(text: str) -> JSONPath | JsonPathRefused:
    compiling()
    spend()
    why = pathwords.common_mistake(text)
    if why is not None:
        return JsonPathRefused(why)
    try:
        path = _ENV.compile(text)
    except JSONPathError as exc:
        return JsonPathRefused(pathwords.parser_words(text, exc))
    except (RecursionError, ValueError, TypeError) as exc:
        return JsonPathRefused(f"cannot be read ({type(exc).__name__})")
    if not isinstance(path, JSONPath):
        return JsonPathRefused("must be one query (no unions of queries)")
    try:
        _Shape(text).path(path, in_filter=False)
    except JsonPathRefused as exc:
        return exc
    return path


class _Shape:
    """Checks the shape rules of the module docstring and swaps in the charged classes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.descendants = 0

    def refuse(self, token: Any, words: str) -> None:
        index = getattr(token, "index", -1)
        where = f" at position {index}" if isinstance(index, int) and index >= 0 else ""
        raise JsonPathRefused(f"{words}{where}")

    def path(self, path: JSONPath, in_filter: bool) -> None:
        for segment in path.segments:
            if type(segment) is JSONPathRecursiveDescentSegment:
                self.descendants += 1
                if self.descendants > 1:
                    self.refuse(segment.token,
                                "may hold one descendant segment '..' only (each one"
                                " multiplies the work by the depth of the body); another is")
                segment.__class__ = _Descendant
            elif type(segment) is JSONPathChildSegment:
                segment.__class__ = _Child
            else:
                self.refuse(segment.token, "holds a segment RFC 9535 does not define")
            for selector in segment.selectors:
                if not isinstance(selector, _SELECTORS):
                    self.refuse(selector.token, "holds a selector RFC 9535 does not define")
                if type(selector) is Filter:
                    if in_filter:
                        self.refuse(selector.token,
                                    "may not hold a filter inside a filter; one is")
                    selector.__class__ = _Filter
                    self.expression(selector.expression)

    def expression(self, expr: Any) -> None:
        if isinstance(expr, FilterQuery):
            self.path(expr.path, in_filter=True)
            return
        if isinstance(expr, FunctionExtension) and expr.name in ("match", "search"):
            pattern = expr.args[1] if len(expr.args) == 2 else None
            if not isinstance(pattern, StringLiteral):
                raise JsonPathRefused(
                    f"{expr.name}() needs its pattern as a string literal, as in"
                    f" {expr.name}(@.name, 'a.*')")
            refused = regex_or_refusal(pattern.value)
            if isinstance(refused, PatternRefused):
                raise JsonPathRefused(
                    f"{expr.name}() pattern {pattern.value!r} is not a regular expression"
                    f" RE2 accepts: {refused}")
        for child in expr.children():
            self.expression(child)


def first_match(path: JSONPath, doc: Any) -> JSONPathMatch | None:
    """The first node ``path`` selects in the parsed document ``doc``, or None. Raises
    :class:`TooCostly` past :data:`BUDGET` steps, and :class:`TooDeep` when ``..`` meets
    nesting deeper than :data:`MAX_DEPTH`."""
    root = _Node(filter_context={}, obj=doc, parent=None, path="$", parts=(), root=doc)
    matches: Iterable[JSONPathMatch] = (root,)
    for segment in path.segments:
        matches = segment.resolve(matches)
    _Budget.left = BUDGET
    found: Iterator[JSONPathMatch] = iter(matches)
    try:
        return next(found, None)
    except (JSONPathRecursionError, RecursionError):
        raise TooDeep from None
    except JSONPathError:
        return None  # a type error while evaluating (none in a well-typed query): no node
    finally:
        _Budget.left = 0


class TooDeep(Exception):
    """The descendant segment met nesting deeper than :data:`MAX_DEPTH`."""
