"""``upwatch bench tls --diagnoses PAIRS``: what certificate diagnoses and a cached CRL cost
per certificate probe, side by side in one run.

An ``openssl s_server`` on the engine's core serves a leaf for 127.0.0.1 with its intermediate
(EC P-256, under a root the probers trust); the leaf names a CRL on a local HTTP server,
fetched once and then cached. This process runs the real
:class:`~engine.probes.tls.CertProber` two ways, ``PAIRS`` times each, the order turning
every pair (reference, diagnosed, diagnosed, reference, ...): the reference without
diagnoses (``diagnoses=False``: the probe as it was before them) and the diagnosed one
(chain read, diagnosis, revocation judged against the cached CRL). Each window is
``--monitors`` probes (``--quick``: 300), 50 in flight; CPU is user+sys of this process
from ``getrusage`` per probe. The figure is the median of the pairs' ratios (diagnosed over
reference); the target is at most 1.1.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

from engine.probes.tls import CertProber
from upwatch_bench.stats import cpu_seconds, per, ratio

IN_FLIGHT = 50
TARGET = 1.1


def _pki(directory: Path, crl_url: str) -> tuple[Path, Path, Path, Path, bytes]:
    """Root (bundle), leaf, leaf key, intermediate PEM files, and the intermediate's CRL."""
    from upwatch_bench.pki import Pki  # the tests' CA: the same chains the tests serve

    pki = Pki(directory)
    inter = pki.ca()
    leaf = pki.leaf(inter, hosts=("127.0.0.1",), cn="127.0.0.1", crl_url=crl_url,
                    days=(-1, 89))
    other = pki.leaf(inter)
    crl = pki.crl(inter, [(other, None)])
    files = []
    for name, data in (
        ("leaf.pem", leaf.pem),
        ("leaf.key", leaf.key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption())),
        ("inter.pem", inter.pem),
    ):
        path = directory / name
        path.write_bytes(data)
        files.append(path)
    return pki.bundle, files[0], files[1], files[2], crl


async def _window(prober: CertProber, port: int, n: int) -> tuple[float, int, set[str]]:
    """CPU seconds for ``n`` probes (``IN_FLIGHT`` at a time), the failures, and the
    revocation statuses seen."""
    statuses: set[str] = set()
    failed = 0
    left = n

    async def worker() -> None:
        nonlocal left, failed
        while left > 0:
            left -= 1
            out = await prober.probe("127.0.0.1", port)
            if out.error is not None:
                failed += 1
            if out.revocation is not None:
                statuses.add(str(out.revocation["status"]))

    c0 = cpu_seconds()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return cpu_seconds() - c0, failed, statuses


async def scenario_diagnoses(b: Any, pairs: int) -> dict[str, Any]:
    from upwatch_bench.lab.tlscompare import s_server, stop_servers, wait_port
    from upwatch_bench.pki import CrlServer

    n = b.opts.monitors
    # This process runs pinned to the harness's "other" cores; no engine runs here, so the
    # server takes the engine's core.
    core = min(b.engine_cpus) if getattr(b, "engine_cpus", None) else None
    b.progress.phase(f"certificate diagnoses: {pairs} pairs of {n:,} probes", 2.0 * pairs)
    rec: dict[str, Any] = {"scenario": "tls", "diagnoses": True, "probes_per_window": n,
                           "in_flight": IN_FLIGHT, "pairs": pairs}
    with tempfile.TemporaryDirectory() as tmp:
        async with CrlServer() as crls:
            bundle, cert, key, chain, crl = _pki(Path(tmp), crls.url("/inter.crl"))
            crls.files["/inter.crl"] = crl
            proc, port = s_server(["-cert_chain", str(chain)], cert, key, core=core)
            try:
                await asyncio.to_thread(wait_port, port)
                reference = CertProber(timeout=10.0, allow_private=True, ca_bundle=bundle,
                                       diagnoses=False)
                diagnosed = CertProber(timeout=10.0, allow_private=True, ca_bundle=bundle)
                # Warm both: the trust store, the parse caches, the CRL fetched and cached.
                for prober in (reference, diagnosed):
                    await _window(prober, port, min(n, 100))
                runs: dict[str, list[float]] = {"reference": [], "diagnosed": []}
                seen: set[str] = set()
                failures = 0
                for i in range(pairs):
                    order = ("reference", "diagnosed") if i % 2 == 0 else (
                        "diagnosed", "reference")
                    for name in order:
                        prober = reference if name == "reference" else diagnosed
                        cpu, failed, statuses = await _window(prober, port, n)
                        runs[name].append(cpu / n)
                        failures += failed
                        if name == "diagnosed":
                            seen |= statuses
                await reference.aclose()
                await diagnosed.aclose()
            finally:
                stop_servers([proc])
            rec["crl_fetches"] = sum(crls.hits.values())
    pair_ratios = [ratio(d, r) for d, r in zip(runs["diagnosed"], runs["reference"],
                                               strict=True)]
    good = [r for r in pair_ratios if r is not None]
    rec.update(
        reference_cpu_s_per_probe=[per(c, 1, 7) for c in runs["reference"]],
        diagnosed_cpu_s_per_probe=[per(c, 1, 7) for c in runs["diagnosed"]],
        ratio_pairs=pair_ratios,
        ratio=round(statistics.median(good), 3) if good else None,
        target=TARGET,
        failures=failures,
        revocation_statuses=sorted(seen),
    )
    rec["met"] = rec["ratio"] is not None and rec["ratio"] <= TARGET and failures == 0 \
        and seen == {"good"}
    return rec


def table(rec: dict[str, Any]) -> str:
    lines = [
        f"certificate probe, diagnoses and a cached CRL against none: {rec['pairs']} pairs "
        f"of {rec['probes_per_window']:,} probes, {rec['in_flight']} in flight",
        f"  reference CPU s/probe   {rec['reference_cpu_s_per_probe']}",
        f"  diagnosed CPU s/probe   {rec['diagnosed_cpu_s_per_probe']}",
        f"  ratio per pair          {rec['ratio_pairs']}",
        f"  ratio (median)          {rec['ratio']}  (target <= {rec['target']}: "
        f"{'met' if rec['met'] else 'NOT met'})",
        f"  failures {rec['failures']}, revocation {rec['revocation_statuses']}, "
        f"CRL fetches {rec['crl_fetches']}",
    ]
    return "\n".join(lines)
