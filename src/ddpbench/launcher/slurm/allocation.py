"""``cluster.slurm.one_allocation=true``: the whole sweep as ONE SLURM job (``<sweep>/.slurm/allocation.sbatch``) so
every trial runs on the same nodes; its batch step runs the same sweep with the basic launcher in the same sweep dir,
and the submitter waits (bounded), adds the job to each trial.json it wrote and prints its progress (docs/slurm.md)."""

from __future__ import annotations

import contextlib
import logging
import math
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

from omegaconf import DictConfig

from ddpbench.config import DdpbenchConfig
from ddpbench.errors import DdpbenchError, error_line
from ddpbench.formats.condition import parse_overrides
from ddpbench.formats.trial_record import TRIAL_FILE
from ddpbench.io import read_json, write_json_atomic
from ddpbench.cluster.slurm.wait import RESULT_GRACE_S, SLURM_CALL_TIMEOUT_S, Bounds, await_job

log = logging.getLogger(__name__)

#: launcher / sweep overrides the in-allocation driver must not get (it runs the basic launcher in the same dir)
OUTER_ONLY = ("hydra.launcher", "hydra/launcher", "hydra.sweep.dir", "sweep_name")
#: seconds per trial added to the allocation's time limit: interpreter start, srun step launch, node records
TRIAL_OVERHEAD_S = 30.0


def wanted(launcher: Any, cfgs: Sequence[DdpbenchConfig]) -> bool:
    """Whether this sweep runs as one allocation: the SLURM launcher (not the basic one inside the allocation) and
    ``cluster.slurm.one_allocation``; DdpbenchError when only some trials ask for it or their clusters differ."""
    if not hasattr(launcher, "run_one_allocation"):
        return False
    flags = {cfg.cluster.slurm.one_allocation for cfg in cfgs}
    if flags == {False}:
        return False
    if len(flags) > 1 or len({(cfg.cluster.kind, cfg.cluster.nnodes) for cfg in cfgs}) > 1:
        raise DdpbenchError("cluster.slurm.one_allocation=true needs every trial of the sweep on the same SLURM "
                            "cluster")
    return True


def allocation_script(params: Dict[str, Any], command: List[str], sweep_dir: Path, minutes: int, cwd: Path) -> str:
    """The sbatch script of a one-allocation sweep: its batch step (first node) runs ``command``."""
    slurm_dir = sweep_dir / ".slurm"
    lines = ["#!/bin/bash", f"#SBATCH --job-name={params.get('name') or 'ddpbench'}",
             f"#SBATCH --nodes={int(params['nodes'])}", "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --time={minutes}",
             f"#SBATCH --output={slurm_dir}/allocation-%j.out", f"#SBATCH --error={slurm_dir}/allocation-%j.err"]
    for key, option, unit in (("partition", "partition", ""), ("cpus_per_task", "cpus-per-task", ""),
                              ("gpus_per_node", "gpus-per-node", ""), ("mem_gb", "mem", "GB")):
        if params.get(key) is not None:
            lines.append(f"#SBATCH --{option}={params[key]}{unit}")
    for key, value in (params.get("additional_parameters") or {}).items():
        option = str(key).replace("_", "-")
        if value is True:
            lines.append(f"#SBATCH --{option}")
        elif value not in (None, False):
            lines.append(f"#SBATCH --{option}={value}")
    lines += [str(line) for line in (params.get("setup") or [])]
    lines += [f"cd {shlex.quote(str(cwd))}", " ".join(shlex.quote(arg) for arg in command),
              f'echo $? > {shlex.quote(str(slurm_dir))}/allocation-"$SLURM_JOB_ID".rc']
    return "\n".join(lines) + "\n"


def run(params: Dict[str, Any], config: DictConfig, sweep_name: str, trial_timeouts_s: Sequence[float]) -> int:
    """Submit the whole sweep as one job (``params``: the launcher's), wait (bounded); its exit status (1: none)."""
    bounds = Bounds.from_params(params)
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    slurm_dir = sweep_dir / ".slurm"
    slurm_dir.mkdir(parents=True, exist_ok=True)
    total_s = sum(trial_timeouts_s) + TRIAL_OVERHEAD_S * len(trial_timeouts_s)
    minutes = params.get("timeout_min") or max(1, math.ceil((total_s + bounds.wait_margin_s) / 60.0))
    given = [str(o) for o in [*config.hydra.overrides.task, *config.hydra.overrides.hydra]]
    keep = [text for text, o in zip(given, parse_overrides(given)) if not o.key_or_group.startswith(OUTER_ONLY)]
    quoted = str(sweep_dir).replace("\\", "\\\\").replace("'", "\\'")  # a Hydra quoted string
    command = [sys.executable, "-m", "ddpbench", "-m", *keep, "hydra/launcher=basic", f"sweep_name={sweep_name}",
               f"hydra.sweep.dir='{quoted}'"]
    script = slurm_dir / "allocation.sbatch"
    script.write_text(allocation_script(params, command, sweep_dir, int(minutes), Path.cwd()))
    submitted_epoch = time.time()
    try:
        proc = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                              timeout=SLURM_CALL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise DdpbenchError(f"sbatch failed: {error}") from error
    if proc.returncode != 0:
        raise DdpbenchError(f"sbatch failed: {proc.stderr.strip()}")
    job_id = proc.stdout.strip().split(";")[0]
    out, err = slurm_dir / f"allocation-{job_id}.out", slurm_dir / f"allocation-{job_id}.err"
    print(f"ddpbench: one_allocation: SLURM job {job_id} runs all {len(trial_timeouts_s)} trials; log {out}",
          flush=True)
    outcome = await_job(job_id, bounds=bounds, limit_s=float(minutes) * 60.0, submitted=time.monotonic())
    rc_file = slurm_dir / f"allocation-{job_id}.rc"
    deadline = time.monotonic() + RESULT_GRACE_S
    while not rc_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    problem = outcome.problem
    try:
        rc = int(rc_file.read_text().strip())
    except (OSError, ValueError):
        rc = 1
        problem = problem or f"SLURM job {job_id} ended {outcome.state or '(forgotten)'} without an exit status"
    slurm_logs = {"slurm_job_id": job_id, "slurm_state": outcome.state, "slurm_stdout": [str(out)],
                  "slurm_stderr": [str(err)]}
    for path in sorted(sweep_dir.glob(f"*/{TRIAL_FILE}")):
        add_slurm_logs(path, slurm_logs, since_epoch=submitted_epoch)
    with contextlib.suppress(OSError):  # the in-allocation driver's progress lines
        for line in out.read_text(errors="replace").splitlines():
            if re.match(r"\[\d+/\d+\] ", line):
                print(line, flush=True)
    if problem:
        error_line(f"{problem}; see {out} and {err}")
    return rc


def add_slurm_logs(path: Path, slurm_logs: Dict[str, Any], since_epoch: float) -> None:
    """Add a SLURM job's entries to the ``logs`` of the trial.json at ``path`` when the job wrote it (not resumed)."""
    try:
        if not path.exists() or path.stat().st_mtime < since_epoch:
            return
        trial = read_json(path)
        if isinstance(trial, dict) and not trial.get("resumed"):
            logs = trial.get("logs")
            trial["logs"] = {**(logs if isinstance(logs, dict) else {}), **slurm_logs}
            write_json_atomic(path, trial)
    except (OSError, ValueError) as error:
        log.warning(f"could not add the SLURM job to {path}: {error}")
