"""A c-ares channel (``pycares.Channel``) with the options the prober's resolver needs and
pycares does not expose: c-ares's query cache off, and a longest time-out per try.

Kept apart from engine/probes/resolver.py, which is compiled (engine/runtime/compiled.py): the
stand-in for pycares's cffi library below is a class made per call, and mypyc compiles no
class defined inside a function.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Final

import pycares

log = logging.getLogger(__name__)

# ares.h's ARES_OPT_MAXTIMEOUTMS and ARES_OPT_QUERY_CACHE: pycares (5.2) exposes neither
# option nor its constant.
_ARES_OPT_MAXTIMEOUTMS: Final = 1 << 20
_ARES_OPT_QUERY_CACHE: Final = 1 << 21


def channel(*, max_timeout: float | None = None, **options: Any) -> pycares.Channel:
    """A ``pycares.Channel`` with c-ares's query cache off (``qcache_max_ttl`` 0, as Node.js
    does since c-ares turned it on by default): the resolver keeps the answers, per TTL and
    clamped, and a second cache below it only costs memory (engine/probes/resolver.py);
    and, with ``max_timeout`` (s), no try waiting longer than that (``maxtimeout``).

    pycares builds the options inside ``Channel()`` and offers no knob for either, so the
    call is made with its ``_lib`` (the cffi library it calls c-ares through) seen through a
    stand-in that adds them to ``ares_init_options``; everything else passes through, and
    the real library is put back before this returns. A pycares that takes
    ``qcache_max_ttl`` gets it as an argument; one without ``_lib`` gets c-ares's default,
    with a warning."""
    if "qcache_max_ttl" in inspect.signature(pycares.Channel).parameters:
        options["qcache_max_ttl"] = 0
        if max_timeout is not None and "maxtimeout" in inspect.signature(
                pycares.Channel).parameters:
            options["maxtimeout"] = max_timeout
        return pycares.Channel(**options)
    lib: Any = getattr(pycares, "_lib", None)
    if lib is None or not hasattr(lib, "ares_init_options"):
        log.warning("pycares %s: cannot turn c-ares's query cache off",
                    getattr(pycares, "__version__", "?"))
        return pycares.Channel(**options)

    class NoQueryCache:
        def __getattr__(self, name: str) -> Any:
            return getattr(lib, name)

        def ares_init_options(self, channel: Any, opts: Any, optmask: int) -> Any:
            opts.qcache_max_ttl = 0
            optmask |= _ARES_OPT_QUERY_CACHE
            if max_timeout is not None:
                opts.maxtimeout = max(1, round(max_timeout * 1000))
                optmask |= _ARES_OPT_MAXTIMEOUTMS
            return lib.ares_init_options(channel, opts, optmask)

    setattr(pycares, "_lib", NoQueryCache())  # noqa: B010 - a private name, on purpose
    try:
        return pycares.Channel(**options)
    finally:
        setattr(pycares, "_lib", lib)  # noqa: B010
