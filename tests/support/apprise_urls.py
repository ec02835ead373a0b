"""An Apprise URL for every template of every plugin Apprise ships, each private token
filled with a recognisable random value (``every_plugin_url``), so a test can look for
those values where they must not appear.

Values follow each token's own schema: its regular expression (a small generator over
``re``'s parser), its choices, its type; private ones are long and random. A URL counts
only when Apprise builds the service from it, and of its secrets those the plugin keeps in
its own URL (``plugin.url()``): a template Apprise reads differently from how it is written
says nothing about masking. (A plugin that keeps a secret in another form, a Nostr key given
in hex and kept as ``nsec1...``, is covered by its canonical URL: ``canonical``.)
"""

from __future__ import annotations

import random
import re
import string
import uuid
from dataclasses import dataclass
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import apprise
from apprise.manager_plugins import NotificationManager

_ALNUM = string.ascii_letters + string.digits
_TOKEN = re.compile(r"{([a-z0-9_]+)}", re.IGNORECASE)


def _class_chars(items: Any) -> list[str]:
    chars: list[str] = []
    negate = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            chars.append(chr(av))
        elif op is C.RANGE:
            chars.extend(chr(c) for c in range(av[0], av[1] + 1))
        elif op is C.CATEGORY:
            if av is C.CATEGORY_DIGIT:
                chars.extend(string.digits)
            elif av is C.CATEGORY_WORD:
                chars.extend(_ALNUM)
    if negate:
        return [c for c in _ALNUM if c not in chars]
    return [c for c in chars if c.isalnum()] or chars or ["a"]


def _generate(parsed: Any, rnd: random.Random, length: int) -> str:
    out: list[str] = []
    for op, av in parsed:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.NOT_LITERAL:
            out.append("x" if chr(av) != "x" else "y")
        elif op is C.ANY:
            out.append(rnd.choice(_ALNUM))
        elif op is C.IN:
            out.append(rnd.choice(_class_chars(av)))
        elif op is C.SUBPATTERN:
            out.append(_generate(av[-1], rnd, length))
        elif op is C.BRANCH:
            out.append(_generate(av[1][0], rnd, length))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            low, high, sub = av
            # An optional literal or space ("\\?*", "\\s*") is left out, and so is anything
            # optional ("(...)?"); the rest repeats up to ``length``.
            simple = len(sub) == 1 and sub[0][0] in (C.LITERAL, C.CATEGORY)
            n = low if (simple and low == 0) or high == 1 else max(low, min(high, length))
            out.append("".join(_generate(sub, rnd, length) for _ in range(n)))
    return "".join(out)


def from_regex(pattern: str, rnd: random.Random, length: int, flags: int = 0) -> str:
    """A string ``pattern`` matches (for the patterns Apprise's schemas use)."""
    return _generate(sre_parse.parse(pattern, flags), rnd, length)


def _regex(spec: dict[str, Any]) -> tuple[str, int] | None:
    rx = spec.get("regex")
    if not rx:
        return None
    if isinstance(rx, (tuple, list)):
        return str(rx[0]), re.IGNORECASE if len(rx) > 1 and "i" in str(rx[1]) else 0
    return str(rx), 0


def _private(cls: Any, name: str, depth: int = 0) -> bool:
    for table in (cls.template_tokens, cls.template_args):
        spec = table.get(name)
        if isinstance(spec, dict):
            if spec.get("private"):
                return True
            alias = spec.get("alias_of")
            if isinstance(alias, str) and alias != name and depth < 4:
                return _private(cls, alias, depth + 1)
    return False


# Forms tried for a private value its schema gives no pattern for, in order: random
# letters and digits, a UUID, 64 hex digits (a key).
STYLES = ("alnum", "uuid", "hex")


def _value(name: str, spec: dict[str, Any], rnd: random.Random, schema: str,
           secret: bool, style: str = "alnum") -> str:
    kind = str(spec.get("type", "string"))
    rx = _regex(spec)
    if name == "schema":
        return schema
    if secret:
        if rx:
            return from_regex(rx[0], rnd, 24, rx[1])
        if style == "uuid" or (style == "alnum" and kind.startswith("list")):
            return str(uuid.UUID(int=rnd.getrandbits(128)))
        if style == "hex":
            return "".join(rnd.choice("0123456789abcdef") for _ in range(64))
        return "S" + "".join(rnd.choice(_ALNUM) for _ in range(23))
    if name == "host":
        return "example.com"
    if name == "port":
        return "8080"
    if name == "path":
        return "/value1/"
    if kind == "int":
        low = spec.get("min")
        return str(low if low is not None else 1)
    if kind.startswith("choice"):
        return str(next(iter(spec.get("values") or ["x"])))
    if kind == "bool":
        return "yes"
    if rx:
        return from_regex(rx[0], rnd, 10, rx[1])
    lname = name.lower()
    if "email" in lname or lname.startswith("from"):
        return "someone@example.com"
    if "phone" in lname:
        return "15551234567"
    return "value1"


@dataclass(frozen=True)
class PluginUrl:
    schema: str
    url: str
    secrets: tuple[str, ...]  # each at least 4 characters, each kept by the plugin


def every_plugin_url(seed: int = 7) -> list[PluginUrl]:
    """One URL per template of every enabled plugin that Apprise builds and whose secrets
    the plugin keeps; the secrets shorter than 4 characters are left out."""
    rnd = random.Random(seed)
    manager = NotificationManager()
    out: list[PluginUrl] = []
    for schema in sorted(manager.schemas()):
        cls = manager[schema]
        if not getattr(cls, "enabled", True):
            continue
        for template in cls.templates:
            for style in STYLES:
                built = _build(cls, schema, template, rnd, style)
                if built is not None:
                    out.append(built)
                    break
    return out


def _build(cls: Any, schema: str, template: str, rnd: random.Random,
           style: str) -> PluginUrl | None:
    secrets: list[str] = []

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        spec = cls.template_tokens.get(name)
        private = _private(cls, name)
        v = _value(name, spec if isinstance(spec, dict) else {}, rnd, schema, private, style)
        if private:
            secrets.append(v)
        return v

    url = _TOKEN.sub(fill, template)
    query = []
    for name, spec in cls.template_args.items():
        if isinstance(spec, dict) and spec.get("private") and not spec.get("alias_of"):
            v = _value(name, spec, rnd, schema, True, style)
            secrets.append(v)
            query.append(f"{name}={v}")
    if query:
        url += ("&" if "?" in url else "?") + "&".join(query)
    try:
        plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
        kept = str(plugin.url(privacy=False)) if plugin is not None else ""
    except Exception:
        return None
    found = tuple(s for s in secrets if len(s) >= 4 and s in kept)
    return PluginUrl(schema, url, found) if plugin is not None and found else None


def canonical(url: str) -> str:
    """The URL as the plugin writes it back (``plugin.url()``), without Apprise's default
    arguments."""
    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=False)
    return str(plugin.url(privacy=False)).split("?", 1)[0]
