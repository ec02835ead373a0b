"""What a user configures, validated once: the API's input rules (``validation``), the URL
schemes of uptime monitors (``scheme``, the contract; ``schemes``, the registry; one module
of rules per scheme, ``http_scheme``, ``icmp_scheme``), custom requests and assertions
(``requests``, ``requestspecs``; ``assertrules``, what every scheme's assertion rules
share), and monitors as code: a file's document (``file``), the plan against an account's
monitors (``plan``), applying it (``apply``) and its commands (``commands``).

May import :mod:`engine.probes` (the compiled request a probe sends), :mod:`engine.domain`
and :mod:`engine.runtime`; never the store or the web layer, which call into it.
"""
