"""The paired sweeper: Hydra's basic sweeper with paired, alternating order, repeat ranges,
up-front validation, one progress line per trial, and a report even after Ctrl-C."""

from __future__ import annotations

import logging
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import OmegaConf

from hydra_plugins.ddpbench_sweeper.order import OrderedJob, SweepOrderError, order_jobs

log = logging.getLogger(__name__)


@dataclass
class PairedSweeperConf:
    """Settings of the paired sweeper."""

    _target_: str = "hydra_plugins.ddpbench_sweeper.paired_sweeper.PairedSweeper"
    # jobs handed to the launcher at once; 1 = strictly one trial at a time (keeps pairs adjacent)
    max_batch_size: Optional[int] = 1
    # extra sweep parameters, as Hydra's basic sweeper
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="paired", node=PairedSweeperConf, provider="ddpbench")


def _error(message: str) -> None:
    print(f"ddpbench: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


class PairedSweeper(BasicSweeper):
    """Orders jobs as pairs of the swept modes, alternating per repeat (see ``order.py``)."""

    def __init__(self, max_batch_size: Optional[int] = 1, params: Optional[Dict[str, str]] = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        self.sweep_name: str = ""
        self.jobs: List[OrderedJob] = []

    def split_arguments(self, overrides: List[Override], max_batch_size: Optional[int]) -> List[List[List[str]]]:  # type: ignore[override]
        swept: "OrderedDict[str, List[str]]" = OrderedDict()
        for override in overrides:
            key = override.get_key_element()
            if key in ("pair_position", "sweep_name"):
                continue
            if override.is_sweep_override():
                if not override.is_discrete_sweep():
                    raise HydraException(f"PairedSweeper does not support sweep type: {override.value_type}")
                swept[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
            else:
                swept[key] = [f"{key}={override.get_value_element_as_str()}"]
        try:
            self.jobs = order_jobs(swept)
        except SweepOrderError as error:
            _error(str(error))
        batches = [
            [*job.overrides, f"pair_position={job.pair_position}", f"sweep_name={self.sweep_name}"]
            for job in self.jobs
        ]
        size = len(batches) if not max_batch_size or max_batch_size < 0 else max_batch_size
        return [batches[i : i + size] for i in range(0, len(batches), size)]

    def _validate_jobs(self, batches: Sequence[Sequence[Sequence[str]]]) -> None:
        """Compose and check every job's config before the first launch."""
        from ddpbench.cluster import prepare_sweep
        from ddpbench.errors import DdpbenchError
        from ddpbench.trial.runner import check_trial_config

        assert self.hydra_context is not None and self.config is not None
        for batch in batches:
            for overrides in batch:
                cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
                try:
                    job_cfg = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"])
                    check_trial_config(job_cfg)
                    prepare_sweep(job_cfg)
                except DdpbenchError as error:
                    _error(str(error))

    def sweep(self, arguments: List[str]) -> Any:
        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        from ddpbench import state

        self.sweep_name = str(self.config.sweep_name)
        params = [f"{k}={v}" for k, v in (self.params or {}).items()] + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides(params), self.max_batch_size)
        self._validate_jobs(self.overrides)

        from ddpbench.io import storage_error, writable_dir_problem

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        problem = writable_dir_problem(sweep_dir)
        if problem is not None:
            _error(f"cannot write the sweep dir {sweep_dir}: {problem}")
        from ddpbench.errors import DdpbenchError
        from ddpbench.sweep_lock import hold_sweep_lock

        try:  # one driver per sweep dir (per node rank); kept until this process ends
            self.sweep_lock = hold_sweep_lock(sweep_dir, self.config)
        except DdpbenchError as error:
            _error(str(error))
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        total = sum(len(batch) for batch in self.overrides)
        print(f"ddpbench: sweep of {total} trials -> {sweep_dir}", flush=True)

        returns = []
        done = 0
        started = time.monotonic()
        try:
            if self._one_allocation():  # the whole sweep ran in one SLURM job
                return []
            while not self.is_done():
                batch = self.get_job_batch()
                for offset, overrides in enumerate(batch):
                    shown = " ".join(o for o in overrides if not o.startswith(("sweep_name=", "pair_position=")))
                    print(f"[{done + offset + 1}/{total}] start {shown}", flush=True)
                results = self.launcher.launch(batch, initial_job_idx=done)
                for result in results:
                    done += 1
                    self._report_result(result, done, total, started)
                returns.append(results)
        except KeyboardInterrupt:
            print(f"ddpbench: interrupted after {done} of {total} trials; writing the report of what finished",
                  file=sys.stderr, flush=True)
            state.record_failure()
            _write_report(sweep_dir)
            raise SystemExit(130)
        except OSError as error:  # Hydra's own job files (.hydra/) on a full or read-only disk
            _error(str(storage_error(error.filename or sweep_dir, error)))
        return returns

    def _one_allocation(self) -> bool:
        """``cluster.slurm.one_allocation`` with the SLURM launcher: submit the whole sweep as one job, wait.

        False (run as usual) otherwise, e.g. inside that job, where the sweep runs with the basic launcher.
        """
        from hydra_plugins.ddpbench_sweeper.bounded_slurm_launcher import BoundedSlurmLauncher, run_one_allocation
        from ddpbench import state
        from ddpbench.trial.runner import trial_timeout_s

        if not isinstance(self.launcher, BoundedSlurmLauncher):
            return False
        assert self.hydra_context is not None and self.config is not None
        cfgs = [self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
                for batch in self.overrides for overrides in batch]
        flags = {bool(cfg.cluster.slurm.get("one_allocation", False)) for cfg in cfgs}
        if flags == {False}:
            return False
        if len(flags) > 1 or len({(str(cfg.cluster.kind), int(cfg.cluster.nnodes)) for cfg in cfgs}) > 1:
            _error("cluster.slurm.one_allocation=true needs every trial of the sweep on the same SLURM cluster")
        arguments = [str(a) for a in self.config.hydra.overrides.task]
        timeouts = [trial_timeout_s(OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]))
                    for cfg in cfgs]
        if run_one_allocation(self.launcher, arguments, self.sweep_name, timeouts) != 0:
            state.record_failure()
        return True

    def _report_result(self, result: Any, done: int, total: int, started: float) -> None:
        from ddpbench import state

        try:
            summary = result.return_value or {}
        except Exception as error:  # a job that raised: counted, reported, the sweep goes on
            summary = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
        status = summary.get("status")
        if status != "ok" and not (status == "node_done" and summary.get("node_ok")):
            state.record_failure()
        elapsed = time.monotonic() - started
        eta = elapsed / done * (total - done)
        note = " (already done; skipped)" if summary.get("resumed") else ""
        line = (
            f"[{done}/{total}] {status}{note} mode={summary.get('mode')} repeat={summary.get('repeat')} "
            f"wall={_fmt(summary.get('wall_s'), '.2f')}s steps/s={_fmt(summary.get('steps_per_s'), '.1f')} "
            f"ETA={eta:.0f}s"
        )
        if status != "ok" and summary.get("error"):
            line += f" error: {summary['error']}"
        print(line, flush=True)


def _write_report(sweep_dir: Path) -> None:
    try:
        from ddpbench.callbacks import write_sweep_report

        write_sweep_report(sweep_dir)
    except Exception as error:  # the report must never hide the sweep's own outcome
        print(f"ddpbench: could not write the report: {error}", file=sys.stderr, flush=True)
