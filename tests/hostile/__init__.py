"""A hostile world: attacking API clients and peers, hostile targets, DNS rebinding, the
database going away."""
