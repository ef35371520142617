"""``python -m ddpbench``: see :mod:`ddpbench.app`."""

from ddpbench.app import main

if __name__ == "__main__":
    main()
