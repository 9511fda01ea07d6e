"""``python -m lab.pipeline``: the stages' command line (:mod:`lab.pipeline.cli`)."""

import sys

from lab.pipeline.cli import main

sys.exit(main())
