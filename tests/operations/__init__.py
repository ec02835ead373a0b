"""Running the service: command line, embedded database, systemd units, logs, metrics,
migrations, secrets at rest, crash recovery, the build."""
