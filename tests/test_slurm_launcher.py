"""``hydra/launcher=ddpbench_slurm`` for a plain Hydra app on the local 2-node SLURM cluster: jobs of one batch
never overlap with ``array_parallelism: 1`` (both nodes are free, so SLURM alone would run them at once)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.slurm import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)

APP = '''
import json, time
from pathlib import Path
import hydra

@hydra.main(version_base="1.3", config_path=None)
def main(cfg) -> None:
    start = time.time()
    time.sleep(2.0)
    Path(cfg.out).mkdir(exist_ok=True)
    (Path(cfg.out) / f"{cfg.x}.json").write_text(json.dumps({"start": start, "end": time.time()}))

main()
'''


@pytest.mark.slurm
@pytest.mark.parametrize("parallelism", [1, 2])
def test_array_parallelism_bounds_the_jobs_running_at_once(slurm_cluster: SlurmCluster, tmp_path: Path,
                                                           parallelism: int) -> None:
    (tmp_path / "app.py").write_text(APP)
    out = tmp_path / "times"
    proc = subprocess.run(
        [sys.executable, "app.py", "-m", "hydra/launcher=ddpbench_slurm", "+x=1,2", f"+out={out}",
         f"hydra.launcher.partition={slurm_cluster.partition}", "hydra.launcher.timeout_min=2",
         "hydra.launcher.poll_s=0.2", f"hydra.launcher.array_parallelism={parallelism}"],
        cwd=tmp_path, env=slurm_cluster.env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = sorted((json.loads(p.read_text()) for p in out.glob("*.json")), key=lambda t: t["start"])
    if parallelism == 1:
        assert first["end"] <= second["start"], (first, second)
    else:  # the check above can fail: two free nodes run both jobs at once
        assert second["start"] < first["end"], (first, second)
