"""Monitors and checks as the API sees them: create, read, update, delete, enable, disable, statistics."""

from __future__ import annotations

from engine.db.base import StoreBase


class MonitorsMixin(StoreBase):
    pass
