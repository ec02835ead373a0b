"""What every part of the process runs on: settings (validated once at start-up), the
exception tree, logging, Prometheus metrics, systemd notification, secrets at rest, giving
freed memory back after a burst, and the list of mypyc-compiled modules.

Imports nothing else of ``engine``: it is the bottom layer. Must stay import-free itself
(``engine/__init__.py`` reads ``compiled`` before anything else is loaded).
"""
