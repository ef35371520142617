"""Where one trial sits in its sweep: :class:`JobInfo`, built from Hydra's runtime config in one place."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode


@dataclass(frozen=True)
class JobInfo:
    """Where a trial sits in its sweep (from Hydra's runtime config)."""

    # this trial's own folder (Hydra's job output dir)
    job_dir: Path
    # the sweep's folder (the job dir itself for a single run)
    sweep_dir: Path
    # the job's number in its sweep (0 for a single run)
    job_num: int
    # the job's task overrides, key=value
    overrides: List[str]
    # config-group choices (model=..., cluster=...), Hydra's own groups left out
    choices: Dict[str, str]
    # whether the trial is part of a multirun
    multirun: bool


def job_info_from_hydra(hydra_cfg: Any, *, job_dir: Path, job_num: int, multirun: bool) -> JobInfo:
    """A :class:`JobInfo` from a ``hydra`` config node (``HydraConfig.get()`` or ``cfg.hydra``)."""
    return JobInfo(
        job_dir=job_dir,
        sweep_dir=Path(str(hydra_cfg.sweep.dir)) if multirun else job_dir,
        job_num=job_num,
        overrides=[str(o) for o in hydra_cfg.overrides.task],
        choices={str(k): str(v) for k, v in hydra_cfg.runtime.choices.items() if not str(k).startswith("hydra")},
        multirun=multirun,
    )


def current_job() -> JobInfo:
    """The running Hydra job's place in its sweep."""
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    return job_info_from_hydra(
        hc, job_dir=Path(hc.runtime.output_dir), job_num=int(hc.job.num) if multirun else 0, multirun=multirun
    )
