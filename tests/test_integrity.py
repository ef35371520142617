"""Sweep integrity with real processes: one driver per sweep dir, a stale lock never blocks a resume,
each attempt in its own folder, and a full or read-only disk ends in one line with nothing half-written.
After each, no process of the sweep is left."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from ddpbench.collect import collect_trials, load_step_times
from ddpbench.errors import StorageError
from ddpbench.formats.rank_record import read_rank_record
from ddpbench.io import write_json_atomic
from ddpbench.sweep.lock import TOKEN_ENV, SweepLock, SweepLockedError, hold_sweep_lock, lock_path
from ddpbench.trial.attempts import CURRENT_FILE, attempt_of_launch, join_attempt, start_attempt
from helpers.cli import assert_nothing_left, cli_env, ONE_RANK, pinned, run_ddpbench, wait_or_kill
from helpers.processes import wait_for, wait_for_file, wait_for_text

FAST = ["model=tiny", "stop.steps=20", "stop.warmup_steps=2", "trial.collective_timeout_s=10"]
#: a trial that trains 2 s and says when its timed loop runs: a kill after its first progress line lands mid-trial
TRAINING = ["model=tiny", "stop=duration", "stop.duration_sec=2", "stop.warmup_steps=2", "trial.log_every=10",
            "trial.collective_timeout_s=10"]


# --------------------------------------------------------------------------- helpers


@dataclass
class Driver:
    """A ddpbench driver started in a session of its own, stdout and stderr in files."""

    process: subprocess.Popen
    stdout: Path
    stderr: Path

    def out(self) -> str:
        return self.stdout.read_text(errors="replace")

    def err(self) -> str:
        return self.stderr.read_text(errors="replace")

    def error_lines(self) -> List[str]:
        return [line for line in self.err().splitlines() if line.startswith("ddpbench: error:")]


def start_driver(args: List[str], cwd: Path, tag: str, logs: Optional[Path] = None) -> Driver:
    """Start ``python -m ddpbench ARGS`` in ``cwd``; its output goes to ``<logs or cwd>/<tag>.out|err``."""
    stdout, stderr = (logs or cwd) / f"{tag}.out", (logs or cwd) / f"{tag}.err"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen([sys.executable, "-m", "ddpbench", *pinned(args)], cwd=cwd, env=cli_env(),
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    return Driver(process, stdout, stderr)


def wait_for_path(pattern: str, root: Path, timeout: float, drivers: List[Driver]) -> Path:
    """The first path under ``root`` matching ``pattern``; fails at once if one of ``drivers`` ended first."""
    return wait_for_file(root, pattern, timeout, alive=[d.process for d in drivers],
                         details=lambda: "\n".join(d.out() + d.err() for d in drivers))


def files_of(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@dataclass
class SmallDisk:
    """A size-limited tmpfs (root), or else a folder whose "full" is a file-size rlimit on one process."""

    path: Path
    mounted: bool

    def fill(self, pid: int) -> None:
        """Leave no byte free: fill the tmpfs, or (no mount) cap ``pid``'s file size at 0 bytes."""
        if not self.mounted:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            return
        with open(self.path / "filler", "wb", buffering=0) as handle:
            chunk = b"\0" * (1 << 16)
            try:
                while True:
                    handle.write(chunk)
            except OSError:
                pass

    def read_only(self) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(folder)],
                             capture_output=True).returncode == 0
    try:
        yield SmallDisk(folder, mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], check=False)


# --------------------------------------------------------------------------- one driver per sweep dir


@pytest.mark.slow
def test_one_driver_per_sweep_dir_and_a_killed_drivers_lock_never_blocks_the_resume(tmp_path: Path) -> None:
    name = f"once-{uuid.uuid4().hex[:8]}"
    args = ["-m", "mode=native", "repeat=1", *TRAINING, ONE_RANK, f"sweep_name={name}"]
    sweep = tmp_path / "outputs" / "multirun" / name
    drivers = [start_driver(args, tmp_path, "a"), start_driver(args, tmp_path, "b")]  # at the same time
    try:
        loser = wait_for(lambda: next((d for d in drivers if d.process.poll() is not None), None), 120,
                         "one of two drivers of the same sweep to exit")
        winner = next(d for d in drivers if d is not loser)
        # at once: the loser did not wait for the lock, its holder is still running
        assert winner.process.poll() is None, winner.out() + winner.err()
        log = wait_for_path("*/attempts/1/logs/node0.stdout.log", sweep, 120, [winner])
        wait_for_text(log, "step=", 120, alive=[winner.process], details=lambda: winner.out() + winner.err())
        winner.process.send_signal(signal.SIGKILL)  # the one running driver dies mid-trial
        winner.process.wait(timeout=30)
    finally:
        for driver in drivers:
            if driver.process.poll() is None:
                os.killpg(driver.process.pid, signal.SIGKILL)
    assert loser.process.returncode == 2, loser.out() + loser.err()
    [line] = loser.error_lines()
    assert f"pid {winner.process.pid}," in line and f"host {socket.gethostname()}," in line, line
    assert "another driver is running this sweep" in line
    assert "start" not in loser.out()  # it launched nothing
    assert_nothing_left(name, grace_s=10)
    [job] = list(sweep.glob("*mode=*"))
    assert sorted(p.name for p in (job / "attempts").iterdir() if p.is_dir()) == ["1"]  # one writer
    holder = json.loads((sweep / ".ddpbench-lock.node0").read_text())
    assert holder["pid"] == winner.process.pid  # the file stays; the kernel dropped the lock with its holder
    killed_attempt = files_of(job / "attempts" / "1")

    resumed = run_ddpbench(args, tmp_path, timeout=240)
    assert resumed.returncode == 0, resumed.output
    trial = json.loads((job / "trial.json").read_text())
    assert trial["status"] == "ok"
    assert trial["attempt"] == {"number": 2, "dir": str((job / "attempts" / "2").resolve())}
    assert files_of(job / "attempts" / "1") == killed_attempt  # the killed attempt's files, untouched
    assert all(str(job / "attempts" / "2") in path for path in trial["logs"]["stdout"])
    rank0 = json.loads((job / "attempts" / "2" / "metrics" / "rank-0.json").read_text())
    steps = load_step_times(collect_trials([sweep]).frame)
    assert list(steps["step_ms"]) == rank0["step_times_ms"]  # the report reads this attempt's records
    assert json.loads((sweep / ".ddpbench-lock.node0").read_text())["pid"] != winner.process.pid
    assert_nothing_left(name)


def test_lock_names_a_live_holder_and_is_free_once_it_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)  # restored after the test: taking a lock sets it
    holder_code = ("import sys, time; from pathlib import Path; "
                   "from ddpbench.sweep.lock import hold_sweep_lock; "
                   "hold_sweep_lock(Path(sys.argv[1]), 0); "
                   "print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", holder_code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env=cli_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(SweepLockedError, match=f"pid {holder.pid},"):
            SweepLock(lock_path(tmp_path, 0)).acquire()
        token = json.loads(lock_path(tmp_path, 0).read_text())["token"]
        monkeypatch.setenv(TOKEN_ENV, token)  # a driver the holder started (SLURM one_allocation) runs for it
        assert SweepLock(lock_path(tmp_path, 0)).acquire().delegated
        monkeypatch.delenv(TOKEN_ENV)
        with SweepLock(lock_path(tmp_path, 1)) as lock:  # static: one lock per node rank
            assert not lock.delegated and lock.path.name == ".ddpbench-lock.node1"
    finally:
        holder.kill()
        holder.wait()
    lock = hold_sweep_lock(tmp_path, 0)
    assert not lock.delegated and lock.holder is not None and lock.holder.pid == os.getpid()
    lock.release()


# --------------------------------------------------------------------------- attempt folders


def test_each_attempt_keeps_its_own_folder_and_record(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "metrics").mkdir(parents=True)  # a job dir made before attempt folders
    (job / "metrics" / "rank-0.json").write_text("{}")
    (job / "trial.json").write_text(json.dumps({"status": "failed"}))
    first = start_attempt(job, "tok")
    assert first.number == 1 and (job / "previous" / "1" / "metrics" / "rank-0.json").exists()
    assert not (job / "trial.json").exists()
    write_json_atomic(job / "trial.json", {"status": "failed", "attempt": first.section()})
    second = start_attempt(job, "tok2")
    assert second.number == 2 and second.dir == job / "attempts" / "2"
    assert json.loads((first.dir / "trial.json").read_text())["attempt"]["number"] == 1  # moved beside its files
    assert json.loads((job / "attempts" / CURRENT_FILE).read_text()) == {"number": 2, "run_token": "tok2"}
    # another node of the same launch joins node 0's attempt; a stale or foreign one it never joins
    assert join_attempt(job, "tok2", [1], 0.0) == second
    joined_wrong = join_attempt(job, "other", [1], 0.0)
    assert joined_wrong.number == 3 and joined_wrong.dir.is_dir()
    (second.dir / "nodes").mkdir()
    (second.dir / "nodes" / "node1.json").write_text("{}")
    assert join_attempt(job, "tok2", [1], 0.0).number == 4  # node 1 already wrote there: an earlier launch


def test_a_record_written_for_a_dead_launch_names_its_attempt(tmp_path: Path) -> None:
    """A SLURM job that died after node 0 started its attempt gets that attempt; one that never ran gets a new one."""
    job = tmp_path / "job"
    first = start_attempt(job, "4711")  # node 0 of job 4711 started, then died without a record
    assert attempt_of_launch(job, "4711") == first
    write_json_atomic(job / "trial.json", {"status": "failed", "attempt": first.section()})
    never_ran = attempt_of_launch(job, "4712")  # job 4712 never ran: nothing of it in the job dir
    assert never_ran.number == 2 and never_ran.dir.is_dir()
    assert json.loads((first.dir / "trial.json").read_text())["attempt"]["number"] == 1  # filed, not overwritten
    assert attempt_of_launch(job, "4712") == never_ran  # asked again (no record yet): the same attempt


#: a user's script (workload=script, records=true): rank 0 writes its record, rank 1 is SIGTERMed mid-write of its own
KILLED_MID_WRITE = """import os, signal
import torch, torch.distributed as dist
from ddpbench.io import atomic_path
from ddpbench.workload.recorder import Recorder

dist.init_process_group("gloo")
recorder = Recorder(batch_size=1)
while not recorder.should_stop():
    with recorder.step():
        dist.all_reduce(torch.ones(1))
if dist.get_rank() == 0:
    recorder.finish()
dist.barrier()
if dist.get_rank() == 1:
    with atomic_path(os.path.join(str(recorder.metrics_dir), "rank-1.json")) as tmp:
        tmp.write_text('{"schema": ')
        os.kill(os.getpid(), signal.SIGTERM)
dist.barrier()
"""


@pytest.mark.slow
def test_a_rank_killed_mid_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "killed.py").write_text(KILLED_MID_WRITE)
    run = run_ddpbench(["workload=script", "workload.path=killed.py", "workload.records=true", "stop.steps=3",
                        "stop.warmup_steps=1", "trial.collective_timeout_s=10"], tmp_path, timeout=180)
    assert run.returncode != 0, run.output
    [path] = (tmp_path / "outputs" / "runs").glob("*/trial.json")
    trial = json.loads(path.read_text())
    assert trial["status"] == "failed" and trial["exit_code"] not in (0, None), trial
    metrics = Path(trial["attempt"]["dir"]) / "metrics"
    assert sorted(p.name for p in metrics.iterdir()) == ["rank-0.json"]  # rank 1's half-written temporary is gone
    record, issues = read_rank_record(metrics / "rank-0.json")  # the finished record is whole
    assert record is not None and record["rank"] == 0, issues
    assert_nothing_left(str(tmp_path))


# --------------------------------------------------------------------------- full and read-only disks


def test_atomic_write_on_a_full_or_read_only_disk_is_one_line_and_leaves_no_part(small_disk: SmallDisk) -> None:
    target = small_disk.path / "out" / "result.json"
    write_json_atomic(target, {"old": True})
    small_disk.fill(os.getpid())
    try:
        with pytest.raises(StorageError) as caught:
            write_json_atomic(target, {"data": "x" * (1 << 20)})
    finally:
        if not small_disk.mounted:
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    message = str(caught.value)
    assert "\n" not in message and str(target) in message
    assert "No space left on device" in message or "File too large" in message, message
    assert json.loads(target.read_text()) == {"old": True}
    assert sorted(p.name for p in target.parent.iterdir()) == ["result.json"]  # no temporary file left
    if small_disk.mounted:
        (small_disk.path / "filler").unlink()
        small_disk.read_only()
        with pytest.raises(StorageError, match="Read-only file system"):
            write_json_atomic(target, {"new": True})
        assert json.loads(target.read_text()) == {"old": True}


@pytest.mark.slow
def test_disk_full_mid_sweep_stops_with_one_line_and_keeps_finished_trials(small_disk: SmallDisk) -> None:
    name = f"full-{uuid.uuid4().hex[:8]}"
    cwd = small_disk.path
    args = ["-m", "mode=native", "repeat=1-2", *FAST, ONE_RANK, "trial.timeout_s=90", f"sweep_name={name}"]
    sweep = cwd / "outputs" / "multirun" / name
    driver = start_driver(args, cwd, "full", logs=cwd.parent)  # its own output off the small disk
    try:
        first = wait_for_path("*repeat=1,*/trial.json", sweep, 180, [driver])
        wait_for_path("*repeat=2,*/attempts/1/logs/node0.stdout.log", sweep, 60, [driver])  # trial 2 runs
        small_disk.fill(driver.process.pid)
        finished = first.read_bytes()
        code = wait_or_kill(driver.process, 150)
    finally:
        if driver.process.poll() is None:
            os.killpg(driver.process.pid, signal.SIGKILL)
    assert code != 0, driver.out() + driver.err()
    [line] = driver.error_lines()
    assert "No space left on device" in line or "File too large" in line, driver.err()
    assert json.loads(finished)["status"] == "ok", json.loads(finished).get("error")
    assert first.read_bytes() == finished
    assert_nothing_left(name, grace_s=10)
    for path in sweep.rglob("*.json"):  # every file a reader can take for a result is whole
        if not path.name.startswith("."):
            json.loads(path.read_text())
    # the driver's own writes leave no temporary file; a rank killed by torchrun (SIGTERM) after its
    # peer failed may leave its hidden .rank-<r>.json.*.tmp, which no reader ever opens
    leftovers = [str(p.relative_to(sweep)) for p in sweep.rglob("*.tmp") if not p.name.startswith(".rank-")]
    assert leftovers == [], leftovers
    if small_disk.mounted:  # the report on a full, then read-only, disk: one line, exit non-zero, nothing half-written
        report = subprocess.run([sys.executable, "-m", "ddpbench.report", str(sweep)], capture_output=True, text=True,
                                env=cli_env())
        assert report.returncode != 0 and "No space left on device" in report.stderr, report.stderr
        assert len(report.stderr.strip().splitlines()) == 1, report.stderr
        (small_disk.path / "filler").unlink()
        small_disk.read_only()
        resumed = run_ddpbench(args, cwd, timeout=120)
        assert resumed.returncode == 2 and "Read-only file system" in resumed.stderr, resumed.output
        assert not (sweep / "report.md").exists()
        assert [str(p.relative_to(sweep)) for p in sweep.rglob("*.tmp") if not p.name.startswith(".rank-")] == leftovers

