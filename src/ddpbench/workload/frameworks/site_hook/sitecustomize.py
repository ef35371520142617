"""Python's ``sitecustomize`` for the ranks of a framework trial (this folder first on their ``PYTHONPATH``): installs
ddpbench's Trainer hook when ``DDPBENCH_FRAMEWORK_HOOK=1`` and ``DDPBENCH_METRICS_DIR`` are set, importing nothing of
the frameworks; any ``sitecustomize`` it shadows still runs."""

import os
import sys


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows, if there is one."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if os.environ.get("DDPBENCH_FRAMEWORK_HOOK") == "1" and os.environ.get("DDPBENCH_METRICS_DIR"):
    try:
        from ddpbench.workload.frameworks import attach

        attach.install()
    except Exception as error:  # the job runs on without ddpbench's records
        print(f"ddpbench: framework recorder not installed: {error}", file=sys.stderr)
_chain()
