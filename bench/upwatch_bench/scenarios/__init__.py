"""The registry of scenarios: ``upwatch bench SCENARIO`` runs :func:`run`, prints
:func:`table`. The harness never imports a scenario; a scenario imports the harness.

==============  ===============================================================================
``http``        :mod:`.probes` (``--names``: :mod:`.names`; ``--assertions``: :mod:`.assertions`)
``tls``         :mod:`.probes`
``mixed``       :mod:`.probes`
``webhooks``    :mod:`.webhooks`
``api``         :mod:`.api`
``notify``      :mod:`.notify`
``internet``    :mod:`.internet`
``overload``    :mod:`.overload`
``pings``       :mod:`.pings`
``heartbeats``  :mod:`.heartbeats`
==============  ===============================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from upwatch_bench.harness import Bench

SCENARIOS = ("http", "tls", "mixed", "webhooks", "api", "notify", "internet", "overload",
             "pings", "heartbeats")


async def run(b: Bench) -> dict[str, Any]:
    """Run ``b.opts.scenario`` in the bench ``b``; its record."""
    opts = b.opts
    if opts.scenario == "http" and opts.assertions:
        from upwatch_bench.scenarios.assertions import scenario_assertions

        return await scenario_assertions(b, opts.assertions)
    if opts.scenario == "webhooks":
        from upwatch_bench.scenarios.webhooks import scenario_webhooks

        return await scenario_webhooks(b)
    if opts.scenario == "notify":
        from upwatch_bench.scenarios.notify import scenario_notify

        return await scenario_notify(b)
    if opts.scenario == "api":
        from upwatch_bench.scenarios.api import scenario_api

        return await scenario_api(b)
    if opts.scenario == "internet":
        from upwatch_bench.scenarios.internet import scenario_internet

        return await scenario_internet(b)
    if opts.scenario == "overload":
        from upwatch_bench.scenarios.overload import scenario_overload

        return await scenario_overload(b)
    if opts.scenario == "pings":
        from upwatch_bench.scenarios.pings import scenario_pings

        return await scenario_pings(b)
    if opts.scenario == "heartbeats":
        from upwatch_bench.scenarios.heartbeats import scenario_heartbeats

        return await scenario_heartbeats(b)
    from upwatch_bench.scenarios.probes import scenario_engine

    return await scenario_engine(b)


def table(rec: dict[str, Any]) -> str:
    """A readable block for one record: the scenario's own layout, or the common one."""
    if "assertions_share" in rec:
        from upwatch_bench.scenarios.assertions import table as assertions_table

        return assertions_table(rec)
    if rec.get("scenario") == "internet":
        from upwatch_bench.scenarios.internet_table import table as internet_table

        return internet_table(rec)
    if rec.get("scenario") == "overload":
        from upwatch_bench.scenarios.overload import table as overload_table

        return overload_table(rec)
    if rec.get("scenario") == "pings":
        from upwatch_bench.scenarios.pings import table as pings_table

        return pings_table(rec)
    if rec.get("scenario") == "heartbeats":
        from upwatch_bench.scenarios.heartbeats import table as heartbeats_table

        return heartbeats_table(rec)
    from upwatch_bench.report import table as common_table

    return common_table(rec)
