"""aiohttp on the engine's loop: the application and its middleware (``app``: auth, limits,
errors as JSON, access log), the authenticated API (``api``), the public status pages and
badges (``status``), and the PingPing-compatible mount (``pingping``).

The web never waits for the engine: it reads and writes the store, and the engine hears of
changes through LISTEN. May import everything but :mod:`engine.daemon` and :mod:`engine.cli`.
"""
