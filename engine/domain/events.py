"""The names of the events a state change causes, in one place.

They are the ``event`` of a webhook (api.md section 6), of a notification and of a channel's
``events`` list; the SQL CHECK constraints of ``webhook_events`` and ``notification_events``
list the same names.
"""

from __future__ import annotations

from typing import Final

DOWNTIME: Final = "downtime"
UPTIME_RESTORED: Final = "uptime_restored"
CERTIFICATE_INVALID: Final = "certificate_invalid"
CERTIFICATE_RECOVERED: Final = "certificate_recovered"
CERTIFICATE_RENEWAL_DUE: Final = "certificate_renewal_due"
DOMAIN_RENEWAL_DUE: Final = "domain_renewal_due"
DOMAIN_INVALID: Final = "domain_invalid"
DOMAIN_RECOVERED: Final = "domain_recovered"

EVENTS: Final = (
    DOWNTIME,
    UPTIME_RESTORED,
    CERTIFICATE_INVALID,
    CERTIFICATE_RECOVERED,
    CERTIFICATE_RENEWAL_DUE,
    DOMAIN_RENEWAL_DUE,
    DOMAIN_INVALID,
    DOMAIN_RECOVERED,
)
