"""Which live node probes which check: rendezvous (highest random weight) hashing. Pure.

Every node computes the same answer from the same set of live node ids, with no
coordination: each check goes to the node with the highest score for (node, check). When a
node leaves, only its checks move (spread over the others); when one joins, it takes about
1/N of the checks from each. The per-node seed is derived once; scoring a check is a
64-bit mix (splitmix64 finaliser), cheap enough to re-split 50,000 checks on every change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

_MASK = (1 << 64) - 1


def node_seed(node_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(node_id.encode(), digest_size=8).digest(), "big")


def _mix(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class Ring:
    """The ownership function for one membership view."""

    __slots__ = ("_nodes",)

    def __init__(self, node_ids: Iterable[str]) -> None:
        # Sorted so ties (astronomically unlikely) break the same way on every node.
        self._nodes: tuple[tuple[str, int], ...] = tuple(
            (n, node_seed(n)) for n in sorted(set(node_ids))
        )

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self._nodes)

    def owner(self, check_id: int) -> str | None:
        best: str | None = None
        best_score = -1
        for node, seed in self._nodes:
            score = _mix(seed ^ check_id)
            if score > best_score:
                best, best_score = node, score
        return best

    def owns(self, node_id: str, check_id: int) -> bool:
        return self.owner(check_id) == node_id


def confirmation_order(
    check_id: int, own_region: str, nodes: Sequence[tuple[str, str]]
) -> list[str]:
    """Node ids to ask for a confirmation, best first: nodes of other regions only, in a
    stable per-check order (rendezvous order), so the same peer answers for a check while
    membership holds and the load spreads over peers. ``nodes`` holds (node_id, region)."""
    others = [(n, node_seed(n)) for n, region in nodes if region != own_region]
    others.sort(key=lambda ns: (_mix(ns[1] ^ check_id), ns[0]), reverse=True)
    return [n for n, _ in others]
