"""What each child process of a bench run runs, by role (``upwatch_bench.child.ROLES``)."""
