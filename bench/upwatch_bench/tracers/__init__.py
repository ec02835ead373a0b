"""Opt-in profilers of the measured windows, each switched on by a flag of the bench:

- ``pyspy``: ``--profile DIR`` (``--profile-native``), py-spy's sampled stacks;
- ``kernelprof``: ``--perf DIR`` (``--perf-callgraph``) or ``--strace DIR``, where the system
  time goes; ``python -m upwatch_bench.tracers.kernelprof DIR`` divides it per operation;
- ``callgrind``: ``--callgrind DIR``, user-space instructions per probe.

(``--cprofile DIR`` is cProfile, run inside the measured roles themselves.)
"""
