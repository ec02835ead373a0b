"""Why a JSONPath does not parse, in words and with the position (from 0).

:func:`common_mistake` finds the usual ones before the parser sees the query (no ``$`` at
the start, an unclosed bracket, parenthesis or quote, a dot with nothing after it, ``=``
for ``==``); :func:`parser_words` turns what ``python-jsonpath``'s parser says of the
others (``expected 'TOKEN_ROOT', found 'TOKEN_NAME'``) into words with the position.
Both answer a phrase that follows "The JSONPath ...": ``must start with $ (position 0)``.
"""

from __future__ import annotations

import re
from typing import Final

_TOKEN_WORDS: Final = {
    "TOKEN_ROOT": "'$'", "TOKEN_SELF": "'@'", "TOKEN_NAME": "a name",
    "TOKEN_DOT": "'.'", "TOKEN_DDOT": "'..'", "TOKEN_WILD": "'*'",
    "TOKEN_LBRACKET": "'['", "TOKEN_RBRACKET": "']'", "TOKEN_LPAREN": "'('",
    "TOKEN_RPAREN": "')'", "TOKEN_COMMA": "','", "TOKEN_FILTER": "'?'",
    "TOKEN_INT": "a number", "TOKEN_FLOAT": "a number", "TOKEN_EOF": "the end",
    "TOKEN_DOUBLE_QUOTE_STRING": "a string", "TOKEN_SINGLE_QUOTE_STRING": "a string",
    "TOKEN_FUNCTION": "a function",
}
_TOKEN: Final = re.compile(r"'?(TOKEN_[A-Z_]+)'?")
_CLOSERS: Final = {"[": "]", "(": ")"}
FUNCTIONS: Final = ("length", "count", "match", "search", "value")


def _at(index: int) -> str:
    return f"(position {index})"


def common_mistake(text: str) -> str | None:
    """The first common mistake in ``text``, in words, or None."""
    stripped = text.lstrip()
    if not stripped:
        return "is empty; it must start with $, as in $.status"
    if stripped[0] != "$":
        start = len(text) - len(stripped)
        if stripped[0] == "@":
            return (f"must start with $ {_at(start)}: @ (the current node) belongs inside"
                    " a filter, as in $.items[?@.ok == true]")
        hint = stripped.lstrip(".")
        return f"must start with $ {_at(start)}, as in $.{hint or 'status'}"
    stack: list[tuple[str, int]] = []
    quote: tuple[str, int] | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote is not None:
            if c == "\\":
                i += 2
                continue
            if c == quote[0]:
                quote = None
        elif c in "'\"":
            quote = (c, i)
        elif c in _CLOSERS:
            stack.append((c, i))
        elif c in "])":
            if not stack or _CLOSERS[stack[-1][0]] != c:
                return f"has a '{c}' that closes nothing {_at(i)}"
            stack.pop()
        elif c == "=" and stack and stack[-1][0] == "[" and text[i - 1] not in "=!<>" and (
                i + 1 >= len(text) or text[i + 1] != "="):
            return f"compares with '=' {_at(i)}; a filter compares with '=='"
        i += 1
    if quote is not None:
        return f"has a quote that is not closed {_at(quote[1])}"
    if stack:
        opener, at = stack[-1]
        return f"has a '{opener}' that is not closed {_at(at)}"
    end = text.rstrip()
    if end.endswith("."):
        dots = len(end) - len(end.rstrip("."))
        return (f"ends with '{'.' * dots}' {_at(len(end) - dots)}: a name or * must follow,"
                " as in $.status or $..*")
    return None


def parser_words(text: str, exc: Exception) -> str:
    """What the parser's exception says, in words with the position of its token."""
    token = getattr(exc, "token", None)
    index = getattr(token, "index", -1)
    at_end = f"(at the end, position {len(text)})"
    where = _at(index) if isinstance(index, int) and index >= 0 else at_end
    raw = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    raw = raw.split(":\n")[0]
    low = raw.lower()
    if "is not defined" in low and "function" in low:
        name = raw.split("'")[1] if raw.count("'") >= 2 else "?"
        return (f"calls an unknown function '{name}' {where}; RFC 9535 has "
                + ", ".join(FUNCTIONS))
    if "shorthand selector" in low:
        return f"needs a name or * after '.' {where}"
    if "recursion" in low:
        return f"nests too deeply {where}"
    if "unexpected end" in low:
        return f"ends too early {where}: a bracket, filter or comparison is incomplete"
    words = _TOKEN.sub(lambda m: _TOKEN_WORDS.get(m.group(1), "a symbol"), raw)
    words = words.replace("unexpected token", "has an unexpected").strip()
    if not words.startswith(("has ", "needs ", "must ")):
        words = "is not valid: " + words
    return f"{words} {where}"
