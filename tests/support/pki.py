"""The tests' certificate authority and CRL server: :mod:`upwatch_bench.pki` (the bench's
certificate-diagnosis scenario serves the same chains)."""

from upwatch_bench.pki import (
    HOSTS,
    CrlServer,
    Issued,
    Pki,
    build,
    ec_key,
    now,
    rsa_key,
    server_context,
)

__all__ = ["HOSTS", "CrlServer", "Issued", "Pki", "build", "ec_key", "now", "rsa_key",
           "server_context"]
