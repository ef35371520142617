"""``python -m ddpbench.bisect``: the same as ``ddpbench-bisect``."""

from ddpbench.bisect.cli import main

if __name__ == "__main__":
    main()
