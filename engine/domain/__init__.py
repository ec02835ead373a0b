"""The rules, without I/O: the checks' state machines (``evaluate`` for uptime,
``certificate_states``, ``heartbeat_states``, ``domain_expiry``), probe outcomes, event
names and webhook payloads, maintenance windows, uptime statistics, ping figures and their
assertions (``ping``), timing sketches, time formats, counts in words and the address
policy (which addresses a probe may reach).

Pure functions and plain data that take ``now`` as an argument; testable without a
database, a socket or a clock. May import only :mod:`engine.runtime`.
"""
