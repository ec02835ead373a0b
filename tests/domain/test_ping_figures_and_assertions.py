"""A ping probe's figures from its round-trip times, and its assertions judged with the
URL monitors' words (pure)."""

from __future__ import annotations

import pytest

from engine.domain.ping import check, figures, no_reply_words, spec


def test_figures_of_all_replies() -> None:
    f = figures([10.0, 14.0, 12.0])
    assert (f.sent, f.received, f.loss) == (3, 3, 0.0)
    assert (f.rtt_min, f.rtt_avg, f.rtt_max) == (10.0, 12.0, 14.0)
    # |14-10| and |12-14|, averaged
    assert f.jitter == 3.0


def test_figures_with_a_lost_request_skip_it_for_jitter() -> None:
    f = figures([10.0, None, 16.0])
    assert (f.received, f.loss) == (2, 33.3)
    assert f.jitter == 6.0
    assert f.rtt_avg == 13.0


def test_figures_without_replies() -> None:
    f = figures([None, None])
    assert (f.received, f.loss, f.rtt_avg, f.jitter) == (0, 100.0, None, None)
    assert f.details() == {"sent": 2, "received": 0, "packet_loss": 100.0, "rtt_min": None,
                           "rtt_avg": None, "rtt_max": None, "jitter": None}


def test_one_reply_has_no_jitter() -> None:
    assert figures([5.0]).jitter is None


def test_no_reply_words() -> None:
    assert no_reply_words(3, 10) == "100 % packet loss: no reply to 3 echo requests in 10 s"
    assert no_reply_words(1, 2.5) == "100 % packet loss: no reply to 1 echo request in 2.5 s"


@pytest.mark.parametrize(
    ("assertion", "words"),
    [
        ({"source": "packet_loss", "comparison": "less_than", "target": 10},
         "packet_loss less_than 10 failed: got 33.3 %"),
        ({"source": "rtt_avg", "comparison": "less_than", "target": 12.5},
         "rtt_avg less_than 12.5 failed: got 13 ms"),
        ({"source": "rtt_max", "comparison": "less_than", "target": 15},
         "rtt_max less_than 15 failed: got 16 ms"),
        ({"source": "jitter", "comparison": "less_than", "target": 5},
         "jitter less_than 5 failed: got 6 ms"),
        ({"source": "packet_loss", "comparison": "equals", "target": 0},
         "packet_loss equals 0 failed: got 33.3 %"),
        ({"source": "rtt_avg", "comparison": "greater_than", "target": 20},
         "rtt_avg greater_than 20 failed: got 13 ms"),
        ({"source": "packet_loss", "comparison": "not_equals", "target": 33.3},
         "packet_loss not_equals 33.3 failed: got 33.3 %"),
    ],
)
def test_a_failed_assertion_reads_like_a_url_monitors(assertion: dict, words: str) -> None:
    assert check([assertion], figures([10.0, None, 16.0])) == words


def test_assertions_that_hold_give_none_and_the_first_failure_wins() -> None:
    f = figures([10.0, 11.0, 12.0])
    holding = [{"source": "packet_loss", "comparison": "less_than", "target": 1},
               {"source": "rtt_max", "comparison": "less_than", "target": 100}]
    assert check(holding, f) is None
    failing = [*holding,
               {"source": "jitter", "comparison": "greater_than", "target": 5},
               {"source": "rtt_avg", "comparison": "greater_than", "target": 50}]
    assert check(failing, f) == "jitter greater_than 5 failed: got 1 ms"


def test_a_figure_that_could_not_be_measured_fails_its_assertion() -> None:
    a = [{"source": "jitter", "comparison": "less_than", "target": 5}]
    assert check(a, figures([7.0, None])) == "jitter less_than 5 failed: got no figure (1 reply)"


def test_stored_assertions_of_another_scheme_make_a_broken_spec() -> None:
    good = [{"source": "rtt_max", "comparison": "less_than", "target": 5}]
    assert spec(good).broken is None and spec(good).assertions == tuple(good)
    kept = [*good, {"source": "status_code", "comparison": "equals", "target": 200}]
    assert spec(kept).broken == (
        "assertion on status_code does not apply to ping: give this monitor its assertions again")
    text = [{"source": "jitter", "comparison": "less_than", "target": "5"}]
    assert spec(text).broken is not None
