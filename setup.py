"""Package discovery that pyproject.toml cannot express: every package under src/, found automatically, plus
the top-level conf/ shipped as ``ddpbench.conf`` (its only copy; see ``package-dir`` in pyproject.toml)."""

from setuptools import find_namespace_packages, setup

setup(packages=[*find_namespace_packages("src", include=["ddpbench", "ddpbench.*", "hydra_plugins.*"]),
                "ddpbench.conf"])
