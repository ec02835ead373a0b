"""Stored request configuration -> the spec the monitor's prober takes.

Used where a check is probed: the engine when it adopts a check, the peer endpoint and the
local confirmer through the engine's check. Secrets are decrypted here (through the URL
scheme's rules, :func:`engine.monitors.schemes.build_spec`) and nowhere else.
"""

from __future__ import annotations

from typing import Any

from engine.monitors import schemes
from engine.monitors.http_scheme import UNREADABLE
from engine.runtime.secretbox import SecretBox

__all__ = ["UNREADABLE", "SpecBuilder"]


class SpecBuilder:
    def __init__(self, box: SecretBox, capture_limit: int) -> None:
        self.box = box
        self.capture_limit = capture_limit

    def build(
        self, configured: tuple[Any, Any] | None, owner: int = 0, url: str = "http:"
    ) -> Any:
        """The spec of ``(stored request, stored assertions)`` of a monitor of account
        ``owner`` (0: not known) whose URL is ``url`` (its scheme's rules build it); None
        for neither. A spec that cannot be built fails every probe with words saying why,
        rather than probing without its headers or assertions."""
        return schemes.build_spec(self.box, self.capture_limit, url, configured, owner)
