"""ddpbench's SLURM backend (cluster kind slurm, hydra/launcher=ddpbench_slurm) against a real 2-node SLURM
started by the ``slurm_cluster`` fixture (scripts/slurm-local.sh), plus the g4dn sbatch script (not run)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import List

import pytest
from omegaconf import DictConfig, OmegaConf

from helpers.cli import CliRun, assert_nothing_left, only_sweep_dir, processes_mentioning, run_ddpbench, trials_in
from helpers.processes import wait_for
from helpers.slurm import SlurmCluster, slurm_cluster  # noqa: F401  (fixture)

FAST = ["model=tiny", "stop.steps=30", "stop.warmup_steps=3"]


def _env(cluster: SlurmCluster) -> dict:
    return {"SLURM_CONF": str(cluster.conf_path)}


def _squeue(cluster: SlurmCluster) -> List[List[str]]:
    proc = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, env=cluster.env,
                          timeout=15, check=False)
    return [line.split() for line in proc.stdout.splitlines() if line.strip()]


def _assert_queue_empty(cluster: SlurmCluster, wait_s: float = 15.0) -> None:
    wait_for(lambda: not _squeue(cluster), wait_s, "an empty SLURM queue",
             details=lambda: f"jobs left: {_squeue(cluster)}", poll_s=0.5)


@pytest.mark.slurm
def test_two_node_paired_sweep_through_slurm(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    # repeat 2 alone: its pair runs in the reversed order (traceml, native), so one pair shows that the
    # sweeper's alternating order reaches SLURM unchanged, one job per trial.
    run = run_ddpbench(
        ["-m", "cluster=slurm_cpu_2node", "mode=native,traceml", "repeat=2", *FAST,
         f"hydra.launcher.partition={slurm_cluster.partition}"],
        cwd=tmp_path, timeout=240, env=_env(slurm_cluster),
    )
    assert run.returncode == 0, run.output
    sweep = only_sweep_dir(tmp_path)
    trials = trials_in(sweep)
    assert [t["status"] for t in trials] == ["ok"] * 2, run.output
    assert [(t["job_num"], t["mode"], t["repeat"], t["pair_position"]) for t in trials] == [
        (0, "traceml", 2, 0), (1, "native", 2, 1)]
    job_ids = set()
    for trial in trials:
        assert trial["world_size"] == 2 and trial["nnodes"] == 2
        assert sorted((r["rank"], r["node_rank"]) for r in trial["ranks"]) == [(0, 0), (1, 1)]
        assert [n["node_rank"] for n in trial["nodes"]] == [0, 1]
        assert all(n["exit_code"] == 0 for n in trial["nodes"])
        logs = trial["logs"]
        assert len(logs["slurm_stdout"]) == 2 and all(Path(p).is_file() for p in logs["slurm_stdout"])
        assert logs["slurm_state"] in ("COMPLETED", "COMPLETING", "RUNNING"), logs
        job_ids.add(logs["slurm_job_id"])
    assert len(job_ids) == 2, "one SLURM job per trial"
    assert trials[0]["nodes"][0]["exit_epoch"] <= trials[1]["nodes"][0]["spawn_epoch"]  # one at a time
    assert (sweep / "report.md").is_file()
    _assert_queue_empty(slurm_cluster)
    assert_nothing_left(str(sweep.name))


def _when_hung(cluster: SlurmCluster, out: Path, repeat: int, timeout_s: float = 60.0) -> str:
    """Wait until trial ``repeat``'s job runs and its ranks have reached the hang at step 5; the job id."""
    logs = f"outputs/multirun/*/*repeat={repeat},*/attempts/*/logs/node0.stderr.log"

    def hung_job() -> str | None:
        running = [job for job, state in _squeue(cluster) if state == "RUNNING"]
        hung = any("fault: hang" in log.read_text(errors="replace") for log in out.glob(logs))
        return running[0] if running and hung else None

    job = wait_for(hung_job, timeout_s, f"trial {repeat}'s job hung at step 5", poll_s=0.3)
    assert not list(out.glob(f"outputs/multirun/*/*repeat={repeat},*/attempts/*/metrics/rank-*")), "no hang?"
    assert [p for p in processes_mentioning(f"repeat={repeat},") if _is_rank(p)], "its ranks are not seen"
    return job


def _kill_job_driver(out: Path) -> None:
    """SIGKILL the submitit task (the ddpbench driver) running in ``out``, as the OOM killer would."""
    def is_task(pid: int) -> bool:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            cwd = Path(f"/proc/{pid}/cwd").resolve()
        except OSError:
            return False
        return Path(argv[0].decode()).name.startswith("python") and cwd == out.resolve()

    pids = [pid for pid in processes_mentioning("submitit.core._submit") if is_task(pid)]
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)


@pytest.mark.slurm
def test_cancelled_jobs_are_failed_trials_and_the_sweep_goes_on(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    # Every trial hangs at step 5 (its watchdog would end it after 60 s). Trial 1's driver (the submitit task)
    # is SIGKILLed, as by the OOM killer: the job ends without a result, so the launcher must notice the dead
    # job and write trial.json itself. Trial 2's job is scancel'ed.
    args = ["-m", "cluster=slurm_cpu", "mode=native", "repeat=1-2", *FAST, "fault.hang_at_step=5",
            "trial.timeout_s=60", f"hydra.launcher.partition={slurm_cluster.partition}"]
    result: List[CliRun] = []
    runner = threading.Thread(target=lambda: result.append(
        run_ddpbench(args, cwd=tmp_path, timeout=150, env=_env(slurm_cluster))))
    runner.start()
    try:
        killed = _when_hung(slurm_cluster, tmp_path, 1)
        _kill_job_driver(tmp_path)
        killed_at = time.time()
        cancelled = _when_hung(slurm_cluster, tmp_path, 2)
        subprocess.run(["scancel", cancelled], env=slurm_cluster.env, timeout=15, check=True)
        cancelled_at = time.time()
    finally:
        runner.join(timeout=170)
    assert result, "ddpbench did not finish"
    run = result[0]
    assert run.returncode == 1, run.output  # failed trials make the sweep exit 1
    sweep = only_sweep_dir(tmp_path)
    trials = trials_in(sweep)
    assert [(t["job_num"], t["status"]) for t in trials] == [(0, "failed"), (1, "failed")], run.output
    first, second = trials
    for trial, job_id, at in ((first, killed, killed_at), (second, cancelled, cancelled_at)):
        assert trial["logs"]["slurm_job_id"] == job_id
        assert all(Path(p).name.startswith(f"{job_id}_") for p in trial["logs"]["slurm_stdout"])
        recorded = (sweep / Path(trial["job_dir"]).name / "trial.json").stat().st_mtime
        assert recorded - at < 20, f"job {job_id}'s trial was not recorded within a bounded time"
        # the attempt node 0 started (its logs are there), as in every other trial record
        assert trial["attempt"] == {"number": 1, "dir": str(Path(trial["job_dir"]) / "attempts" / "1")}, trial
        assert (Path(trial["attempt"]["dir"]) / "logs" / "node0.stderr.log").is_file()
    # written by the launcher: the job left no result; its logs are SLURM's
    assert "without a result" in first["error"], first["error"]
    assert first["logs"]["stderr"] == first["logs"]["slurm_stderr"]
    assert first["logs"]["slurm_state"] in ("FAILED", "COMPLETED", None), first["logs"]
    assert second["logs"]["slurm_state"] in ("CANCELLED", "COMPLETING"), second["logs"]
    assert "[1/2] failed" in run.stdout and "[2/2] failed" in run.stdout, run.output
    assert (sweep / "report.md").is_file()
    _assert_queue_empty(slurm_cluster)
    # No rank of either trial outlives its job: the killed driver's guard ends them on its parent's death, the
    # cancelled job's on SLURM's SIGTERM (SIGKILL follows after KillWait, 5 s in scripts/slurm-local.sh).
    for trial in trials:
        ranks = f"{trial['attempt']['dir']}/metrics"  # in every rank's command line (--metrics-dir)
        wait_for(lambda: not _ranks_of(ranks), 15.0, f"the end of every rank of {trial['job_dir']}",
                 details=lambda: f"left: {processes_mentioning(ranks)}", poll_s=0.2)
    assert_nothing_left(str(sweep.name), grace_s=15)


def _ranks_of(marker: str) -> List[int]:
    """The workload processes alive now whose command line mentions ``marker``."""
    return [pid for pid in processes_mentioning(marker) if _is_rank(pid)]


def _is_rank(pid: int) -> bool:
    try:
        return b"ddp_mlp.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_g4dn_2node_launcher_settings() -> None:
    """g4dn_2node's launcher settings as submitit gets them (checked by submitit's public API; nothing submitted)."""
    import submitit

    import ddpbench.app  # noqa: F401  (registers the configs)
    from hydra import compose, initialize_config_module

    from ddpbench.config import typed_trial
    from ddpbench.launcher.slurm.submit import Submitter
    from ddpbench.trial import command as commands
    from ddpbench.versions.arm import resolve_arm

    with initialize_config_module("ddpbench.conf", version_base="1.3"):
        cfg = compose("config", overrides=["cluster=g4dn_2node", "mode=traceml", "sweep_name=t"],
                      return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert params["_target_"].endswith("BoundedSlurmLauncher")
    launcher = type("Launcher", (), {"params": params})()
    submitter = Submitter(launcher)
    executor = submitter.executor_params
    assert (executor["nodes"], executor["tasks_per_node"], executor["gpus_per_node"]) == (2, 1, 1)
    assert executor["slurm_array_parallelism"] == 1 and executor["timeout_min"] is None
    assert "export NCCL_SOCKET_IFNAME=ens5" in executor["slurm_setup"]
    assert not set(executor) & {"slurm_wait_margin_s", "slurm_queue_timeout_s", "slurm_poll_s"}
    assert submitter.bounds.queue_timeout_s == cfg.cluster.slurm.queue_timeout_s
    # submitit's own check of every parameter name (an unknown one raises)
    submitit.AutoExecutor(cluster="slurm", folder="/tmp/ddpbench-check").update_parameters(
        **{**executor, "timeout_min": 7})
    # the trial's own config and node command: nccl, fp16, CUDA
    assert (cfg.cluster.backend, cfg.cluster.precision, cfg.cluster.device) == ("nccl", "fp16", "cuda")
    trial = typed_trial(cfg)
    arm = resolve_arm(trial)
    context = commands.make_context(trial, arm, node_rank=1, master_addr="node-a", master_port=29500,
                                    aggregator_port=29501, run_name="t-0-1", job_dir=Path("/tmp/j"))
    argv = " ".join(commands.node_command(trial, arm, context))
    assert "nccl" in argv and "--nnodes" in argv and "node-a" in argv, argv


def _slurm_cfg() -> DictConfig:
    return OmegaConf.create({"cluster": {"nnodes": 2, "base_port": 0, "slurm": {"peer_record_wait_s": 5, "one_allocation": False}},
                             "trial": {"resume": True}})


def test_plan_slurm_outside_an_allocation_is_a_one_line_error(tmp_path: Path) -> None:
    from ddpbench.errors import DdpbenchError
    from ddpbench.cluster.slurm.backend import SlurmBackend
    from ddpbench.trial.job import JobInfo

    job = JobInfo(job_dir=tmp_path, sweep_dir=tmp_path, job_num=0, overrides=[], choices={}, multirun=True)
    with pytest.raises(DdpbenchError, match="inside a SLURM job") as error:
        SlurmBackend().plan(_slurm_cfg(), job, 60.0, env={})
    assert "\n" not in str(error.value)


def test_plan_slurm_in_a_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Node 1 of job 42: node 0's host is the master, ports come from the job id, node 0 owns the trial and
    tells node 1 whether it launches."""
    from ddpbench.cluster.ports import derived_ports
    from ddpbench.cluster.slurm import backend
    from ddpbench.trial.job import JobInfo

    monkeypatch.setattr(backend, "allocation_hosts", lambda nodelist, timeout=0: ["gpu-a", "gpu-b"])
    slurm, cfg = backend.SlurmBackend(), _slurm_cfg()
    job = JobInfo(job_dir=tmp_path, sweep_dir=tmp_path, job_num=3, overrides=[], choices={}, multirun=True)
    env = {"SLURM_JOB_ID": "42", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "2",
           "SLURM_JOB_NODELIST": "gpu-[a-b]"}
    plan = slurm.plan(cfg, job, 60.0, env=env)
    assert (plan.node_ranks, plan.master_addr, plan.owner, plan.run_token) == ([1], "gpu-a", False, "42")
    assert [plan.master_port, plan.aggregator_port] == derived_ports("42", 2)
    assert not plan.retry_on_port_clash and not plan.agent_spans_nodes
    owner = slurm.plan(cfg, job, 60.0, env={**env, "SLURM_NODEID": "0"})
    for resumed in (False, True):
        slurm.tell_peers(cfg, owner, job, resumed=resumed)
        assert slurm.owner_resumed(cfg, plan, job) is resumed
    assert slurm.wrap_agent(cfg, plan, ["torchrun"], tmp_path) == ["torchrun"]
    with pytest.raises(Exception, match="3 node"):
        slurm.plan(cfg, job, 60.0, env={**env, "SLURM_JOB_NUM_NODES": "3"})


@pytest.mark.slurm
def test_one_allocation_runs_the_whole_sweep_in_one_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    run = run_ddpbench(
        ["-m", "cluster=slurm_cpu_2node", "cluster.slurm.one_allocation=true", "mode=native", "repeat=1-2",
         "model=tiny", "stop.steps=20", "stop.warmup_steps=2", f"hydra.launcher.partition={slurm_cluster.partition}"],
        cwd=tmp_path, timeout=300, env=_env(slurm_cluster),  # two trials: ~20 s alone, 90 s on a loaded 2-core host
    )
    assert run.returncode == 0, run.output
    sweep = only_sweep_dir(tmp_path)
    trials = trials_in(sweep)
    assert [(t["job_num"], t["status"], t["repeat"]) for t in trials] == [(0, "ok", 1), (1, "ok", 2)], run.output
    assert {t["logs"]["slurm_job_id"] for t in trials} == {trials[0]["logs"]["slurm_job_id"]}, "one SLURM job"
    for trial in trials:
        assert trial["world_size"] == 2 and trial["nnodes"] == 2
        assert sorted((r["rank"], r["node_rank"]) for r in trial["ranks"]) == [(0, 0), (1, 1)]
        assert [(n["node_rank"], n["exit_code"]) for n in trial["nodes"]] == [(0, 0), (1, 0)]
    assert trials[0]["nodes"][0]["exit_epoch"] <= trials[1]["nodes"][0]["spawn_epoch"]  # in order, one at a time
    assert "[2/2] ok" in run.stdout, run.output
    assert (sweep / "report.md").is_file()
    _assert_queue_empty(slurm_cluster)
    assert_nothing_left(str(sweep.name))
