"""``upwatch bench``: capacity and speed of the engine, the database path and the API.

Everything is measured in one run, side by side with a naive baseline and with the limit of
the machine (``wrk`` / ``openssl s_time``), because the machines it runs on are noisy and only
ratios taken at the same moment compare. Layout of the package:

====================  =============================================================
``main``              command entry (``run(args)``), scenario orchestration, output
``report``            the table and JSON shape, targets met or missed
``procs``             child processes: spawn pinned, JSON-line protocol, cleanup
``child``             entry point of every child (``python -m upwatch_bench.child``)
``targets``           loopback HTTP/TLS targets and the webhook receiver (a child role)
``engine_run``        the real Engine under measurement (a child role)
``baseline``          one asyncio task per monitor with aiohttp (a child role)
``loadgen``           aiohttp load generator and webhook producer (child roles)
``apiserver``         ``create_app`` served on one core (a child role)
``notify_storm``      the ``notify`` scenario: an alert storm with and without channels
``internet``          the ``internet`` scenario: host names, HTTPS through nginx, failing kinds
``world``             which site each monitor of the internet world is (pure)
``nginx``             nginx installed, configured, started for the internet world
``worldserver``       the internet world's nginx backend and hanging site (a child role)
``limits``            ``wrk`` and ``openssl s_time`` runs and their parsers
``database``          a fresh database per run, seeded with set-based SQL
``layout``            which monitor points at which loopback address, port and path
``certs``             a throw-away CA and server certificate for the TLS targets
``stats``             percentiles, CPU and RSS readings, the progress bar
``profile``           optional py-spy recordings of the measured windows
``RESULTS.md``        figures on the development machine, profiles, proposals
====================  =============================================================

Only loopback (127.0.0.0/8) is ever contacted. Every child is started in its own session
(Ctrl-C reaches only the parent, which then stops them), dies with the parent
(``PR_SET_PDEATHSIG``) and is killed when it outlives its time budget.
"""

from __future__ import annotations

SCENARIOS = ("http", "tls", "mixed", "webhooks", "api", "notify", "internet")

__all__ = ["SCENARIOS"]
