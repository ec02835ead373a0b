"""What the public may read of an owner's data.

A probe's error may name the address a host resolved to (``blocked: intranet.example
resolves to a non-public address (10.1.2.3)``): the owner needs it, a status page visitor
must not learn an internal address from it. :func:`public_error` drops every parenthesised
IP address (v4 or v6, with or without a zone) from such a text and keeps the rest; the
owner reads the whole text in the API.
"""

from __future__ import annotations

import ipaddress
import re

# " (<something that may be an address>)"; each candidate is checked with ipaddress, so a
# parenthesised word or number that is no address stays.
_PARENTHESISED = re.compile(r"\s*\(([0-9A-Fa-f:.]+(?:%[\w.\-]+)?)\)")


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True


def public_error(error: str | None) -> str | None:
    """``error`` without the IP addresses it names in parentheses."""
    if not error or "(" not in error:
        return error
    return _PARENTHESISED.sub(lambda m: "" if _is_address(m.group(1)) else m.group(0), error)
