"""ddpbench's Hydra plugins: the paired sweeper (``hydra/sweeper=paired``) and the SLURM launcher.

Hydra's plugin scan finds them where the install shows this package to it (a wheel, a strict editable
install); setuptools' default editable mode hides it, so ddpbench's app calls :func:`register` instead of
relying on the scan. This package and its modules must stay light: Hydra imports them in every Hydra app.
"""

import importlib
import inspect
import pkgutil


def register() -> None:
    """Make this package's plugins known to Hydra in any install mode, whether or not its scan found them.

    Imports each plugin module (which stores its config node in Hydra's ConfigStore) and registers its
    plugin classes with Hydra's plugin registry, which is what instantiating ``hydra/sweeper=paired`` or
    ``hydra/launcher=ddpbench_slurm`` looks them up in.
    """
    from hydra.core.plugins import Plugins
    from hydra.plugins.plugin import Plugin

    plugins = Plugins.instance()  # the scan runs first: its copy of a module, if any, is the one registered
    for info in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        module = importlib.import_module(info.name)
        for _, member in inspect.getmembers(module, inspect.isclass):
            if member.__module__ == module.__name__ and issubclass(member, Plugin) and not inspect.isabstract(member):
                plugins.register(member)
