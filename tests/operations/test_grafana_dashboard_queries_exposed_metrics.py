"""``deploy/grafana/upwatch.json`` is an importable Grafana dashboard whose every query names
only metrics that a real ``upwatch run`` exposes on ``/metrics``.

The metric names come out of each PromQL expression through a small tokenizer: strings,
label matchers (``{...}``), range and subquery brackets (``[...]``), Grafana variables,
numbers and durations are skipped; aggregation operators, and any identifier followed by
``(`` (a function), are no metric; grouping keywords (``by``, ``without``, ``on``,
``ignoring``, ``group_left``, ``group_right``) take their label list with them. What remains
are metric names. A name is exposed when ``/metrics`` declares it: a gauge by its name, a
counter as ``<name>_total``, a histogram as ``<name>_bucket``, ``_sum`` and ``_count``, even
before the first sample.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.instances import Instance

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "upwatch.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}

_KEYWORDS = frozenset({
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "and", "or", "unless", "atan2", "inf", "nan",
})
# Aggregation operators: their grouping clause may stand between them and their "(".
_AGGREGATIONS = frozenset({
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio",
})
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBER = re.compile(r"(?:0[xX][0-9A-Fa-f]+|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)[A-Za-z0-9_]*")
_VARIABLE = re.compile(r"\$(?:\{[^}]*\}|\w+)")
_NAME_MATCHER = re.compile(r"""__name__\s*=\s*(["'])([A-Za-z_:][A-Za-z0-9_:]*)\1""")
# Grafana's variable query: label_values(<series selector>, <label>).
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$", re.DOTALL)


def _skip_string(expr: str, i: int) -> int:
    """The index after the string literal that starts at ``i``."""
    quote = expr[i]
    i += 1
    while i < len(expr) and expr[i] != quote:
        i += 2 if expr[i] == "\\" and quote != "`" else 1
    if i >= len(expr):
        raise ValueError(f"unterminated string in {expr!r}")
    return i + 1


def _skip_group(expr: str, i: int, opening: str, closing: str) -> tuple[int, str]:
    """The index after the bracket group that starts at ``i``, and its inside."""
    depth, start = 0, i
    while i < len(expr):
        ch = expr[i]
        if ch in "\"'`":
            i = _skip_string(expr, i)
            continue
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return i + 1, expr[start + 1:i]
        i += 1
    raise ValueError(f"unbalanced {opening}{closing} in {expr!r}")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (with Grafana variables in it) selects."""
    names: set[str] = set()
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch.isspace():
            i += 1
        elif ch in "\"'`":
            i = _skip_string(expr, i)
        elif ch == "$":
            m = _VARIABLE.match(expr, i)
            i = m.end() if m else i + 1
        elif ch == "{":
            i, inside = _skip_group(expr, i, "{", "}")
            names.update(m.group(2) for m in _NAME_MATCHER.finditer(inside))
        elif ch == "[":
            i, _ = _skip_group(expr, i, "[", "]")
        elif ch.isdigit() or (ch == "." and expr[i + 1:i + 2].isdigit()):
            m = _NUMBER.match(expr, i)
            assert m is not None
            i = m.end()
        elif m := _IDENT.match(expr, i):
            word, i = m.group(), m.end()
            rest = expr[i:].lstrip()
            if word.lower() in _GROUPING:
                if rest.startswith("("):  # its label list, not a call
                    i, _ = _skip_group(expr, len(expr) - len(rest), "(", ")")
            elif word.lower() in _KEYWORDS or word in _AGGREGATIONS or rest.startswith("("):
                continue  # a keyword, an aggregation, or a function being called
            else:
                names.add(word)
        else:
            i += 1  # an operator, a comma, a parenthesis
    return names


def variable_metric_names(query: str) -> set[str]:
    """The metric names of a Grafana Prometheus variable query."""
    m = _LABEL_VALUES.match(query)
    return metric_names(m.group(1) if m else query)


def exposed_names(metrics_text: str) -> set[str]:
    """Every series name a query may select, by the families ``/metrics`` declares."""
    names: set[str] = set()
    for family in text_string_to_metric_families(metrics_text):
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("", "_sum", "_count"),
            "info": ("_info",),
        }.get(family.type, ("",))
        names.update(family.name + s for s in suffixes)
        names.update(s.name for s in family.samples)
    return names


def load_dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = orjson.loads(DASHBOARD.read_bytes())
    return dashboard


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, expression) of every panel target and query variable."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']}", variable["query"]["query"]


def names_in(where: str, expr: str) -> set[str]:
    if where.startswith("variable"):
        return variable_metric_names(expr)
    return metric_names(expr)


# -- the extractor ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (kind, outcome) (rate(upwatch_probes_total{instance=~"$instance"}'
         "[$__rate_interval]))", {"upwatch_probes_total"}),
        ("histogram_quantile(0.95, sum by (le, phase) (rate(upwatch_probe_duration_seconds_"
         'bucket{instance=~"$instance"}[5m])))', {"upwatch_probe_duration_seconds_bucket"}),
        ("upwatch_checks_scheduled * on (instance, job) group_left (node, region) "
         "upwatch_node_info", {"upwatch_checks_scheduled", "upwatch_node_info"}),
        ('sum(rate(a_total{result!="delivered"}[1m])) / sum(rate(a_total[1m])) or vector(0)',
         {"a_total"}),
        ("sum(x) without (le) > bool 0.5e-3 and on() y offset 5m", {"x", "y"}),
        ("topk by (route) (5, w) + count without (a) (v)", {"w", "v"}),
        ('{__name__="by_name_only", job="sum"}', {"by_name_only"}),
        ('max_over_time(rate(z_total[5m])[1h:1m]) unless count("by (a)") ', {"z_total"}),
    ],
)
def test_extractor_finds_exactly_the_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_variable_query_names_its_metric_not_its_label() -> None:
    assert variable_metric_names("label_values(upwatch_live_nodes, instance)") == {
        "upwatch_live_nodes"}
    assert variable_metric_names('label_values(up{job="a"}, instance)') == {"up"}


def test_extractor_reports_a_metric_that_is_not_exposed() -> None:
    page = (
        "# HELP upwatch_probes_total Probes.\n# TYPE upwatch_probes_total counter\n"
        "# HELP upwatch_lateness_seconds Lateness.\n# TYPE upwatch_lateness_seconds histogram\n"
        'upwatch_lateness_seconds_bucket{le="+Inf"} 0.0\nupwatch_lateness_seconds_sum 0.0\n'
        "upwatch_lateness_seconds_count 0.0\n"
    )
    exposed = exposed_names(page)
    good = "histogram_quantile(0.9, sum by (le) (rate(upwatch_lateness_seconds_bucket[1m])))"
    assert metric_names(good) <= exposed
    assert metric_names("rate(upwatch_probes_total[1m])") <= exposed
    # A misspelt name, a counter without _total, a histogram's bare name: each is caught.
    for bad in ("rate(upwatch_probe_total[1m])", "rate(upwatch_probes[1m])",
                "upwatch_lateness_seconds > 1"):
        assert metric_names(bad) - exposed, bad


# -- the dashboard ----------------------------------------------------------------------------


def test_dashboard_is_an_importable_grafana_model() -> None:
    dashboard = load_dashboard()
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    assert dashboard["id"] is None  # Grafana assigns it on import
    inputs = {i["name"]: i for i in dashboard["__inputs"]}
    assert inputs["DS_PROMETHEUS"]["type"] == "datasource"
    assert inputs["DS_PROMETHEUS"]["pluginId"] == "prometheus"
    # The only ${...} a dashboard may carry unresolved is an input or a variable.
    declared = set(inputs) | {v["name"] for v in dashboard["templating"]["list"]}
    used = set(re.findall(r"\$\{(\w+)", DASHBOARD.read_text(encoding="utf-8")))
    assert used <= declared, used - declared
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["instance"]["datasource"] == DATASOURCE

    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    rows = [p for p in panels(dashboard) if p["type"] == "row"]
    assert len(rows) >= 7
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        where = f"panel {panel['title']!r}"
        assert panel["datasource"] == DATASOURCE, where
        assert panel["targets"], where
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), where
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, where
            assert "$instance" in target["expr"], f"{where} ignores the instance variable"
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{where} has no unit"
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, where


def test_every_percentile_is_a_histogram_quantile_over_buckets_by_le() -> None:
    for where, expr in queries(load_dashboard()):
        if "histogram_quantile" in expr or "_bucket" in expr:
            assert "histogram_quantile" in expr and re.search(r"by \((?:[\w, ]*)\ble\b", expr), (
                where, expr)
            assert all(n.endswith("_bucket") for n in metric_names(expr)), (where, expr)


async def test_every_query_names_a_metric_that_metrics_exposes(
    db_dsn: str, tmp_path: Path
) -> None:
    inst = Instance(db_dsn, tmp_path)
    try:
        await inst.start()
        async with aiohttp.ClientSession() as http, http.get(f"{inst.base_url}/metrics") as r:
            assert r.status == 200
            page = await r.text()
        await inst.stop()
    finally:
        await inst.kill()
    exposed = exposed_names(page)
    missing: dict[str, set[str]] = {}
    seen: set[str] = set()
    for where, expr in queries(load_dashboard()):
        names = names_in(where, expr)
        assert names, f"{where} selects no metric: {expr}"
        seen |= names
        if names - exposed:
            missing[where] = names - exposed
    assert not missing, missing
    # The areas the dashboard is for are all there.
    for name in (
        "upwatch_probes_total", "upwatch_scheduler_lateness_seconds_bucket",
        "upwatch_checks_by_status", "upwatch_webhook_queue_depth",
        "upwatch_webhook_deliveries_total", "upwatch_notification_deliveries_total",
        "upwatch_result_buffer_depth", "upwatch_results_dropped_total", "upwatch_live_nodes",
        "upwatch_checks_scheduled", "upwatch_ownership_changes_total",
        "upwatch_http_request_duration_seconds_bucket",
    ):
        assert name in seen, f"no panel shows {name}"
