"""ddpbench's side of a paired sweep (``hydra.sweeper.driver: ddpbench.sweep.driver.SweepDriver``).

Before the first trial every trial is composed and checked; then progress lines, failures counted for the exit
status, ``repeat=auto``'s stops, and on Ctrl-C/SIGTERM/SIGHUP the report of what finished and exit ``128 + signal``.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, NoReturn, Sequence

from omegaconf import OmegaConf

from ddpbench import state
from ddpbench.cluster import backend_for
from ddpbench.config import DdpbenchConfig, switches, typed
from ddpbench.errors import DdpbenchError, fail
from ddpbench.formats.condition import SWEEPER_KEYS, parse_overrides
from ddpbench.launcher.slurm import allocation
from ddpbench.sweep import adaptive
from ddpbench.sweep.order import SweepOrderError
from ddpbench.sweep.progress import Progress, succeeded, summary_from
from ddpbench.sweep.report import write_sweep_report
from ddpbench.sweep.signals import stop_signals
from ddpbench.sweep.validate import check_baseline, check_jobs


def job_dir_of(summary: Mapping[str, Any], result: Any) -> str:
    """A finished job's own folder: from its trial summary, else from the Hydra config it ran with ("" if unknown)."""
    if summary.get("job_dir"):
        return str(summary["job_dir"])
    try:
        return str(result.hydra_cfg.hydra.runtime.output_dir)
    except AttributeError:
        return ""


class SweepDriver:
    """Runs the paired sweeper's jobs as a ddpbench sweep; ``sweeper`` is the set-up PairedSweeper."""

    def __init__(self, sweeper: Any) -> None:
        self.sweeper = sweeper
        self.config = sweeper.config
        self.launcher = sweeper.launcher
        self.hydra_context = sweeper.hydra_context

    def jobs(self, arguments: Sequence[str], sweep_name: str) -> List[List[str]]:
        """Every trial's overrides in paired order, with its pair position and the sweep's name."""
        try:
            ordered = self.sweeper.ordered_jobs(arguments, skip=SWEEPER_KEYS)
        except SweepOrderError as error:
            fail(str(error))
        return [[*job.overrides, f"pair_position={job.pair_position}", f"sweep_name={sweep_name}"]
                for job in ordered]

    def sweep(self, arguments: Sequence[str]) -> Any:
        """Check, then run every trial; the launcher's returns per batch."""
        from ddpbench.io import storage_error, writable_dir_problem
        from ddpbench.sweep.lock import hold_sweep_lock, live_holder_refusal
        from ddpbench.trial.runner import trial_timeout_s

        try:
            settings = typed(self.config)
            given = {override.key_or_group for override in parse_overrides(arguments)}
            arguments, auto = adaptive.expand_auto(arguments, settings.precision.max_pairs)
            jobs = self.jobs(arguments, settings.sweep_name)
            cfgs = check_jobs(self.hydra_context, self.config, jobs)
            check_baseline(settings.baseline, cfgs, explicit="baseline" in given)
            if auto:
                adaptive.check_precision(settings.precision, [c.mode.name for c in cfgs],
                                         all(c.cluster.shared_dir for c in cfgs),
                                         all(switches(c) for c in cfgs))
            whole = allocation.wanted(self.launcher, cfgs)
        except DdpbenchError as error:
            fail(str(error))
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        problem = writable_dir_problem(sweep_dir)
        if problem is not None:
            fail(f"cannot write the sweep dir {sweep_dir}: {problem}")
        try:  # what the backends hold for the whole sweep (static node 0: its coordinator port)
            for cfg in cfgs:
                backend_for(cfg).prepare_sweep(cfg)
            # one driver per sweep dir (per node rank), held until this process ends
            self.sweep_lock = hold_sweep_lock(sweep_dir, settings.cluster.node_rank)
        except DdpbenchError as error:  # static node 0's port or the lock is taken: by a live driver? name it
            fail(str(live_holder_refusal(sweep_dir, settings.cluster.node_rank) or error))
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        upto = "up to " if auto else ""
        print(f"ddpbench: sweep of {upto}{len(jobs)} trials -> {sweep_dir}", flush=True)
        progress = Progress(len(jobs))
        stopper = (adaptive.AdaptiveStop(sweep_dir, settings.precision, settings.baseline, settings.budget_pct,
                                         settings.report.job_hours)
                   if auto else None)
        groups = adaptive.pair_groups(jobs) if auto else {}
        finished: Dict[Any, List[str]] = {}
        returns: List[Any] = []
        with stop_signals():
            try:
                if whole:
                    timeouts = [trial_timeout_s(cfg) for cfg in cfgs]
                    if self.launcher.run_one_allocation(self.config, settings.sweep_name, timeouts) != 0:
                        state.record_failure()
                    return []
                for batch in self.sweeper.batches(jobs):
                    if stopper is not None:
                        batch = [job for job in batch if not stopper.is_stopped(job)]
                        if not batch:
                            continue
                    progress.starting(batch)
                    results = self.launcher.launch(batch, initial_job_idx=progress.done)
                    for overrides, result in zip(batch, results):
                        summary = summary_from(result)
                        if not succeeded(summary):
                            state.record_failure()
                        progress.finished(summary)
                        if stopper is not None:
                            self.decide(stopper, groups, finished, overrides, job_dir_of(summary, result))
                    returns.append(results)
                if stopper is not None:
                    print(f"ddpbench: repeat=auto ran {progress.done} of up to {len(jobs)} trials; why: "
                          f"{sweep_dir / 'stopping.json'}", flush=True)
            except DdpbenchError as error:
                fail(str(error))
            except KeyboardInterrupt as stop:  # a plain one is SIGINT's
                self.stopped(int(getattr(stop, "signum", signal.SIGINT)), progress, sweep_dir, settings)
            except OSError as error:  # Hydra's own job files (.hydra/) on a full or read-only disk
                fail(str(storage_error(error.filename or sweep_dir, error)))
        return returns

    @staticmethod
    def decide(stopper: adaptive.AdaptiveStop, groups: Mapping[Any, int], finished: Dict[Any, List[str]],
               overrides: Sequence[str], job_dir: str) -> None:
        """After a job of a repeat=auto sweep: once its pair is complete, ask whether its condition is decided."""
        from ddpbench.analysis.rerun import rerun_reason

        group = (adaptive.condition_key(overrides), adaptive.repeat_of(overrides))
        finished.setdefault(group, []).append(job_dir)
        if len(finished[group]) < groups[group]:
            return
        decided = stopper.after_pair(overrides, [d for d in finished[group] if d])
        shown = " ".join(decided.condition) or "the sweep"
        for excluded in decided.excluded:
            if excluded["repeat"] == group[1]:
                print(f"ddpbench: {shown}: {rerun_reason(group[1], excluded['why'])}", flush=True)
        if decided.reason is not None:
            print(f"ddpbench: {shown}: stop after {decided.pairs} pairs ({decided.reason})", flush=True)

    def stopped(self, signum: int, progress: Progress, sweep_dir: Path, settings: DdpbenchConfig) -> NoReturn:
        """After a stop signal: say so, write the report of what finished, exit ``128 + signum``."""
        how = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        print(f"ddpbench: interrupted{how} after {progress.done} of {progress.total} trials; writing the report "
              "of what finished", file=sys.stderr, flush=True)
        state.record_failure()
        write_sweep_report(sweep_dir, settings)
        raise SystemExit(128 + signum)
