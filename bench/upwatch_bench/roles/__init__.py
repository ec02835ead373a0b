"""What each child process of a bench run runs, by role (``upwatch_bench.child.ROLES``);
:mod:`.rounds` is the command loop the side-by-side probe roles share."""
