"""``hydra/launcher=ddpbench_slurm`` for a plain Hydra app on the local 2-node SLURM cluster: jobs of one batch
never overlap with ``array_parallelism: 1`` (both nodes are free, so SLURM alone would run them at once), and
do with 2. Each job waits, bounded, for the other to start."""

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
    out = Path(cfg.out)
    out.mkdir(exist_ok=True)
    start = time.time()
    (out / f"started-{cfg.x}").touch()
    other = out / f"started-{3 - cfg.x}"
    deadline = time.monotonic() + cfg.wait_s
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (out / f"{cfg.x}.json").write_text(json.dumps({"start": start, "end": time.time(), "saw_other": other.exists()}))

main()
'''

#: seconds a job waits for the other job of its batch to start: with ``array_parallelism: 1`` it never does, so this
#: is how long each job lasts; with 2 the wait ends as soon as the other starts (SLURM may be slow to start it)
WAIT_S = {1: 8.0, 2: 60.0}


@pytest.mark.slurm
@pytest.mark.parametrize("parallelism", [1, 2])
def test_array_parallelism_bounds_the_jobs_running_at_once(slurm_cluster: SlurmCluster, tmp_path: Path,
                                                           parallelism: int) -> None:
    (tmp_path / "app.py").write_text(APP)
    out = tmp_path / "times"
    proc = subprocess.run(
        [sys.executable, "app.py", "-m", "hydra/launcher=ddpbench_slurm", "+x=1,2", f"+out={out}",
         f"+wait_s={WAIT_S[parallelism]}", f"hydra.launcher.partition={slurm_cluster.partition}", "hydra.launcher.timeout_min=3",
         "hydra.launcher.poll_s=0.2", f"hydra.launcher.array_parallelism={parallelism}"],
        cwd=tmp_path, env=slurm_cluster.env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = sorted((json.loads((out / f"{x}.json").read_text()) for x in (1, 2)), key=lambda t: t["start"])
    if parallelism == 1:
        assert not first["saw_other"] and first["end"] <= second["start"], (first, second)
    else:  # both jobs are running at once: each saw the other start
        assert first["saw_other"] and second["saw_other"], (first, second)
