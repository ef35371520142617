"""The import hook that adds ddpbench's callback to every framework Trainer a script builds: it watches
``transformers.trainer_callback`` (patching ``CallbackHandler.__init__``), ``lightning.pytorch`` and
``pytorch_lightning`` (``Trainer.__init__``); a framework older than :data:`~ddpbench.workload.frameworks.SUPPORTED`
gets one line on stderr and no callback."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.metadata
import os
import sys
from functools import wraps
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional

from ddpbench.workload.frameworks import ENV_TOOL, ENV_TOOL_DIR, ENV_TRACEML_CALLBACK, SUPPORTED

_MARK = "_ddpbench_hooked"


def supported(distribution: str) -> bool:
    """Whether the hook knows this framework's callback API (its installed major, minor: 0, 0 when unreadable); else
    says so in one line on stderr."""
    try:
        text = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        text = "0.0"
    found = tuple(int("".join(ch for ch in piece if ch.isdigit()) or 0) for piece in text.split(".")[:2])
    lowest = SUPPORTED[distribution]
    if found >= lowest:
        return True
    print(f"ddpbench: {distribution} {'.'.join(map(str, found))} is older than the recorder supports "
          f"({'.'.join(map(str, lowest))}); no per-step records, the trial keeps its wall-time figures",
          file=sys.stderr, flush=True)
    return False


def _traceml_callback(integration: str, class_name: str, present: List[Any]) -> Optional[Any]:
    """TraceML's own callback for this framework when the mode asks for it and ``present`` lacks one."""
    if os.environ.get(ENV_TRACEML_CALLBACK) != "1" or os.environ.get("TRACEML_DISABLED") == "1":
        return None
    if any(type(c).__name__ == class_name for c in present):
        return None
    module = importlib.import_module(f"traceml_ai.integrations.{integration}")
    module.init()  # TraceML's integrations want init() before their callback
    return getattr(module, class_name)()


def _after_init(cls: type, add_callbacks: Callable[[Any], None]) -> None:
    """Make ``cls.__init__`` call ``add_callbacks(self)`` once it has run."""
    original = getattr(cls, "__init__")

    @wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        add_callbacks(self)

    setattr(init, _MARK, True)
    setattr(cls, "__init__", init)


def _patch_hf(module: ModuleType) -> None:
    """Every ``CallbackHandler`` (one per HF Trainer) gets ddpbench's callback (and TraceML's, if asked)."""
    if getattr(module.CallbackHandler.__init__, _MARK, False) or not supported("transformers"):
        return
    from ddpbench.workload.frameworks.hf_callback import RecorderTrainerCallback

    def add(handler: Any) -> None:
        traceml = _traceml_callback("huggingface", "TraceMLTrainerCallback", handler.callbacks)
        if traceml is not None:
            handler.add_callback(traceml)
        if not any(isinstance(c, RecorderTrainerCallback) for c in handler.callbacks):
            handler.add_callback(RecorderTrainerCallback())
            tool = os.environ.get(ENV_TOOL)
            if tool == "wandb":  # what report_to=["wandb"] adds
                from transformers.integrations import WandbCallback

                handler.add_callback(WandbCallback())
            elif tool == "torch_profiler":
                from ddpbench.workload.frameworks.hf_callback import ProfilerTrainerCallback

                handler.add_callback(ProfilerTrainerCallback())

    _after_init(module.CallbackHandler, add)


def _patch_lightning(module: ModuleType) -> None:
    """Every Lightning ``Trainer`` of this namespace gets ddpbench's callback (and TraceML's, if asked)."""
    distribution = "pytorch_lightning" if module.__name__ == "pytorch_lightning" else "lightning"
    if getattr(module.Trainer.__init__, _MARK, False) or not supported(distribution):
        return
    from ddpbench.workload.frameworks.pl_callback import recorder_callback_class

    callback_class = recorder_callback_class(module.__name__)

    def add(trainer: Any) -> None:
        traceml = _traceml_callback("lightning", "TraceMLCallback", trainer.callbacks)
        if traceml is not None:
            trainer.callbacks.append(traceml)
        if not any(isinstance(c, callback_class) for c in trainer.callbacks):
            trainer.callbacks.append(callback_class())
            _lightning_tool(module.__name__, trainer)

    _after_init(module.Trainer, add)


def _lightning_tool(namespace: str, trainer: Any) -> None:
    """The framework-attached tool of ``$DDPBENCH_FRAMEWORK_TOOL`` on a Lightning Trainer: its own logger or profiler."""
    tool, out = os.environ.get(ENV_TOOL), os.environ.get(ENV_TOOL_DIR) or "."
    if tool == "wandb":
        logger = importlib.import_module(f"{namespace}.loggers").WandbLogger(offline=True, save_dir=out)
        trainer.loggers = [*trainer.loggers, logger]
    elif tool == "torch_profiler":
        from ddpbench.workload.frameworks.steps import profiler_schedule

        profiler = importlib.import_module(f"{namespace}.profilers").PyTorchProfiler
        trainer.profiler = profiler(dirpath=out, filename=f"rank{os.environ.get('RANK', '0')}", export_to_chrome=True,
                                    schedule=profiler_schedule())


TARGETS: Dict[str, Callable[[ModuleType], None]] = {
    "transformers.trainer_callback": _patch_hf,
    "lightning.pytorch": _patch_lightning,
    "pytorch_lightning": _patch_lightning,
}
"""Watched module -> what to patch once it has loaded."""


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then the module's patch."""

    def __init__(self, original: Any, fullname: str) -> None:
        self.original = original
        self.fullname = fullname

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)

    def create_module(self, spec: Any) -> Optional[ModuleType]:
        create = getattr(self.original, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self.original.exec_module(module)
        try:
            TARGETS[self.fullname](module)
        except Exception as error:  # the script must run as it would without ddpbench
            print(f"ddpbench: framework recorder not attached to {self.fullname}: {error}", file=sys.stderr, flush=True)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the watched modules, whichever finder after it finds them."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


def install() -> None:
    """Patch the watched modules already imported, watch for the others (once per process)."""
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    for name, patch in TARGETS.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
    sys.meta_path.insert(0, _Finder())
