"""The registry of scenarios: ``upwatch bench SCENARIO`` runs :func:`run`, prints
:func:`table`. The harness never imports a scenario; a scenario imports the harness.

==============  ===============================================================================
``http``        :mod:`.probes` (``--names``: :mod:`.names`; ``--assertions``: :mod:`.assertions`)
``tls``         :mod:`.probes` (``--diagnoses``: :mod:`.certdiag`)
``mixed``       :mod:`.probes`
``webhooks``    :mod:`.webhooks`
``api``         :mod:`.api`
``notify``      :mod:`.notify`
``internet``    :mod:`.internet`
==============  ===============================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from upwatch_bench.harness import Bench

SCENARIOS = ("http", "tls", "mixed", "webhooks", "api", "notify", "internet")


async def run(b: Bench) -> dict[str, Any]:
    """Run ``b.opts.scenario`` in the bench ``b``; its record."""
    opts = b.opts
    if opts.scenario == "http" and opts.assertions:
        from upwatch_bench.scenarios.assertions import scenario_assertions

        return await scenario_assertions(b, opts.assertions)
    if opts.scenario == "tls" and opts.diagnoses:
        from upwatch_bench.scenarios.certdiag import scenario_diagnoses

        return await scenario_diagnoses(b, opts.diagnoses)
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
    from upwatch_bench.scenarios.probes import scenario_engine

    return await scenario_engine(b)


def table(rec: dict[str, Any]) -> str:
    """A readable block for one record: the scenario's own layout, or the common one."""
    if "assertions_share" in rec:
        from upwatch_bench.scenarios.assertions import table as assertions_table

        return assertions_table(rec)
    if rec.get("diagnoses"):
        from upwatch_bench.scenarios.certdiag import table as diagnoses_table

        return diagnoses_table(rec)
    if rec.get("scenario") == "internet":
        from upwatch_bench.scenarios.internet_table import table as internet_table

        return internet_table(rec)
    from upwatch_bench.report import table as common_table

    return common_table(rec)
