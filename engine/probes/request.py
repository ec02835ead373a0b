"""A monitor's own request and its assertions, as the probe uses them.

A monitor without ``request`` and ``assertions`` never meets this module: its probe is the
plain GET of ``engine/probes/http.py``. A monitor with either gets one :class:`RequestSpec`,
built once when the engine loads its configuration (``from_config``), from values the API
validated (``engine/monitors/requests.py``) and with secret header values already decrypted.

The probe asks the spec for its request bytes on each hop (:meth:`RequestSpec.request_bytes`)
and, once the final response is read, for the verdict of the assertions
(:meth:`RequestSpec.check`): ``None`` when all hold, else the words of the first that
failed, e.g. ``json $.status equals "UP" failed: got "DOWN"``.

Regular expressions are RE2 (``google-re2``, compile bounded: engine/probes/patterns.py).
JSONPath is RFC 9535 (``python-jsonpath`` in strict mode) with a bounded shape and a step
budget (engine/probes/jsonpaths.py): a query that would take longer fails the assertion
instead. The body is read only for ``body`` and ``json`` assertions, and at most
``capture_limit`` bytes of it.

RE2 searches in time linear in the text, but its slow path (its NFA, when the DFA runs out
of memory) costs tens of nanoseconds per byte per instruction: ``a[ab]{1000}c`` took 1.2 s
on 64 KiB. So a search whose text length times program size (at least
:data:`REGEX_MIN_INSTRUCTIONS`) exceeds :data:`REGEX_BUDGET` fails its assertion in words
without searching, and a spec with a ``matches`` assertion, or a ``json`` one on a body over
:data:`OFF_LOOP_JSON_BYTES`, is judged off the event loop (:meth:`RequestSpec.off_loop`:
the prober runs :meth:`RequestSpec.check` on a worker thread; RE2 and orjson need no
loop state).
"""

from __future__ import annotations

import gc
from typing import Any, Final

import orjson

from engine.domain.secretheaders import is_secret_header
from engine.probes.jsonpaths import (
    BUDGET,
    MAX_DEPTH,
    TooCostly,
    TooDeep,
    compile_jsonpath,
    first_match,
)
from engine.probes.patterns import compile_regex

# Length times instructions a regex search may cost (a few seconds of a worker thread at worst).
REGEX_BUDGET: Final = 128 << 20
# Small programs are no cheaper per byte on RE2's slow path than this many instructions.
REGEX_MIN_INSTRUCTIONS: Final = 64
# A json assertion's body above this size is parsed and queried off the event loop.
OFF_LOOP_JSON_BYTES: Final = 64 << 10

METHODS: Final = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
SOURCES: Final = ("status_code", "response_time", "header", "body", "json")
COMPARISONS: Final = (
    "equals", "not_equals", "contains", "not_contains", "less_than", "greater_than",
    "is_empty", "not_empty", "matches",
)
NO_TARGET: Final = ("is_empty", "not_empty")
NUMBER_COMPARISONS: Final = ("less_than", "greater_than")
# Comparisons each source takes (the rest are refused by the API, field "comparison").
SOURCE_COMPARISONS: Final = {
    "status_code": ("equals", "not_equals", "less_than", "greater_than"),
    "response_time": ("less_than", "greater_than"),
    "header": COMPARISONS,
    "body": ("equals", "not_equals", "contains", "not_contains", "is_empty", "not_empty",
             "matches"),
    "json": COMPARISONS,
}
# Headers that describe a request body: dropped with the body (fetch, "request-body-header").
BODY_HEADERS: Final = frozenset(
    ("content-type", "content-encoding", "content-language", "content-location")
)
_BODY_METHODS: Final = frozenset(("POST", "PUT", "PATCH"))
_SHOWN: Final = 80  # characters of a found value quoted in an error


def size_words(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} bytes"


def _quoted(text: str) -> str:
    if len(text) > _SHOWN:
        text = text[:_SHOWN] + "..."
    return orjson.dumps(text).decode()


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def _json_text(value: Any) -> str:
    """A JSON value as compared: a string is itself, anything else its JSON form."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


class Assertion:
    """One ``{source, property, comparison, target}``, compiled."""

    def __init__(self, source: str, prop: str, comparison: str, target: Any) -> None:
        self.source = source
        self.prop = prop
        self.comparison = comparison
        self.number: float | None = None
        self.text = ""
        self.pattern: Any = None
        self.path: Any = None
        if isinstance(target, bool) or target is None:
            self.text = "" if target is None else ("true" if target else "false")
        elif isinstance(target, int | float):
            self.number = float(target)
            self.text = orjson.dumps(target).decode()
        else:
            self.text = str(target)
            self.number = _number(self.text)
        if comparison == "matches":
            self.pattern = compile_regex(self.text)
        if source == "json":
            self.path = compile_jsonpath(prop)
        words = source
        if prop:
            words += " " + prop
        words += " " + comparison
        if comparison not in NO_TARGET:
            numeric = source in ("status_code", "response_time") or (isinstance(
                target, int | float) and not isinstance(target, bool))
            words += " " + (self.text if numeric else _quoted(self.text))
        self.words = words

    def failed(self, why: str) -> str:
        return f"{self.words} failed: {why}"


class RequestSpec:
    """What a monitor's probe sends and what its answer must satisfy (see the module
    docstring). ``headers`` holds plain values; ``body`` the exact bytes to send."""

    def __init__(
        self,
        method: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        follow_redirects: bool,
        assertions: list[Assertion],
        capture_limit: int,
        broken: str | None = None,
        owner: int = 0,
    ) -> None:
        self.method = method
        # Whose monitor (its account): costly assertions are shared fairly between owners.
        self.owner = owner
        self.headers = headers
        self.body = body
        self.follow_redirects = follow_redirects
        self.assertions = assertions
        self.capture_limit = capture_limit
        # A configuration the engine could not use (a secret it cannot decrypt): every
        # probe fails with these words, rather than probing without the header.
        self.broken = broken
        names = {n.lower() for n, _ in headers}
        # Secret headers (engine.domain.secretheaders) go to the monitor's origin only.
        self.secret = [is_secret_header(n) for n, _ in headers]
        self.has_user_agent = "user-agent" in names
        self.has_accept = "accept" in names
        self.status_rule = any(a.source == "status_code" for a in assertions)
        self.reads_body = any(a.source in ("body", "json") for a in assertions)
        self.wanted_headers = frozenset(
            a.prop.lower() for a in assertions if a.source == "header"
        )
        self.searches = any(a.comparison == "matches" for a in assertions)
        self.parses_json = any(a.source == "json" for a in assertions)

    def off_loop(self, body_size: int) -> bool:
        """Whether :meth:`check` of a response whose body has ``body_size`` bytes belongs on
        a worker thread: a regex search, or a json body over :data:`OFF_LOOP_JSON_BYTES`."""
        return self.searches or (self.parses_json and body_size > OFF_LOOP_JSON_BYTES)

    @classmethod
    def from_config(
        cls,
        request: dict[str, Any] | None,
        assertions: list[dict[str, Any]] | None,
        capture_limit: int,
        owner: int = 0,
    ) -> RequestSpec:
        """From validated, decrypted configuration (headers as ``[[name, value], ...]``) of
        a monitor of account ``owner``."""
        req = request or {}
        body_text = req.get("body")
        body = body_text.encode("utf-8") if isinstance(body_text, str) else None
        headers = [(str(h[0]), str(h[1])) for h in req.get("headers") or []]
        compiled = [
            Assertion(a["source"], a.get("property") or "", a["comparison"], a.get("target"))
            for a in assertions or []
        ]
        return cls(
            str(req.get("method") or "GET"), headers, body,
            bool(req.get("follow_redirects", True)), compiled, capture_limit, owner=owner,
        )

    def request_bytes(
        self, method: str, target: str, host_header: str, user_agent: str,
        secrets: bool, with_body: bool,
    ) -> bytes:
        """The request of one hop: ``method`` (the redirect rules may have changed it), the
        user's headers (secret ones only when ``secrets``, body headers only
        ``with_body``), ``User-Agent``/``Accept`` unless the user set them, the length of a
        body, ``Connection: close``, and the body."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header}"]
        for (name, value), secret in zip(self.headers, self.secret, strict=True):
            if secret and not secrets:
                continue
            if not with_body and name.lower() in BODY_HEADERS:
                continue
            lines.append(f"{name}: {value}")
        if not self.has_user_agent:
            lines.append(f"User-Agent: {user_agent}")
        if not self.has_accept:
            lines.append("Accept: */*")
        body = self.body if with_body else None
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        elif method in _BODY_METHODS:
            lines.append("Content-Length: 0")
        lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
        return head + body if body is not None else head

    def check(
        self,
        status: int,
        total_ms: float,
        headers: dict[str, str],
        body: bytes | None,
        cut: bool,
    ) -> str | None:
        """The first failed assertion's words, or None when every assertion holds.
        ``headers``: the final response's wanted headers (lower-case names, repeated ones
        joined with ", "); ``body``: what was read of it; ``cut``: reading stopped at
        ``capture_limit``. With json assertions the garbage collector waits until the parsed
        body is freed: a body of many small containers would otherwise set off collections
        of the whole heap while it is parsed."""
        if not self.parses_json or not gc.isenabled():
            return self._check(status, total_ms, headers, body, cut)
        gc.disable()
        try:
            return self._check(status, total_ms, headers, body, cut)
        finally:
            gc.enable()

    def _check(
        self,
        status: int,
        total_ms: float,
        headers: dict[str, str],
        body: bytes | None,
        cut: bool,
    ) -> str | None:
        doc: Any = None
        doc_error: str | None = None
        text: str | None = None
        for a in self.assertions:
            source = a.source
            if source == "status_code":
                why = _compare(a, str(status), float(status), "")
            elif source == "response_time":
                why = _compare(a, f"{total_ms:.0f}", total_ms, " ms")
            elif source == "header":
                value = headers.get(a.prop.lower())
                why = _compare(a, value, _number(value), "")
            elif source == "body":
                if text is None:
                    text = (body or b"").decode("utf-8", "replace")
                why = _body_compare(a, text, cut, self.capture_limit)
            else:
                if doc is None and doc_error is None:
                    try:
                        doc = orjson.loads(body or b"")
                    except orjson.JSONDecodeError as exc:
                        doc_error = (
                            "body nests deeper than 1024 levels" if "depth" in str(exc)
                            else f"body is not JSON in the first {size_words(self.capture_limit)}"
                            if cut else "body is not JSON"
                        )
                why = doc_error if doc_error is not None else _json_check(a, doc)
            if why is not None:
                return a.failed(why)
        return None


def _json_check(a: Assertion, doc: Any) -> str | None:
    """Why the parsed body ``doc`` fails the json assertion ``a`` (None: it holds), the
    query run under its step budget."""
    try:
        found = first_match(a.path, doc)
    except TooCostly:
        return (f"the JSONPath needs more than {BUDGET} steps on this body (the limit that"
                " keeps every query short)")
    except TooDeep:
        return f"the body nests deeper than {MAX_DEPTH} levels under '..'"
    if found is None:
        return _compare(a, None, None, "")
    obj = found.obj
    try:
        value = _json_text(obj)
    except orjson.JSONEncodeError:
        return "the value found nests too deep to compare"
    num = (float(obj) if isinstance(obj, int | float) and not isinstance(obj, bool)
           else _number(value) if isinstance(obj, str) else None)
    return _compare(a, value, num, "")


def _compare(a: Assertion, value: str | None, number: float | None, unit: str) -> str | None:
    """Why ``value`` fails ``a`` (None: it holds). ``value`` None: not found."""
    c = a.comparison
    if c == "is_empty":
        return None if not value else f"got {_quoted(value)}"
    if c == "not_empty":
        return None if value else ("not found" if value is None else "empty")
    if value is None:
        return "not found"
    got = f"got {value}{unit}" if unit or a.source == "status_code" else f"got {_quoted(value)}"
    if c == "less_than" or c == "greater_than":
        target = a.number
        if number is None or target is None:
            return f"{got} (not a number)"
        ok = number < target if c == "less_than" else number > target
        return None if ok else got
    if c == "equals" or c == "not_equals":
        if a.number is not None and number is not None:
            same = number == a.number
        else:
            same = value == a.text
        return None if same == (c == "equals") else got
    if c == "contains":
        return None if a.text in value else got
    if c == "not_contains":
        return None if a.text not in value else got
    # matches
    too_costly = _search_cost_words(a, value, REGEX_BUDGET)
    if too_costly is not None:
        return too_costly
    return None if a.pattern.search(value) is not None else got


def _search_cost_words(a: Assertion, text: str, budget: int) -> str | None:
    """Why searching ``text`` with ``a``'s pattern would cost more than ``budget`` (length
    times instructions; None: it may)."""
    program = max(REGEX_MIN_INSTRUCTIONS, a.pattern.programsize)
    if len(text) * program <= budget:
        return None
    return (f"the pattern ({a.pattern.programsize} RE2 instructions) is too costly to search"
            f" {size_words(len(text))}: a search may cost {budget >> 20} Mi"
            " characters times instructions")


def _body_compare(a: Assertion, text: str, cut: bool, limit: int) -> str | None:
    where = f"the first {size_words(limit)}" if cut else "the body"
    return text_compare(a, text, where, REGEX_BUDGET)


def text_compare(a: Assertion, text: str, where: str, budget: int) -> str | None:
    """Why a whole text (a body, a server's reply: ``where`` in the words) fails the text
    assertion ``a`` (None: it holds); a ``matches`` search costing more than ``budget``
    (length times instructions) fails in words without searching."""
    c = a.comparison
    if c == "contains":
        return None if a.text in text else f"not in {where}"
    if c == "not_contains":
        return None if a.text not in text else f"found in {where}"
    if c == "matches":
        too_costly = _search_cost_words(a, text, budget)
        if too_costly is not None:
            return too_costly
        return None if a.pattern.search(text) is not None else f"no match in {where}"
    if c == "is_empty":
        return None if not text else f"got {len(text)} characters"
    if c == "not_empty":
        return None if text else "empty"
    same = text == a.text
    return None if same == (c == "equals") else f"got {_quoted(text)}"
