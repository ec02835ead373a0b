"""The engine's loop histograms (observations buffered, counted in C at fold time) expose
exactly what prometheus_client's own Histogram does for the same observations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from engine.runtime.metrics import _PROBE_BUCKETS, LoopHistogram, Metrics

_values = st.lists(
    st.one_of(
        st.sampled_from(_PROBE_BUCKETS),  # on a bucket's edge: counted as <= that edge
        st.floats(min_value=0.0, max_value=100.0, allow_nan=False),
    ),
    max_size=200,
)


def _series(text: bytes, name: str) -> dict[str, float]:
    out = {}
    for line in text.decode().splitlines():
        if line.startswith(name):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


@settings(max_examples=60, deadline=None)
@given(_values)
def test_a_scrape_shows_the_same_buckets_count_and_sum_as_prometheus_client(
    values: list[float],
) -> None:
    ours_reg, theirs_reg = CollectorRegistry(), CollectorRegistry()
    ours = LoopHistogram("h", "h", buckets=_PROBE_BUCKETS, registry=ours_reg)
    theirs = Histogram("h", "h", buckets=_PROBE_BUCKETS, registry=theirs_reg)
    for v in values:
        ours.observe(v)
        theirs.observe(v)
    got = _series(generate_latest(ours_reg), "h_")
    want = _series(generate_latest(theirs_reg), "h_")
    sums = got.pop("h_sum"), want.pop("h_sum")
    assert got == want
    assert abs(sums[0] - sums[1]) <= 1e-9 * max(1.0, abs(sums[1]))


def test_observations_wait_in_a_list_until_the_engine_or_a_scrape_folds_them() -> None:
    metrics = Metrics()
    total = metrics.probe_phase.labels(phase="total")
    for _ in range(1000):
        total.observe(0.003)
    metrics.lateness.observe(0.2)
    assert len(total._pending) == 1000  # one list append each, nothing counted yet
    metrics.fold()  # what the engine's scheduler does once a second
    assert total._pending == [] and metrics.lateness.labels()._pending == []
    assert total.counts[0] == 1000  # le=0.005
    text = generate_latest(metrics.registry).decode()
    assert 'upwatch_probe_duration_seconds_count{phase="total"} 1000.0' in text
    assert "upwatch_scheduler_lateness_seconds_count 1.0" in text
