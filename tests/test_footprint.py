"""The footprint of a trial's processes (trial.json's ``footprint``): how processes are named and split, the upgrade of
older records, and a known answer: a real trial with an injected side process of known CPU load and memory
(``mode=inject inject.side_cpu inject.side_mb``) whose figures the footprint must recover within 10 %.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from ddpbench.formats.footprint import RANK_KIND, RANK_WORKER_KIND, trial_footprint
from ddpbench.formats.rank_record import upgrade_rank_record
from ddpbench.formats.trial_record import read_trial_record
from ddpbench.trial.footprint_sampler import process_kind
from ddpbench.workload.side_load import report_name
from helpers.cli import ONE_RANK, only_sweep_dir, run_ddpbench, trials_in

DATA = Path(__file__).parent / "data"
#: the known answer's tolerance, as a fraction of the figure
TOLERANCE = 0.10
SIDE_KIND = "ddpbench.workload.side_load"


@pytest.mark.parametrize("cmdline, name, kind", [
    (["/usr/bin/python3", "-m", "traceml.aggregator", "--port", "1"], "python3", "traceml.aggregator"),
    (["/venv/bin/python", "-u", "/venv/bin/torchrun", "--nproc-per-node=2", "x.py"], "python", "torchrun"),
    (["/venv/bin/python3.12", "-mddpbench.workload.side_load"], "python3.12", "ddpbench.workload.side_load"),
    (["/venv/bin/py-spy", "record", "--", "python"], "py-spy", "py-spy"),
    ([], "wandb-core", "wandb-core"),
])
def test_a_process_is_named_by_what_it_runs(cmdline: list, name: str, kind: str) -> None:
    assert process_kind(cmdline, name) == kind


def _process(pid: int, ppid: int, kind: str, cpu_s: float, rss: int, *, exact: bool = False,
             written: Any = 0) -> Dict[str, Any]:
    return {"pid": pid, "ppid": ppid, "kind": kind, "started_epoch": 100.0, "last_seen_epoch": 110.0,
            "cpu_user_s": cpu_s, "cpu_system_s": 0.0, "cpu_s": cpu_s, "sampled_cpu_s": cpu_s, "alive_s": 10.0,
            "peak_rss_bytes": rss, "peak_threads": 2, "write_bytes": written, "exact": exact}


def _node(node_rank: int, processes: list, exact_cpu_s: float) -> Dict[str, Any]:
    return {"node_rank": node_rank, "wall_s": 10.0, "footprint": {
        "sample_interval_s": 0.5, "samples": 20, "processes": processes,
        "sampled": {"peak_rss_bytes": sum(p["peak_rss_bytes"] for p in processes), "peak_threads": 2 * len(processes)},
        "exact": {"user_s": exact_cpu_s, "system_s": 0.0, "cpu_s": exact_cpu_s, "largest_peak_rss_bytes": 300,
                  "write_bytes": 4096},
        "guard_cpu_s": 0.1, "problems": []}}


def _rank(rank: int, node_rank: int, pid: int) -> Dict[str, Any]:
    return {"rank": rank, "node_rank": node_rank, "pid": pid, "train_s": 4.0,
            "timed_cpu_s": {"user": 1.5, "system": 0.5, "total": 2.0, "per_step_ms": 20.0}}


def test_the_footprint_splits_ranks_their_workers_and_side_processes_per_node() -> None:
    """Ranks are found by node and pid (the same pid on another node is another process), a rank's fork running its
    command is its worker, everything else keeps its kind; the total is the kernel's, the rest what samples missed."""
    node0 = [_process(10, 1, "torchrun", 1.0, 100), _process(11, 10, "ddp_mlp.py", 8.0, 300),
             _process(12, 11, "ddp_mlp.py", 0.5, 50), _process(13, 11, SIDE_KIND, 5.0, 200, exact=True)]
    node1 = [_process(10, 1, "torchrun", 1.0, 100), _process(11, 10, "ddp_mlp.py", 7.0, 310)]
    footprint = trial_footprint([_node(0, node0, 15.0), _node(1, node1, 8.5)], [_rank(0, 0, 11), _rank(1, 1, 11)])
    kinds = footprint["kinds"]
    assert set(kinds) == {"torchrun", RANK_KIND, RANK_WORKER_KIND, SIDE_KIND}
    assert kinds[RANK_KIND]["processes"] == 2 and kinds[RANK_KIND]["cpu_s"] == pytest.approx(15.0)
    assert kinds[SIDE_KIND]["exact"] is True and kinds[SIDE_KIND]["cores"] == pytest.approx(0.5)
    assert kinds["torchrun"]["processes"] == 2 and kinds["torchrun"]["peak_rss_bytes"] == 200
    assert [r["cpu_s"] for r in footprint["ranks"]] == [8.0, 7.0]
    assert footprint["ranks"][0]["timed_cores"] == pytest.approx(0.5)
    total = footprint["total"]
    assert total["cpu_s"] == pytest.approx(23.5) and total["cores"] == pytest.approx(2.35)
    assert total["unsampled_cpu_s"] == pytest.approx(23.5 - 22.5)
    assert footprint["timed"] == {"cpu_s": 4.0, "cpu_ms_per_step": 20.0}
    assert footprint["unknown"] == {}


def test_what_cannot_be_known_is_null_with_its_reason() -> None:
    """A node seen only through its ranks, unreadable write counters and a rank without its CPU time: null, and why."""
    node0 = _node(0, [_process(11, 10, "ddp_mlp.py", 8.0, 300, written=None)], 8.0)
    node0["footprint"]["problems"] = ["per-process I/O counters unreadable: AccessDenied"]
    bare = {**_rank(1, 1, 11), "timed_cpu_s": None}
    footprint = trial_footprint([node0, {"node_rank": 1, "source": "ranks"}], [_rank(0, 0, 11), bare])
    assert footprint["kinds"][RANK_KIND]["write_bytes"] is None
    assert footprint["ranks"][1]["cpu_s"] is None and footprint["ranks"][1]["timed_cpu_s"] is None
    assert footprint["timed"] is None
    assert set(footprint["unknown"]) == {"nodes[1]", "write_bytes", "ranks[1].cpu_s", "ranks[1].timed_cpu_s",
                                         "timed"}
    nothing = trial_footprint([{"node_rank": 0, "source": "ranks"}], [])
    assert nothing["total"] is None and "total" in nothing["unknown"]


def test_older_records_are_read_without_a_footprint() -> None:
    """A trial record before version 6 has ``footprint`` null; a rank record before version 5 ``timed_cpu_s`` null."""
    record, problem = read_trial_record(DATA / "trial-v1.json")
    assert problem is None and record is not None and record["footprint"] is None
    rank = upgrade_rank_record(json.loads((DATA / "rank-v1.json").read_text()))
    assert rank["timed_cpu_s"] is None


@pytest.mark.slow
@pytest.mark.quiet
def test_an_injected_side_process_is_recovered(tmp_path: Path) -> None:
    """One rank starts a side process spinning at half a core and holding 200 MiB; the trial's footprint finds it by
    name and recovers its CPU cores used (CPU s per s alive) and its peak memory within 10 %. The cores are compared
    with what the side process measured itself (a busy machine may give it less than asked); the memory with what it
    was asked to hold plus its interpreter's own."""
    run = run_ddpbench(["-m", "mode=inject", "repeat=1", "model=tiny", ONE_RANK, "stop.steps=1000",
                        "stop.warmup_steps=2", "trial.log_every=0", "inject.step_ms=0", "inject.startup_s=0",
                        "inject.teardown_s=0", "inject.side_cpu=0.5", "inject.side_mb=200", "sweep_name=footprint"],
                       tmp_path, timeout=300)
    assert run.returncode == 0, run.output
    (trial,) = trials_in(only_sweep_dir(tmp_path))
    assert trial["status"] == "ok", run.output
    assert trial["schema_version"] == 6
    own = json.loads((Path(trial["attempt"]["dir"]) / "metrics" / report_name(0)).read_text())
    side = trial["footprint"]["kinds"][SIDE_KIND]
    assert side["processes"] == 1 and side["exact"] is True
    assert side["cores"] == pytest.approx(own["cores"], rel=TOLERANCE), (side, own)
    assert side["cpu_s"] == pytest.approx(own["cpu_s"], rel=TOLERANCE), (side, own)
    held = 200 * 2**20 + own["baseline_rss_bytes"]
    assert own["rss_bytes"] == pytest.approx(held, rel=0.02), own
    assert side["peak_rss_bytes"] == pytest.approx(held, rel=TOLERANCE), (side, own)
    assert side["peak_rss_upper_bound"] is False
    rank = trial["footprint"]["ranks"][0]
    assert rank["timed_cpu_s"] > 0 and rank["timed_cpu_ms_per_step"] == pytest.approx(
        1000 * rank["timed_cpu_s"] / trial["steps"], rel=1e-6)
    total = trial["footprint"]["total"]
    assert total["cpu_s"] >= side["cpu_s"] + rank["timed_cpu_s"]
    assert total["largest_peak_rss_bytes"] >= side["peak_rss_bytes"]
