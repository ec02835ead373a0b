"""``upwatch-bench`` (also ``upwatch bench``): capacity and speed of the engine, the database
path and the API.

Everything is measured in one run, side by side with a naive baseline and with the limit of
the machine (``wrk`` / ``openssl s_time``), because the machines it runs on are noisy and only
ratios taken at the same moment compare. Layout of the package:

====================  =============================================================
``cli``               the command line: flags, one scenario run, the record printed
``options``           the flags checked together (``Options``, ``BenchError``)
``harness``           a run's resources (``Bench``) and measured child runs, figures
``scenarios/``        one module per scenario, and the registry of them
``roles/``            what each child process runs (``child`` starts them by role)
``tracers/``          opt-in profilers of the measured windows: py-spy, cProfile's
                      hooks, perf/strace, callgrind (each switched on by a flag)
``lab/``              standalone tools, each answering one question
``report``            the table and JSON shape, targets met or missed
``procs``             child processes: spawn pinned, JSON-line protocol, cleanup
``child``             entry point of every child (``python -m upwatch_bench.child``)
``engine_parts``      the one place the bench builds the engine and its probers
``world``             which site each monitor of the internet world is (pure)
``world_setup``       the internet world served (backend, nginx, DNS) and seeded
``nginx``             nginx installed, configured, started for the internet world
``install``           a missing tool installed from its Debian package
``sidebyside``        CPU per probe, Upwatch's prober beside blackbox_exporter
``bracket``           limit-tool rounds around a window, and their robust figures
``limits``            ``wrk`` and ``openssl s_time`` runs and their parsers
``database``          a fresh database per run, seeded with set-based SQL
``layout``            which monitor points at which loopback address, port and path
``certs``             a throw-away CA and server certificate for the TLS targets
``stats``             percentiles, CPU and RSS readings, the progress bar
====================  =============================================================

Only loopback (127.0.0.0/8) is ever contacted. Every child is started in its own session
(Ctrl-C reaches only the parent, which then stops them), dies with the parent
(``PR_SET_PDEATHSIG``) and is killed when it outlives its time budget.
"""

from __future__ import annotations
