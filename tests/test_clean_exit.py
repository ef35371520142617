"""A framework Trainer's ranks end their process group before the interpreter exits (real torchrun, gloo).

The script below stands for a Trainer's rank: a DDP model trained one step, the group left open, as
Lightning and the HF Trainer leave it; ddpbench's recorder calls ``end_process_group_at_exit`` when
training ends. A handler registered first runs last at exit and writes whether the group still exists.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RANK_SCRIPT = '''
import atexit, os, sys
import torch
import torch.distributed as dist

out, crash = sys.argv[1], sys.argv[2] == "crash"
rank = int(os.environ["RANK"])
atexit.register(lambda: open(os.path.join(out, f"rank{rank}"), "w").write(str(dist.is_initialized())))
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
model(torch.randn(2, 4)).sum().backward()

from ddpbench.workload.frameworks.steps import end_process_group_at_exit

end_process_group_at_exit()
end_process_group_at_exit()  # once per process, however many Trainers end
if crash:
    raise RuntimeError("the script failed after training")
'''


def _launch(tmp_path: Path, nproc: int, how: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
                           "--standalone", str(script), str(tmp_path), how],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


def _group_left_at_exit(tmp_path: Path, nproc: int) -> list[str]:
    return [(tmp_path / f"rank{rank}").read_text() for rank in range(nproc)]


@pytest.mark.slow
def test_every_rank_ends_its_group_before_exit(tmp_path: Path) -> None:
    run = _launch(tmp_path, 2, "ok")
    assert run.returncode == 0, run.stderr
    assert _group_left_at_exit(tmp_path, 2) == ["False", "False"]
    assert "not ended cleanly" not in run.stderr, run.stderr


@pytest.mark.slow
def test_a_rank_that_failed_leaves_its_group_and_waits_for_nobody(tmp_path: Path) -> None:
    run = _launch(tmp_path, 1, "crash")
    assert run.returncode != 0 and "the script failed after training" in run.stderr, run.stderr
    assert _group_left_at_exit(tmp_path, 1) == ["True"]
