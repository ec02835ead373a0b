"""The probes: HTTP and HTTPS, TLS and its sessions, the reactor, the resolver, URLs."""
