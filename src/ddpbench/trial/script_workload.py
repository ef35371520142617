"""The environment that attaches ddpbench's recorder to a user's own training script (``workload=script``,
docs/workload.md) from outside: the site hook first on the ranks' ``PYTHONPATH``. What the script is, its arguments
and the frameworks it imports are decided with the config (``cfg.decided.script``: ddpbench.config.decided)."""

from __future__ import annotations

import os
from typing import Dict

from ddpbench.choices import StopKind
from ddpbench.config import DdpbenchConfig
from ddpbench.workload import recorder
from ddpbench.workload.frameworks import ENV_HOOK, SITE_HOOK_DIR


def recorder_environment(cfg: DdpbenchConfig, metrics_dir: str, pythonpath: str) -> Dict[str, str]:
    """What ``ddpbench.workload.recorder`` and its site hook need in a user's script with records on (``PYTHONPATH``:
    the hook, then ``pythonpath``); else nothing."""
    script = cfg.decided.script
    if not script.records or script.file is None:
        return {}
    stop, fault = cfg.stop, cfg.fault
    env = recorder.environment(
        metrics_dir, warmup_steps=stop.warmup_steps, save_step_times=bool(cfg.trial.save_step_times),
        workload=script.file.name,
        steps=stop.steps if stop.kind == StopKind.steps and not stop.from_script else None,
        duration_s=stop.duration_sec if stop.kind == StopKind.duration else None, check_every=stop.check_every,
        clock_skew_s=fault.clock_skew_sec, fault_rank=fault.rank,
    )
    hooked = [str(SITE_HOOK_DIR)] + [p for p in pythonpath.split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(hooked), ENV_HOOK: "1"}
