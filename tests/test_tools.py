"""Tools beside TraceML (torch.profiler, py-spy, W&B offline): each mode's real trial leaves its own output.

One sweep runs native, torch_profiler, pyspy, wandb_offline, a torch_profiler whose schedule
never records and a user's mode named and described with markup (the history page must show it as
text); the W&B run happens with every HTTP(S) route pointed at a listener that must see no
connection. The artifact checks are also run on small files written here (pure parsing).
"""

from __future__ import annotations

import html
import json
import re
import socket
import threading
from pathlib import Path
from typing import Dict, Tuple

import pytest
from omegaconf import OmegaConf

from ddpbench.trial.artifacts import (
    PTRACE_REFUSED,
    ToolOutput,
    check_speedscope,
    check_torch_trace,
    check_wandb_offline,
    ptrace_problem,
    verdict,
)
from ddpbench.report.cli import main as report_main
from helpers import browser
from helpers.cli import ONE_RANK, CliRun, only_sweep_dir, run_ddpbench, trials_in

TOOL_MODES = ("torch_profiler", "pyspy", "wandb_offline")
#: a torch_profiler whose schedule waits past the end of the run: nothing is ever recorded
IDLE_PROFILER = "defaults:\n  - torch_profiler\n  - _self_\nname: profiler_idle\nworkload_args: ['--torch-profiler=1000,1,3,1']\n"
#: a user's mode whose name and description hold markup and script: every page showing them must show text
MARKED_NAME = "<b>x</b><script>document.title='pwned'</script>"
MARKED_DESCRIPTION = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"
MARKED = ("defaults:\n  - native\n  - _self_\n"
          f"name: {json.dumps(MARKED_NAME)}\nrole: tool\ndescription: {json.dumps(MARKED_DESCRIPTION)}\n")


class Listener:
    """A TCP listener on 127.0.0.1 counting the connections made to it (a stand-in for every remote server)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def tool_sweep(tmp_path_factory: pytest.TempPathFactory) -> Tuple[CliRun, Dict[str, dict], int]:
    """The sweep's run, its trials by mode, and the connections the stand-in server saw."""
    cwd = tmp_path_factory.mktemp("tools")
    (cwd / "userconf" / "mode").mkdir(parents=True)
    (cwd / "userconf" / "mode" / "profiler_idle.yaml").write_text(IDLE_PROFILER)
    (cwd / "userconf" / "mode" / "marked.yaml").write_text(MARKED)
    server = Listener()
    offline_env = {"WANDB_BASE_URL": server.url, "HTTP_PROXY": server.url, "HTTPS_PROXY": server.url,
                   "http_proxy": server.url, "https_proxy": server.url, "NO_PROXY": "", "no_proxy": ""}
    try:
        run = run_ddpbench(["--config-dir", str(cwd / "userconf"), "-m",
                            "mode=native,torch_profiler,pyspy,wandb_offline,profiler_idle,marked", "repeat=1", "model=tiny",
                            "stop.steps=8", "stop.warmup_steps=2", "trial.log_every=0", "sweep_name=tools"],
                           cwd, timeout=400, env=offline_env)
    finally:
        server.close()
    trials = {t["mode"]: t for t in trials_in(only_sweep_dir(cwd))}
    return run, trials, server.connections


@pytest.mark.slow
def test_each_tool_mode_leaves_its_output(tool_sweep: Tuple[CliRun, Dict[str, dict], int]) -> None:
    """Every tool trial is ok, records its output in trial.json, and that output is on disk and usable."""
    run, trials, _ = tool_sweep
    assert set(trials) == {"native", *TOOL_MODES, "profiler_idle", MARKED_NAME}, run.output
    assert trials["native"]["status"] == "ok" and trials["native"]["tool"] is None, run.output
    for mode in TOOL_MODES:
        trial = trials[mode]
        assert trial["status"] == "ok", (mode, trial["error"], run.output)
        tool = trial["tool"]
        assert tool["usable"] and tool["problem"] is None and tool["bytes"] > 0, tool
        assert tool["artifacts"] and all(Path(p).exists() for p in tool["artifacts"]), tool
        assert all(p.startswith(trial["job_dir"]) for p in tool["artifacts"]), tool
    traces = [Path(p).name for p in trials["torch_profiler"]["tool"]["artifacts"]]
    assert {name.split(".")[0] for name in traces} == {"rank0", "rank1"}, traces
    profile = json.loads(Path(trials["pyspy"]["tool"]["artifacts"][0]).read_text())
    sampled = {p["name"].split(" Thread")[0] for p in profile["profiles"] if p.get("samples")}
    assert len(sampled) >= 2, f"py-spy --subprocesses sampled only {sampled}: the ranks are not in the profile"


@pytest.mark.slow
def test_wandb_stays_offline(tool_sweep: Tuple[CliRun, Dict[str, dict], int]) -> None:
    """The W&B run is an offline run dir in the job dir, never synced, and nothing connected to a server."""
    _, trials, connections = tool_sweep
    (run_dir,) = trials["wandb_offline"]["tool"]["artifacts"]
    assert Path(run_dir).name.startswith("offline-run-"), run_dir
    assert not list(Path(run_dir).parent.glob("*.synced")) and not list(Path(run_dir).glob("*.synced")), run_dir
    assert connections == 0, f"{connections} connection(s) to the W&B server / HTTP proxy during an offline run"


@pytest.mark.slow
def test_tool_that_recorded_nothing_fails_the_trial(tool_sweep: Tuple[CliRun, Dict[str, dict], int]) -> None:
    """A profiler schedule that never reaches `active` leaves no trace: the trial is failed with one line."""
    run, trials, _ = tool_sweep
    idle = trials["profiler_idle"]
    assert idle["status"] == "failed", idle
    assert idle["exit_code"] == 0, idle  # the processes were fine: only the tool's output is missing
    assert idle["error"].startswith("torch.profiler output not usable: torch.profiler wrote no trace in torch_profiler"), idle
    assert "\n" not in idle["error"]
    assert idle["tool"] == {"name": "torch.profiler", "artifacts": [], "bytes": 0, "usable": False, "format": "known",
                            "problem": idle["error"].split(": ", 1)[1]}
    assert run.returncode != 0, "a sweep with a failed trial must exit non-zero"


@pytest.mark.slow  # launches a browser
def test_history_page_shows_a_marked_mode_as_text(tool_sweep: Tuple[CliRun, Dict[str, dict], int],
                                                  tmp_path: Path) -> None:
    """A mode named and described with markup and script: the history page (as the browser built it) shows text."""
    _, trials, _ = tool_sweep
    assert trials[MARKED_NAME]["status"] == "ok", trials[MARKED_NAME]["error"]
    sweep = Path(trials[MARKED_NAME]["sweep_dir"])
    assert report_main(["--history", str(sweep), "--out", str(tmp_path)]) == 0
    dom = browser.load(tmp_path / "index.html", tmp_path / "browser").dom
    assert "<title>ddpbench overhead history</title>" in dom  # no script ran
    tags = [t.lower() for t in re.findall(r"<[^>]+>", dom)]
    assert not [t for t in tags if t.startswith(("<script", "<b>")) or "onerror" in t], tags
    assert html.escape(MARKED_NAME, quote=False) in dom and html.escape(MARKED_DESCRIPTION, quote=False) in dom


@pytest.mark.slow
def test_pyspy_trial_keeps_the_exit_status_of_the_training(tmp_path: Path) -> None:
    """py-spy exits 0 whatever its child did: a run crashing under mode=pyspy still records torchrun's failure."""
    run = run_ddpbench(["mode=pyspy", "model=tiny", "stop.steps=8", "stop.warmup_steps=2", "trial.log_every=0",
                        "fault.crash_at_step=3", "fault.rank=0", ONE_RANK], tmp_path, timeout=240)
    assert run.returncode != 0, run.output
    [path] = (tmp_path / "outputs" / "runs").glob("*/trial.json")
    trial = json.loads(path.read_text())
    assert trial["status"] == "failed", trial
    assert trial["exit_code"] not in (0, None), trial
    assert trial["nodes"][0]["exit_code"] == trial["exit_code"], trial["nodes"]
    assert trial["error"].startswith(f"node 0 exited with {trial['exit_code']}: "), trial["error"]
    assert "\n" not in trial["error"]


def test_missing_executable_is_one_line(tmp_path: Path) -> None:
    """A mode needing an executable that is not installed stops before any launch with one line naming the package."""
    conf = tmp_path / "userconf" / "mode"
    conf.mkdir(parents=True)
    (conf / "ghost.yaml").write_text("defaults:\n  - pyspy\n  - _self_\nname: ghost\n"
                                     "requires_executable: ghost-sampler-xyz\nrequires_package: ghost-sampler\n"
                                     "wrapper: ['ghost-sampler-xyz', '--']\n")
    run = run_ddpbench(["--config-dir", str(tmp_path / "userconf"), "-m", "mode=native,ghost"], tmp_path, timeout=120)
    assert run.returncode != 0
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ddpbench: error: mode=ghost needs the executable 'ghost-sampler-xyz' "
                                                   "(package 'ghost-sampler')"), run.output
    assert lines[0].endswith("pip install ghost-sampler"), lines[0]
    assert not list(tmp_path.rglob("trial.json")), "a trial ran although the tool is missing"


# --- pure parsing: py-spy's refusal lines and the artifact checks on small files ---

#: what py-spy 0.4.3 printed here when it was denied the target (setpriv without CAP_SYS_PTRACE, other uid)
PYSPY_REFUSALS = [
    "Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'",
    "    0: Permission denied (os error 13)",
    "Error: Operation not permitted (os error 1)",
]
NOT_REFUSALS = [
    "PermissionError: [Errno 13] Permission denied: '/data'",  # the workload's own error, not py-spy's
    "Error: No such file or directory (os error 2)",
    "Error: Resource temporarily unavailable (os error 11)",
]


@pytest.mark.parametrize("line", PYSPY_REFUSALS)
def test_ptrace_refusal_is_named(line: str) -> None:
    assert PTRACE_REFUSED.search(line)
    problem = ptrace_problem(line)
    assert "kernel.yama.ptrace_scope=0" in problem and "CAP_SYS_PTRACE" in problem and "\n" not in problem


@pytest.mark.parametrize("line", NOT_REFUSALS)
def test_other_errors_are_not_ptrace(line: str) -> None:
    assert not PTRACE_REFUSED.search(line)


def test_verdict() -> None:
    """An ok trial without usable output fails; a failed one keeps its error unless the tool explains it."""
    bad = ToolOutput("py-spy", [], 0, False, "py-spy wrote no profile at pyspy/p.json")
    assert verdict("ok", None, bad) == ("failed", "py-spy output not usable: py-spy wrote no profile at pyspy/p.json")
    assert verdict("failed", "node 0 exited with 1", bad) == ("failed", "node 0 exited with 1")
    refused = ToolOutput("py-spy", [], 0, False, ptrace_problem(PYSPY_REFUSALS[0]), explains_failure=True)
    assert verdict("failed", "node 0 exited with 1", refused) == ("failed", refused.problem)
    good = ToolOutput("py-spy", ["p.json"], 10, True, None)
    assert verdict("ok", None, good) == ("ok", None) and verdict("ok", None, None) == ("ok", None)


CFG = OmegaConf.create({"tool": {"torch_profiler": {"wait": 1, "warmup": 1, "active": 3}},
                        "stop": {"kind": "steps", "steps": 8, "warmup_steps": 2}})


def _problem(check, path: Path) -> str | None:  # type: ignore[no-untyped-def]
    return check(path, CFG)[1]


def test_speedscope_checks(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    assert "wrote no profile" in _problem(check_speedscope, path)
    path.write_text("{not json")
    assert "unreadable" in _problem(check_speedscope, path)
    path.write_text(json.dumps({"profiles": [{"type": "sampled", "samples": []}]}))
    assert "holds no samples" in _problem(check_speedscope, path)
    path.write_text(json.dumps({"profiles": [{"type": "sampled", "samples": [[0]], "weights": [1]}]}))
    assert _problem(check_speedscope, path) is None


def test_torch_trace_checks(tmp_path: Path) -> None:
    assert _problem(check_torch_trace, tmp_path).startswith("torch.profiler wrote no trace")
    late = OmegaConf.merge(CFG, {"tool": {"torch_profiler": {"wait": 20}}})
    assert check_torch_trace(tmp_path, late)[1].endswith(  # type: ignore[union-attr]
        "its schedule needs 24 steps (wait+warmup+active), the run has 10 (warmup+timed)")
    (tmp_path / "rank0.1.pt.trace.json").write_text(json.dumps({"traceEvents": [{"name": "aten::mm"}]}))
    assert _problem(check_torch_trace, tmp_path) is None
    (tmp_path / "rank1.1.pt.trace.json").write_text(json.dumps({"traceEvents": []}))
    assert "holds no events" in _problem(check_torch_trace, tmp_path)


def test_wandb_checks(tmp_path: Path) -> None:
    assert "no W&B offline run" in _problem(check_wandb_offline, tmp_path)
    run = tmp_path / "wandb" / "offline-run-20260101_000000-abc"
    run.mkdir(parents=True)
    assert "no record file" in _problem(check_wandb_offline, tmp_path)
    (run / "run-abc.wandb").write_bytes(b":W&B\x00header only")
    assert "no logged steps" in _problem(check_wandb_offline, tmp_path)
    (run / "run-abc.wandb").write_bytes(b":W&B\x00...loss...step_time_ms...")
    assert _problem(check_wandb_offline, tmp_path) is None
    (tmp_path / "wandb" / "run-20260101_000000-def").mkdir()
    assert "is not offline" in _problem(check_wandb_offline, tmp_path)


def test_schedule_argument_is_checked() -> None:
    """--torch-profiler takes WAIT,WARMUP,ACTIVE,REPEAT with ACTIVE >= 1 (parsed without torch)."""
    from ddpbench.workload.flags import profiler_schedule

    assert profiler_schedule("1,1,3,1") == (1, 1, 3, 1)
    for bad in ("1,1,0,1", "1,2,3", "-1,1,3,1"):
        with pytest.raises(Exception, match="WAIT,WARMUP,ACTIVE,REPEAT"):
            profiler_schedule(bad)


def test_harness_never_imports_wandb_or_the_profiler() -> None:
    """Importing the harness (every workload script does) loads neither wandb nor torch.profiler."""
    import subprocess
    import sys

    code = ("import sys, ddpbench.workload.harness, ddpbench.workload.tools; "
            "print(sorted(m for m in sys.modules if m == 'wandb' or m.startswith(('wandb.', 'torch.profiler'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out
