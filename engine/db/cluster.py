"""Cluster nodes: register, heartbeat, list live nodes, hand over on stop."""

from __future__ import annotations

from engine.db.base import StoreBase


class ClusterMixin(StoreBase):
    pass
