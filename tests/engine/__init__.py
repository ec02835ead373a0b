"""The engine running over the real store: scheduling, outcomes, results buffer, limits,
configuration changes, database outages."""
