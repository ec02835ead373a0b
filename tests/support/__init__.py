"""Helpers the tests share (their fixtures live in ``conftest.py`` files):

- ``wait``: ``wait_until``, the bounded wait on a condition that every test uses instead of a
  fixed sleep.
- ``metrics``: reading one sample from a ``Metrics`` registry or from a ``/metrics`` page.
- ``engine_support``: monitors and checks made with direct SQL, an engine run as a context
  manager, rows read back (``fetch``, ``events_of``).
- ``instances``: real ``upwatch run`` processes and the loopback servers they talk to.
- ``outage``: what the database outage tests share: environment, monitor, status, JSON log.
- ``targets``: loopback HTTP, HTTPS and TLS targets whose behaviour a test switches; ports.
- ``notify_support``: a loopback SMTP server and HTTP receiver for notification channels.
- ``webhook_support``: a webhook receiver that answers as a test chooses, the deliverer,
  events queued with SQL.
- ``hostile_support``: many monitors at once, a fleet of hostile servers, percentiles.
- ``fake_dns``: a resolver whose answers a test chooses.
- ``resolver``: the probes' resolver on one loopback DNS server and a hand-moved clock.
- ``openapi``: checking JSON values against the OpenAPI document.
- ``client_hello``: reading the ClientHello the HTTPS probe writes.
- ``cdp_browser``: headless Chromium over the DevTools protocol.
- ``status_page_seed``: status page data seeded through the real store.
- ``cli``: the ``upwatch`` command line run as a process.
- ``web``: serving an aiohttp application on a loopback port.
"""
