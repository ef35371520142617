"""Tests of the DDP MLP workload: real 2-rank gloo runs under torchrun and traceml run.

Every multi-process run goes through ``helpers_proc.run_bounded`` (bounded wait,
whole tree killed on return) and asserts that no process of the run remains.
Tiny model, few steps, OMP_NUM_THREADS=1: the file runs in about a minute on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddpbench.workload import ddp_mlp, timing
from ddpbench.formats.rank_record import SCHEMA, SCHEMA_VERSION, validate_rank_record
from helpers.processes import CompletedRun, assert_no_leftover, child_env, free_port, free_ports, run_bounded

SCRIPT = Path(ddp_mlp.__file__).resolve()
TINY = [
    "--input-dim", "32", "--hidden-dim", "32", "--hidden-layers", "1", "--num-classes", "4",
    "--batch-size", "8", "--num-samples", "256", "--log-every", "0",
]
RUN_TIMEOUT_S = 60.0


def torchrun(args: list[str], *, timeout: float = RUN_TIMEOUT_S, nproc: int = 2) -> CompletedRun:
    """The workload under ``python -m torch.distributed.run`` (2 CPU ranks), tree killed on return."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
        "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(SCRIPT), *TINY, *args,
    ]
    run = run_bounded(cmd, timeout, env=child_env())
    assert_no_leftover(run.procs)
    return run


def read_ranks(metrics_dir: Path, world: int = 2) -> list[dict[str, Any]]:
    """``rank-<r>.json`` for r in range(world)."""
    return [json.loads((metrics_dir / f"rank-{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module")
def steps_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[CompletedRun, list[dict[str, Any]]]:
    """One steps-mode baseline run shared by several tests: 40 timed steps, 3 warmup."""
    out = tmp_path_factory.mktemp("steps")
    run = torchrun(["--steps", "40", "--warmup-steps", "3", "--metrics-dir", str(out), "--save-step-times",
                    "--host-sync", "loss", "--gc", "freeze"])
    assert run.returncode == 0, run.output
    return run, read_ranks(out)


# ----------------------------------------------------------------------------- pure helpers


def test_percentile_matches_linear_interpolation() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert timing.percentile(values, 50) == 3.0
    assert timing.percentile(values, 90) == pytest.approx(7.6)  # numpy.percentile(values, 90)
    assert timing.percentile(values, 0) == 1.0 and timing.percentile(values, 100) == 10.0
    stats = timing.step_time_stats([0.001, 0.002, 0.003])
    assert stats["median"] == pytest.approx(2.0) and stats["stdev"] == pytest.approx(1.0)


def test_injected_wait_is_at_least_the_request() -> None:
    import time

    t0 = time.perf_counter()
    timing.wait_until_known(0.005)
    assert 0.005 <= time.perf_counter() - t0 < 0.05


class FakeEvent:
    """A timing event on a fake device clock: ``record`` stamps the clock's time; completes at once unless held."""

    clock = [0.0]

    def __init__(self) -> None:
        self.at: float | None = None
        self.held = False

    def record(self) -> None:
        self.at = FakeEvent.clock[0]

    def query(self) -> bool:
        return not self.held

    def synchronize(self) -> None:
        self.held = False

    def elapsed_time(self, end: "FakeEvent") -> float:
        assert self.at is not None and end.at is not None, "an event read before it was recorded"
        return end.at - self.at


def test_device_step_clock_reads_every_step_once_through_its_ring() -> None:
    """Steps of 1 ms idle then k ms busy (k = step % 3 + 1): every step is read once, in order, past many laps of
    the ring, with no event reused before it was read; a step not complete when its turn comes is waited for."""
    from ddpbench.workload.device_time import DeviceStepClock

    FakeEvent.clock[0] = 0.0
    clock = DeviceStepClock(ring=5, new_event=FakeEvent)
    clock.start()
    for step in range(1, 23):
        FakeEvent.clock[0] += 1.0
        clock.step_begins()
        FakeEvent.clock[0] += step % 3 + 1
        clock.step_ends()
        if step == 20:
            clock.ends[(20 - 5 + 2) % 5].held = True  # step 17 still running when step 20 reads it
        clock.collect()
        assert clock.read == max(0, step - 5 + 2)
    clock.finish()
    assert clock.busy_ms == [float(s % 3 + 1) for s in range(1, 23)] and clock.idle_ms == [1.0] * 22
    assert clock.late_reads == 1
    record = clock.record()
    assert record["steps"] == 22 and record["idle"]["mean"] == pytest.approx(1.0)
    assert record["busy"]["median"] == pytest.approx(2.0)


def test_host_sync_patterns_and_synthetic_data() -> None:
    """The patterns' hooks (a counted synchronize), and the chunked data: the same values whatever the threads."""
    import torch

    from ddpbench.workload import synthetic
    from ddpbench.workload.loop import HostSync
    from ddpbench.workload.harness import StartupClock

    syncs: list[int] = []
    loss = torch.tensor(2.5)
    for pattern, sync_before, inside, reads in (("none", 0, False, False), ("loss", 0, False, True),
                                                 ("seed", 1, True, True)):
        hooks = HostSync(pattern, lambda: syncs.append(1))
        syncs.clear()
        hooks.before_step()
        hooks.after_step(loss)
        assert (len(syncs), hooks.copy_inside_marker, hooks.last_loss == 2.5) == (sync_before, inside, reads), pattern
    with pytest.raises(ValueError, match="not one of none, loss, seed"):
        HostSync("own", lambda: None)
    old = synthetic.CHUNK_ELEMENTS
    try:
        synthetic.CHUNK_ELEMENTS = 64  # 2 rows of 33 per chunk: 50 chunks
        one, many = [], []
        for threads, out in ((1, one), (4, many)):
            synthetic.MAX_THREADS = threads
            out += [synthetic.normal((100, 33), 7), synthetic.uniform_int(0, 5, (100, 3), 7, stream=1)]
    finally:
        synthetic.CHUNK_ELEMENTS, synthetic.MAX_THREADS = old, 16
    assert all(torch.equal(a, b) for a, b in zip(one, many))
    assert not torch.equal(one[0][:2], one[0][2:4])  # chunks draw their own values
    assert one[1].min() >= 0 and one[1].max() <= 4 and one[1].dtype == torch.int64
    startup = StartupClock(100.0)
    startup.mark("script", 101.0)
    startup.mark("warmup", 103.5)
    startup.mark("injected", 103.0)  # a clock step back adds nothing
    assert sum(startup.record().values()) == pytest.approx(3.5) and startup.record()["warmup"] == 2.5


def test_validator_reports_problems() -> None:
    assert validate_rank_record([]) != []
    problems = validate_rank_record({"schema": "other", "schema_version": 99})
    assert problems[0] == "unknown schema 'other' (expected 'ddpbench.rank')"
    assert any("timed_steps: missing" in p for p in problems)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "argv",
    [
        ["--steps", "5", "--duration-sec", "1"],
        [],
        ["--steps", "0"],
        ["--duration-sec", "-1"],
        ["--steps", "5", "--batch-size", "0"],
        ["--steps", "5", "--batch-size", "64", "--num-samples", "100"],  # < 64 x 2
        ["--steps", "5", "--device", "tpu"],
        ["--steps", "5", "--backend", "mpi"],
        ["--steps", "5", "--precision", "fp8"],
        ["--steps", "5", "--precision", "auto"],  # the config refuses it too
        ["--steps", "5", "--fault-rank", "2"],
        ["--steps", "5", "--device", "cpu", "--inject-device-step-ms", "2"],
        ["--steps", "5", "--host-sync", "own"],
    ],
    ids=["both", "neither", "zero-steps", "neg-duration", "zero-batch", "small-dataset",
         "device", "backend", "precision", "precision-auto", "fault-rank", "device-wait-on-cpu", "host-sync"],
)
def test_bad_input_exits_2_with_one_line(argv: list[str]) -> None:
    """One-line argparse-style error, exit 2, before torch (and so before any process group)."""
    code = (
        "import sys\n"
        "from ddpbench.workload import ddp_mlp\n"
        f"try:\n    ddp_mlp.main({argv!r})\n"
        "finally:\n    assert 'torch' not in sys.modules, 'torch imported before the error'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=child_env({"WORLD_SIZE": "2"}),
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddp_mlp: error:"), proc.stderr


# ----------------------------------------------------------------------------- steps mode


@pytest.mark.slow
def test_steps_mode_exact_count(steps_run: tuple[CompletedRun, list[dict[str, Any]]]) -> None:
    run, ranks = steps_run
    assert [r["timed_steps"] for r in ranks] == [40, 40]
    assert ranks[0]["samples"] == ranks[1]["samples"] == 40 * 8
    assert [r["stop_reason"] for r in ranks] == ["steps", "steps"]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["world_size"] == 2 for r in ranks)
    assert "Done. steps=40 elapsed_s=" in run.stdout


@pytest.mark.slow
def test_rank_json_validates(steps_run: tuple[CompletedRun, list[dict[str, Any]]]) -> None:
    _, ranks = steps_run
    for record in ranks:
        assert validate_rank_record(record) == []
        assert record["schema"] == SCHEMA and record["schema_version"] == SCHEMA_VERSION
        assert len(record["step_times_ms"]) == 40
        assert record["traceml"] == {"active": False, "mode": None}
        assert record["device"] == "cpu" and record["backend"] == "gloo" and record["precision"] == "fp32"
        # the loop as asked: the loss read after every step (nothing to synchronise on CPU), the collector frozen
        assert record["host_sync"] == "loss" and record["gc"]["mode"] == "freeze" and record["gc"]["frozen"] > 0
        assert record["gpu_time_ms"] is None and "gpu_busy_times_ms" not in record  # no events on CPU
        stamps = record["timestamps"]
        assert sum(record["startup_s"].values()) == pytest.approx(stamps["first_step_start"] - stamps["process_start"])
        assert record["startup_s"]["torch_import"] > 0 and record["startup_s"]["tool_init"] < 0.05


# ----------------------------------------------------------------------------- faults


def _no_partial_files(metrics_dir: Path) -> list[str]:
    return sorted(p.name for p in metrics_dir.iterdir()) if metrics_dir.exists() else []


@pytest.mark.slow
def test_crash_fault_leaves_no_json(tmp_path: Path) -> None:
    run = torchrun(["--steps", "30", "--fault-crash-at-step", "5", "--fault-rank", "1",
                    "--collective-timeout-sec", "4", "--metrics-dir", str(tmp_path)], timeout=40.0)
    assert run.timed_out or run.returncode != 0, run.output
    assert "fault: crash at timed step 5" in run.stderr
    assert _no_partial_files(tmp_path) == []  # neither rank wrote, not even a temp file


@pytest.mark.slow
def test_hang_fault_becomes_collective_timeout(tmp_path: Path) -> None:
    run = torchrun(["--steps", "30", "--fault-hang-at-step", "3", "--fault-rank", "0",
                    "--collective-timeout-sec", "3", "--metrics-dir", str(tmp_path)], timeout=40.0)
    assert run.timed_out or run.returncode != 0, run.output
    assert "fault: hang at timed step 3" in run.stderr
    assert _no_partial_files(tmp_path) == []


# ----------------------------------------------------------------------------- single process, no traceml import


@pytest.mark.slow
def test_world_of_one_without_torchrun_never_imports_traceml(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ddpbench.workload import ddp_mlp\n"
        f"rc = ddp_mlp.main({[*TINY, '--steps', '5', '--metrics-dir', str(tmp_path)]!r})\n"
        "assert 'traceml_ai' not in sys.modules\n"
        "sys.exit(rc)\n"
    )
    env = child_env()
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    run = run_bounded([sys.executable, "-c", code], RUN_TIMEOUT_S, env=env)
    assert_no_leftover(run.procs)
    assert run.returncode == 0, run.output
    record = json.loads((tmp_path / "rank-0.json").read_text())
    assert record["world_size"] == 1 and record["timed_steps"] == 5
    assert validate_rank_record(record) == []


# ----------------------------------------------------------------------------- under traceml run


@pytest.mark.slow
@pytest.mark.parametrize("mode,host_sync", [("auto", "seed"), ("manual", "none")])
def test_traceml_records_every_step(tmp_path: Path, mode: str, host_sync: str) -> None:
    """TraceML's final summary counts warmup + timed steps (warmup is inside trace_step), in the seed script's loop
    (the host-to-device copy inside trace_step, the loss read after it) as in ddpbench's own."""
    master, aggregator = free_ports(2)
    logs, metrics = tmp_path / "traceml", tmp_path / "metrics"
    cmd = [
        sys.executable, "-m", "traceml_ai.launcher.cli", "run", str(SCRIPT), "--mode=summary",
        "--logs-dir", str(logs), "--run-name", f"wl-{mode}", "--nproc-per-node", "2",
        "--master-port", str(master), "--aggregator-port", str(aggregator),
        "--args", *TINY, "--steps", "20", "--warmup-steps", "3", "--metrics-dir", str(metrics),
        "--traceml-mode", mode, "--host-sync", host_sync,
    ]
    run = run_bounded(cmd, 120.0, env=child_env())
    assert_no_leftover(run.procs)
    assert run.returncode == 0, run.output
    ranks = read_ranks(metrics)
    for record in ranks:
        assert record["traceml"] == {"active": True, "mode": mode}
        assert record["timed_steps"] == 20 and record["host_sync"] == host_sync
        assert validate_rank_record(record) == []
    summary = json.loads((logs / f"wl-{mode}" / "final_summary.json").read_text())
    window = summary["step_time"]["global"]["window"]
    assert window["steps_analyzed"] == 20 + 3, window
    assert summary["step_time"]["metadata"]["training_total_steps"] == 20 + 3
