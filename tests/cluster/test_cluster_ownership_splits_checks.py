"""Rendezvous ownership: every check has exactly one owner, the split is even, and a node
leaving moves only its own checks."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from engine.cluster.ownership import Ring, confirmation_order

CHECKS = range(1, 30_001)


def test_every_check_has_one_owner_and_the_split_is_even() -> None:
    ring = Ring(["node-a", "node-b", "node-c"])
    counts = Counter(ring.owner(c) for c in CHECKS)
    assert set(counts) == {"node-a", "node-b", "node-c"}
    for n in counts.values():
        assert abs(n - 10_000) < 600, counts


def test_a_leaving_node_moves_only_its_checks() -> None:
    before = Ring(["a", "b", "c"])
    after = Ring(["a", "b"])
    for c in CHECKS:
        if before.owner(c) != "c":
            assert after.owner(c) == before.owner(c)
        else:
            assert after.owner(c) in {"a", "b"}


def test_order_of_membership_does_not_matter_and_empty_ring_owns_nothing() -> None:
    assert [Ring(["x", "y"]).owner(c) for c in range(100)] == [
        Ring(["y", "x", "y"]).owner(c) for c in range(100)
    ]
    assert Ring([]).owner(1) is None


@given(st.sets(st.text(min_size=1, max_size=8), min_size=1, max_size=6),
       st.integers(min_value=1, max_value=2**62))
def test_each_node_agrees_on_the_owner(nodes: set[str], check: int) -> None:
    ring = Ring(nodes)
    owners = [n for n in nodes if ring.owns(n, check)]
    assert owners == [ring.owner(check)]


def test_confirmation_order_skips_own_region_and_is_stable() -> None:
    nodes = [("eu-1", "eu"), ("us-1", "us"), ("us-2", "us"), ("ap-1", "ap")]
    order = confirmation_order(42, "eu", nodes)
    assert sorted(order) == ["ap-1", "us-1", "us-2"]
    assert order == confirmation_order(42, "eu", list(reversed(nodes)))
    firsts = Counter(confirmation_order(c, "eu", nodes)[0] for c in range(3000))
    assert len(firsts) == 3  # load spreads over peers
    assert confirmation_order(1, "eu", [("eu-2", "eu")]) == []
