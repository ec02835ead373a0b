"""The web API: accounts, authentication, monitors and checks, limits, validation, OpenAPI,
and the PingPing-compatible endpoints, over real HTTP and PostgreSQL."""
