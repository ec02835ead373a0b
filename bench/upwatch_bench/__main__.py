"""``python -m upwatch_bench SCENARIO ...``: the same as ``upwatch-bench``."""

import sys

from upwatch_bench.cli import main

sys.exit(main(prog="upwatch-bench"))
