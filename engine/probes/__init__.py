"""The I/O of probing: the reactor (epoll outside the loop's callbacks), the resolver
(c-ares with a cache), the TLS layer over memory BIOs, and the probers themselves
(``http.HttpProber``, ``tls.CertProber``, ``icmp.IcmpProber`` for ping), and what they
share: the connection (``_net``), addresses and the private-address rule (``addresses``),
deadlines (``deadlines``) and the words of failures (``failures``).

A prober returns a plain outcome (:mod:`engine.domain.outcomes`) with a reason in words and
measured phases; it never raises (except cancellation), never blocks the loop and never
outlives its timeout. May import only :mod:`engine.domain` and :mod:`engine.runtime`.
"""
