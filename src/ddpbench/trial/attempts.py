"""Attempts of a trial in its job dir (docs/formats.md): reuse an ok one (resume), else give the new one a folder,
``attempts/<n>/``, that holds it whole. Nodes sharing node 0's job dir write into the attempt node 0 names in
``attempts/current.json`` (with the launch's run token)."""

import contextlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence

from ddpbench.choices import TrialStatus
from ddpbench.cluster import NodePlan
from ddpbench.errors import StorageError
from ddpbench.formats.layout import LOGS_DIR, METRICS_DIR, NODES_DIR, AttemptLayout
from ddpbench.formats.trial_record import TRIAL_FILE, read_trial_record
from ddpbench.io import read_json, storage_error, write_json_atomic

#: the folder of a job dir holding one folder per attempt
ATTEMPTS_DIR = "attempts"
#: node 0's pointer to the attempt it launches, in ATTEMPTS_DIR
CURRENT_FILE = "current.json"
#: seconds a node waits for node 0's CURRENT_FILE to show on the shared file system
JOIN_WAIT_S = 10.0
#: what one attempt left in its job dir before attempt folders; moved together into previous/<n>/
ATTEMPT_ENTRIES = (TRIAL_FILE, LOGS_DIR, METRICS_DIR, "traceml", NODES_DIR)


@dataclass(frozen=True)
class Attempt:
    """One attempt of a trial: its number in the job dir (1, 2, ...) and the folder its files go to."""

    number: int
    dir: Path

    @property
    def layout(self) -> AttemptLayout:
        """Where this attempt's files lie."""
        return AttemptLayout(self.dir)

    def section(self) -> Dict[str, Any]:
        """The trial record's ``attempt`` section."""
        return {"number": self.number, "dir": str(self.dir.resolve())}


def previous_ok(job_dir: Path, config_hash: str) -> Optional[Dict[str, Any]]:
    """The trial record in ``job_dir`` if it is ok and was made from the same resolved config, else None."""
    previous, _ = read_trial_record(job_dir / TRIAL_FILE)
    if previous is not None and previous.get("status") == TrialStatus.ok and previous.get("config_hash") == config_hash:
        return previous
    return None


def start_attempt(job_dir: Path, run_token: str) -> Attempt:
    """Node 0 (the owner): keep what earlier attempts left, claim the next attempt folder, name it for the peers."""
    with _storage(job_dir):
        number = _record_number(job_dir)  # the last attempt's trial.json moves into its own attempt folder
        filed = job_dir / ATTEMPTS_DIR / str(number) / TRIAL_FILE
        if number is not None and number >= 1 and not filed.exists():
            filed.parent.mkdir(parents=True, exist_ok=True)
            (job_dir / TRIAL_FILE).replace(filed)
        present = [name for name in ATTEMPT_ENTRIES if (job_dir / name).exists()]  # from before attempt folders
        if present:
            previous = 1
            while (job_dir / "previous" / str(previous)).exists():
                previous += 1
            target = job_dir / "previous" / str(previous)
            target.mkdir(parents=True)
            for name in present:
                shutil.move(str(job_dir / name), str(target / name))
    attempt = new_attempt(job_dir)
    write_json_atomic(job_dir / ATTEMPTS_DIR / CURRENT_FILE, {"number": attempt.number, "run_token": run_token})
    return attempt


def join_attempt(job_dir: Path, run_token: str, node_ranks: Sequence[int], wait_s: float) -> Attempt:
    """A node sharing node 0's job dir: node 0's attempt of launch ``run_token`` (waited for up to ``wait_s``), else
    one of its own."""
    deadline = time.monotonic() + wait_s
    while (launched := _launched(job_dir, run_token, node_ranks)) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return launched or new_attempt(job_dir)


def attempt_of_launch(job_dir: Path, run_token: str) -> Attempt:
    """The attempt of launch ``run_token`` for a record written on its behalf (a SLURM job that died or never ran):
    the one its node 0 started and left without a record, else one started as node 0 would."""
    launched = _launched(job_dir, run_token, ())
    return launched if launched is not None else start_attempt(job_dir, run_token)


def _launched(job_dir: Path, run_token: str, node_ranks: Sequence[int]) -> Optional[Attempt]:
    """The attempt ``current.json`` names for ``run_token`` unless it has a record of its own or of ``node_ranks`` (an
    earlier launch's: a static run token is the same on every resume)."""
    root = job_dir / ATTEMPTS_DIR
    try:
        current = read_json(root / CURRENT_FILE)
        number = int(current["number"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    folder = root / str(number)
    taken = [folder / TRIAL_FILE, *(AttemptLayout(folder).node_record(r) for r in node_ranks)]
    if current.get("run_token") != run_token or _record_number(job_dir) == number or any(p.exists() for p in taken):
        return None
    return Attempt(number, folder)


def attempt_for(job_dir: Path, plan: NodePlan) -> Attempt:
    """This driver's attempt of the launch ``plan`` describes: node 0 starts one, a node sharing its job dir joins it,
    any other node (static with ``shared_dir=false``) starts one of its own."""
    if plan.owner:
        return start_attempt(job_dir, plan.run_token)
    if plan.peer_records:
        return join_attempt(job_dir, plan.run_token, plan.node_ranks, 0.0 if plan.skip_reason else JOIN_WAIT_S)
    return new_attempt(job_dir)


def new_attempt(job_dir: Path) -> Attempt:
    """The next free ``attempts/<n>/``, created (mkdir is the claim, so two nodes never get the same one)."""
    root = job_dir / ATTEMPTS_DIR
    with _storage(job_dir):
        root.mkdir(parents=True, exist_ok=True)
        number = 1 + max((int(p.name) for p in root.iterdir() if p.name.isdigit()), default=0)
        while True:
            try:
                (root / str(number)).mkdir()
                return Attempt(number, root / str(number))
            except FileExistsError:
                number += 1


def _record_number(job_dir: Path) -> Optional[int]:
    try:
        return int(read_json(job_dir / TRIAL_FILE)["attempt"]["number"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def _storage(job_dir: Path) -> Iterator[None]:
    """Turn an OSError of the block (a full or read-only disk) into a one-line StorageError about ``job_dir``."""
    try:
        yield
    except StorageError:
        raise
    except OSError as error:
        raise storage_error(job_dir, error) from None
