"""Stored request configuration -> the probe's :class:`RequestSpec`.

Used where a check is probed: the engine when it adopts a check, the peer endpoint and the
local confirmer through the engine's check. Secrets are decrypted here and nowhere else.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.monitors.requests import plain_request
from engine.probes.request import RequestSpec
from engine.runtime.secretbox import SecretBox, SecretUnreadable

log = logging.getLogger(__name__)

UNREADABLE = "request secrets cannot be decrypted (another UPWATCH_SECRET_KEY?)"


class SpecBuilder:
    def __init__(self, box: SecretBox, capture_limit: int) -> None:
        self.box = box
        self.capture_limit = capture_limit

    def build(self, configured: tuple[Any, Any] | None, owner: int = 0) -> RequestSpec | None:
        """The spec of ``(stored request, stored assertions)`` of a monitor of account
        ``owner`` (0: not known); None for neither. A spec that cannot be built fails every
        probe with words saying why, rather than probing without its headers or
        assertions."""
        if configured is None:
            return None
        request, assertions = configured
        if request is None and not assertions:
            return None
        try:
            return RequestSpec.from_config(
                plain_request(request, self.box), assertions, self.capture_limit, owner)
        except SecretUnreadable:
            broken = UNREADABLE
        except Exception:
            log.exception("cannot use a stored request configuration")
            broken = "request configuration unusable"
        return RequestSpec("GET", [], None, True, [], self.capture_limit, broken=broken,
                           owner=owner)
