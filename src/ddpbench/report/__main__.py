"""``python -m ddpbench.report``: see :mod:`ddpbench.report.cli`."""

import sys

from ddpbench.report.cli import main

sys.exit(main())
