"""The registry of scenarios: ``upwatch bench SCENARIO`` runs :func:`run`, prints
:func:`table`. The harness never imports a scenario; a scenario imports the harness.

:data:`MODULES` names, per scenario, the module whose ``scenario_<name>(bench)`` runs it and
whose ``table(record)``, when it has one, prints its record (else the common layout of
:mod:`upwatch_bench.report`). ``http``, ``tls`` and ``mixed`` share :mod:`.probes`
(``--names``: :mod:`.names`; ``http --assertions``: :mod:`.assertions`; ``tls
--diagnoses``: :mod:`.certdiag`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from upwatch_bench.harness import Bench

# scenario -> (module under upwatch_bench.scenarios, its run function, its table module or "")
MODULES: dict[str, tuple[str, str, str]] = {
    "http": ("probes", "scenario_engine", ""),
    "tls": ("probes", "scenario_engine", ""),
    "mixed": ("probes", "scenario_engine", ""),
    "webhooks": ("webhooks", "scenario_webhooks", ""),
    "api": ("api", "scenario_api", ""),
    "notify": ("notify", "scenario_notify", ""),
    "internet": ("internet", "scenario_internet", "internet_table"),
    "overload": ("overload", "scenario_overload", "overload"),
    "dns": ("dnsprobes", "scenario_dns", "dnsprobes"),
    "tcp": ("tcp", "scenario_tcp", "tcp"),
    "icmp": ("icmp", "scenario_icmp", "icmp"),
    "network": ("network", "scenario_network", "network"),
    "pings": ("pings", "scenario_pings", "pings"),
    "heartbeats": ("heartbeats", "scenario_heartbeats", "heartbeats"),
}

SCENARIOS = tuple(MODULES)


def _module(name: str) -> Any:
    return import_module(f"upwatch_bench.scenarios.{name}")


async def run(b: Bench) -> dict[str, Any]:
    """Run ``b.opts.scenario`` in the bench ``b``; its record."""
    opts = b.opts
    if opts.scenario == "http" and opts.assertions:
        from upwatch_bench.scenarios.assertions import scenario_assertions

        return await scenario_assertions(b, opts.assertions)
    if opts.scenario == "tls" and opts.diagnoses:
        from upwatch_bench.scenarios.certdiag import scenario_diagnoses

        return await scenario_diagnoses(b, opts.diagnoses)
    module, function, _ = MODULES.get(opts.scenario, MODULES["http"])
    result: dict[str, Any] = await getattr(_module(module), function)(b)
    return result


def table(rec: dict[str, Any]) -> str:
    """A readable block for one record: the scenario's own layout, or the common one."""
    if "assertions_share" in rec:
        from upwatch_bench.scenarios.assertions import table as assertions_table

        return assertions_table(rec)
    if rec.get("diagnoses"):
        from upwatch_bench.scenarios.certdiag import table as diagnoses_table

        return diagnoses_table(rec)
    shown = MODULES.get(str(rec.get("scenario", "")), ("", "", ""))[2]
    if shown:
        return str(_module(shown).table(rec))
    from upwatch_bench.report import table as common_table

    return common_table(rec)
