"""ddpbench's Hydra plugins: the paired sweeper (``hydra/sweeper=paired``) and the SLURM launcher.

Setuptools' default editable install hides this package from Hydra's plugin scan, so ddpbench's app calls
:func:`register`. This package must stay light: Hydra imports it in every Hydra app.
"""

import importlib
import inspect
import pkgutil


def register() -> None:
    """Make this package's plugins (their config nodes and classes) known to Hydra in any install mode."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.plugin import Plugin

    plugins = Plugins.instance()  # the scan runs first: its copy of a module, if any, is the one registered
    for info in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        module = importlib.import_module(info.name)
        for _, member in inspect.getmembers(module, inspect.isclass):
            if member.__module__ == module.__name__ and issubclass(member, Plugin) and not inspect.isabstract(member):
                plugins.register(member)
