"""``python -m ddpbench.collect``: see :mod:`ddpbench.collect.cli`."""

import sys

from ddpbench.collect.cli import main

sys.exit(main())
