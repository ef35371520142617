"""``hydra/sweeper=paired``: Hydra's grid sweep in paired, alternating order (``ddpbench.sweep.order``).

Any Hydra app may use it; a ``driver`` class (ddpbench's :mod:`ddpbench.sweep.driver`) adds checks, progress,
signals and reports. Only Hydra, OmegaConf and the standard library are imported at module level: Hydra imports
it in every Hydra app's plugin scan.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf


@dataclass
class PairedSweeperConf:
    """Settings of the paired sweeper (``hydra.sweeper.*``)."""

    _target_: str = "hydra_plugins.ddpbench_sweeper.paired_sweeper.PairedSweeper"
    # jobs handed to the launcher at once; 1 = one at a time (keeps pairs adjacent); null = all at once
    max_batch_size: Optional[int] = 1
    # extra sweep parameters, as Hydra's basic sweeper (key -> "a,b,c")
    params: Optional[Dict[str, str]] = None
    # the key whose values are paired within each repeat
    mode_key: str = "mode"
    # the key numbering repeats; "1-5" is a range; its value picks the row of the alternating order
    repeat_key: str = "repeat"
    # dotted path of a class adding validation, progress, signal handling and reports (null: none)
    driver: Optional[str] = None
    # the key mapping a mode to versions of its tool ({mode: [spec, ...]}): each spec is an arm of its own
    versions_key: str = "versions"
    # the key each such arm's jobs get, set to its spec
    version_key: str = "version"


ConfigStore.instance().store(group="hydra/sweeper", name="paired", node=PairedSweeperConf, provider="ddpbench")


@dataclass
class PairedSweeper(Sweeper):
    """Launches the paired, alternating order in batches of ``max_batch_size`` jobs (settings: PairedSweeperConf)."""

    max_batch_size: Optional[int] = 1
    params: Optional[Dict[str, str]] = None
    mode_key: str = "mode"
    repeat_key: str = "repeat"
    driver: Optional[str] = None
    versions_key: str = "versions"
    version_key: str = "version"
    hydra_context: Optional[HydraContext] = field(default=None, init=False)
    config: Optional[DictConfig] = field(default=None, init=False)
    launcher: Optional[Launcher] = field(default=None, init=False)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    def ordered_jobs(self, arguments: Sequence[str], skip: Sequence[str] = ()) -> List[Any]:
        """Every job (:class:`ddpbench.sweep.order.OrderedJob`) in launch order; ``skip``: keys a driver sets.

        Raises :class:`ddpbench.sweep.order.SweepOrderError` for a sweep that cannot be ordered.
        """
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from ddpbench.sweep.order import order_jobs

        loader = self.hydra_context.config_loader if self.hydra_context is not None else None
        parser = OverridesParser.create(config_loader=loader)
        swept: Dict[str, List[str]] = {}
        versions: Dict[str, List[str]] = {}
        params = [f"{key}={value}" for key, value in (self.params or {}).items()]
        for override in parser.parse_overrides(params + list(arguments)):
            key = override.get_key_element()
            if key in skip:
                continue
            if key == self.versions_key and not override.is_sweep_override():
                versions = self.versions_of(override.value())
            if not override.is_sweep_override():
                swept[key] = [f"{key}={override.get_value_element_as_str()}"]
            elif override.is_discrete_sweep():
                swept[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
            else:
                raise HydraException(f"PairedSweeper does not support sweep type: {override.value_type}")
        return order_jobs(swept, mode_key=self.mode_key, repeat_key=self.repeat_key, versions=versions,
                          version_key=self.version_key)

    def versions_of(self, value: Any) -> Dict[str, List[str]]:
        """``versions={mode: [spec, ...]}`` as a dict of string lists; SweepOrderError when it is not one."""
        from ddpbench.sweep.order import SweepOrderError

        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, (list, tuple)) for v in value.values()):
            raise SweepOrderError(f"{self.versions_key}: expected {{mode: [version, ...]}}, e.g. "
                                  f"'{self.versions_key}={{traceml:[0.4.2,0.5.0]}}'")
        return {str(mode): [str(spec) for spec in specs] for mode, specs in value.items()}

    def batches(self, jobs: List[List[str]]) -> List[List[List[str]]]:
        """``jobs`` in launch batches of ``max_batch_size``."""
        size = len(jobs) if not self.max_batch_size or self.max_batch_size < 0 else self.max_batch_size
        return [jobs[i : i + size] for i in range(0, len(jobs), max(1, size))]

    def sweep(self, arguments: List[str]) -> Any:
        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        if self.driver:
            from hydra.utils import get_class

            return get_class(self.driver)(self).sweep(arguments)
        from ddpbench.sweep.order import SweepOrderError

        try:
            jobs = [list(job.overrides) for job in self.ordered_jobs(arguments)]
        except SweepOrderError as error:
            raise HydraException(str(error)) from error
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        returns: List[Sequence[Any]] = []
        done = 0
        for batch in self.batches(jobs):
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=done)
            for result in results:
                _ = result.return_value  # a job that raised ends the sweep, as with the basic sweeper
            done += len(batch)
            returns.append(results)
        return returns
